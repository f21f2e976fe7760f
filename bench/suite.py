"""The benchmark suite behind `bench/run` (see its docstring). Sections:

throughput   Heartbeat v4 and ConsumerGroupHeartbeat v1, closed loop, against the canned server,
             the decode-only server, librdkafka's mock cluster (CGH only) and the coordinator;
             the coordinator's result is reported as a ratio to the decode-only server.
scale        KIP-848 members in many groups heartbeating at their interval: latency and RSS.
convergence  A stable group gains members: time until every member owns its balanced share,
             for KIP-848, classic eager and classic cooperative model clients.
churn        KIP-848 join storm, then leaves and crashes.
assignor     The uniform assignor (bench/assignor_bench.py's shapes and helpers) and the streams task
             assignor with its warm-up step (bench/streams_assignor_bench.py, Kafka's JMH shapes).
replay       Start-up replay into the core vs. the log-level pass (bench/replay_core_bench.py).
commits      OffsetCommit throughput under each log.flush.policy.
shards       1 vs 2 shard processes (bench/shards_bench.py): steady ConsumerGroupHeartbeat beside
             decode-only, KIP-848 members at scale over the shards, OffsetCommit with fsync per
             batch, and the steady row against BENCH_KAFKA=host:port when set.
kafka        Side by side with Apache Kafka 4.0 in one sitting (bench/kafka_side.py): CPU per steady
             heartbeat at a fixed rate, closed-loop req/s, CPU per joining member and join-to-stable
             time at N = 10..1,000, CPU per OffsetCommit (ours with fsync and without); Kafka started
             from KAFKA_HOME or shared/kafka beside the checkout, or BENCH_KAFKA; each row says why
             when Kafka is missing.
clusterlog   The coordinator's log on the Kafka it fronts vs. on local disk (bench/clusterlog_bench.py):
             OffsetCommit throughput and p99, KIP-848 join latency, takeover after SIGKILL of the
             owner, start-up replay rate from the topic; every row says why when Kafka is missing.
share        Share groups against a plain consumer group reading the same records (bench/share_bench.py):
             records/s and server CPU per record of 1 plain consumer, a share group of 1 and of 4
             members on 1 partition (and 4 on 2), alternating, in one sitting; raw requests (the
             server the bottleneck) and confluent-kafka's Consumer / ShareConsumer (as users run them).
sidecar      Produce and Fetch of 1 KB messages through the sidecar vs. the same upstream (librdkafka's
             mock cluster) directly (bench/sidecar_throughput.py): throughput ratio, added p99.
streams      Kafka Streams (trunk client) scaling out from 2 to 3 instances over a 200,000-key store,
             warm-ups on vs off alternating (bench/streams_scaleout.py): the longest processing gap
             of a moved task, the baseline gap, the newcomer's restoration; says why when the trunk
             client or a JDK is missing.

This module runs the sections (their sizes, the servers they start, the profiler) and hands their
rows to `bench/report.py`, which writes BENCHMARKS.md. The sidecar, assignor, replay and shards
sections delegate their measurement to their own modules.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import uvloop

from bench.loadgen import scenarios as sc
from bench.report import Row, fmt_rps, machine, render, verdict, with_hand_written
from tests.support.server import ServerProcess

ROOT = Path(__file__).resolve().parent.parent
SECTIONS = ["throughput", "scale", "convergence", "churn", "assignor", "replay", "commits", "sidecar", "shards",
            "kafka", "clusterlog", "streams", "share"]


@dataclass(frozen=True)
class Sizes:
    label: str
    tp_seconds: float
    tp_groups: int
    tp_per_group: int
    tp_connections: int
    tp_window: int
    scale_members: int
    scale_groups: int
    scale_partitions: int
    scale_interval_ms: int
    scale_join_s: float
    scale_measure_s: float
    conv_members: int
    conv_added: int
    conv_partitions: int
    conv_interval_ms: int
    churn_members: int
    churn_groups: int
    assignor_members: int
    assignor_topics: int
    assignor_per_topic: int
    replay_records: int
    commit_seconds: float
    sidecar_messages: int = 50_000
    sidecar_latency: int = 2_000
    streams_runs: int = 2
    streams_keys: int = 200_000
    share_records: int = 200_000
    share_rounds: int = 3


FULL = Sizes("full", 8.0, 100, 10, 16, 16, 50_000, 1_000, 100, 5_000, 300.0, 60.0, 100, 10, 1_000, 1_000,
             2_000, 100, 1_000, 100, 1_000, 1_000_000, 5.0)
QUICK = Sizes("quick", 3.0, 20, 10, 16, 16, 5_000, 100, 100, 2_000, 5.0, 10.0, 100, 10, 1_000, 500,
              500, 50, 1_000, 100, 1_000, 200_000, 2.0)
TINY = Sizes("tiny", 0.6, 2, 5, 4, 4, 100, 5, 20, 500, 0.3, 1.0, 10, 2, 100, 200,
             20, 2, 20, 4, 50, 5_000, 0.5)


QUICK = replace(QUICK, sidecar_messages=10_000, sidecar_latency=500, streams_runs=1, share_records=50_000,
                share_rounds=1)
TINY = replace(TINY, sidecar_messages=1_000, sidecar_latency=50, streams_runs=0, share_records=2_000,
               share_rounds=1)


# ---- servers ----------------------------------------------------------------------------------

@contextlib.contextmanager
def coordinator(workdir: Path, name: str, overrides: dict[str, str]) -> Iterator[ServerProcess]:
    server = ServerProcess(workdir / name / "data", overrides={"group.initial.rebalance.delay.ms": "300",
                                                               **overrides})
    server.data_dir.parent.mkdir(parents=True, exist_ok=True)
    try:
        yield server.start()
    finally:
        server.stop()


@contextlib.contextmanager
def reference(kind: str) -> Iterator[int]:
    proc = subprocess.Popen([sys.executable, "-m", "bench.refservers", kind], cwd=ROOT, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line.startswith("listening "):
            raise RuntimeError(f"{kind} server did not start")
        yield int(line.rsplit(":", 1)[1])
    finally:
        with contextlib.suppress(Exception):
            assert proc.stdin is not None
            proc.stdin.close()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def consumer_overrides(interval_ms: int, session_ms: int | None = None) -> dict[str, str]:
    session = session_ms or max(45_000, interval_ms * 3)
    return {
        "group.consumer.heartbeat.interval.ms": str(interval_ms),
        "group.consumer.min.heartbeat.interval.ms": str(min(interval_ms, 5_000)),
        "group.consumer.session.timeout.ms": str(session),
        "group.consumer.min.session.timeout.ms": str(min(session, 45_000)),
        "group.consumer.max.session.timeout.ms": str(max(session, 60_000)),
    }


class Profiler:
    """py-spy on the coordinator while a measurement runs (when --profile is given)."""

    def __init__(self, directory: Path | None) -> None:
        self.directory = directory
        self.spy = shutil.which("py-spy", path=str(ROOT / ".venv" / "bin")) or shutil.which("py-spy")

    @contextlib.contextmanager
    def record(self, pid: int, name: str, seconds: float) -> Iterator[None]:
        if self.directory is None or self.spy is None:
            yield
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        raw = self.directory / f"{name}.txt"
        proc = subprocess.Popen([self.spy, "record", "-p", str(pid), "-d", str(max(int(seconds), 1)), "-r", "250",
                                 "-f", "raw", "-o", str(raw)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            yield
        finally:
            try:
                proc.wait(seconds + 30)
            except subprocess.TimeoutExpired:
                proc.kill()
            if raw.exists():
                (self.directory / f"{name}.summary.txt").write_text(summarize_profile(raw))


def summarize_profile(raw: Path, top: int = 30) -> str:
    own: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        n = int(count)
        total += n
        frames = stack.split(";")
        own[frames[-1]] += n
        for frame in set(frames):
            inclusive[frame] += n
    lines = [f"samples: {total}", "", "self:"]
    lines += [f"{n / total * 100:5.1f}%  {f}" for f, n in own.most_common(top)]
    lines += ["", "inclusive:"]
    lines += [f"{n / total * 100:5.1f}%  {f}" for f, n in inclusive.most_common(top + 10)]
    return "\n".join(lines) + "\n"


# ---- sections ---------------------------------------------------------------------------------

async def section_throughput(s: Sizes, workdir: Path, prof: Profiler, procs: int) -> list[Row]:
    rows: list[Row] = []
    members = s.tp_groups * s.tp_per_group
    knobs = {"connections": s.tp_connections, "window": s.tp_window, "seconds": s.tp_seconds,
             "warmup": min(0.5, s.tp_seconds / 4), "processes": procs}
    hb_ref, cgh_ref = sc.synthetic_heartbeats(members), sc.synthetic_consumer_heartbeats(members)
    results: dict[tuple[str, str], dict[str, Any]] = {}
    for kind, label in (("canned", "canned responses"), ("decode", "decode-only (kio)")):
        with reference(kind) as port:
            results[("hb", label)] = await sc.throughput(port, hb_ref, **knobs)
            results[("cgh", label)] = await sc.throughput(port, cgh_ref, **knobs)
    try:
        with reference("mock") as port:
            mock_members, _ = await sc.join_consumers(port, s.tp_groups, s.tp_per_group, "absent", 0, regex="",
                                                      timeout=30)
            results[("cgh", "librdkafka mock")] = await sc.throughput(port, [m.template() for m in mock_members],
                                                                      **knobs)
    except Exception as exc:  # optional peer
        print(f"  librdkafka mock unavailable: {exc!r}", flush=True)
    with coordinator(workdir, "throughput", consumer_overrides(1_000)) as server:
        port = server.port
        await sc.create_topics(port, {"t10": 10})
        classic = await sc.join_classic(port, s.tp_groups, s.tp_per_group, {"t10": 10})
        with prof.record(server.proc.pid, "heartbeat", s.tp_seconds):  # type: ignore[union-attr]
            results[("hb", "coordinator")] = await sc.throughput(port, classic, **knobs)
        versions = await sc.api_versions(port)
        if 68 in versions:
            consumers, _ = await sc.join_consumers(port, s.tp_groups, s.tp_per_group, "t10", 10)
            with prof.record(server.proc.pid, "consumer_group_heartbeat", s.tp_seconds):  # type: ignore[union-attr]
                results[("cgh", "coordinator")] = await sc.throughput(port, [m.template() for m in consumers],
                                                                      **knobs)
    names = {"hb": "Heartbeat v4 throughput", "cgh": "ConsumerGroupHeartbeat v1 throughput"}
    for api in ("hb", "cgh"):
        base = results.get((api, "decode-only (kio)"))
        for (a, label), summary in results.items():
            if a != api:
                continue
            row = Row("throughput", names[api], label, fmt_rps(summary), detail=summary)
            if label == "coordinator" and base:
                ratio = summary["rps"] / base["rps"]
                row.result += f"; **{ratio:.2f}× decode-only**"
                row.target, row.met = "≥ 0.6× decode-only", verdict(ratio >= 0.6)
            rows.append(row)
        if (api, "coordinator") not in results:
            rows.append(Row("throughput", names[api], "coordinator", "API 68 not served", "≥ 0.6× decode-only",
                            "n/a"))
    return rows


async def section_scale(s: Sizes, workdir: Path, prof: Profiler) -> list[Row]:
    with coordinator(workdir, "scale", consumer_overrides(s.scale_interval_ms)) as server:
        port = server.port
        if 68 not in await sc.api_versions(port):
            return [Row("scale", "scale", "coordinator", "API 68 not served (classic fallback not run)")]
        await sc.create_topics(port, {"scale": s.scale_partitions})
        with prof.record(server.proc.pid, "scale", s.scale_join_s + s.scale_measure_s + 20):  # type: ignore[union-attr]
            r = await sc.scale(port, server.proc.pid, s.scale_members, s.scale_groups, "scale",  # type: ignore[union-attr]
                               s.scale_partitions, join_s=s.scale_join_s, measure_s=s.scale_measure_s,
                               settle_timeout=max(120.0, s.scale_join_s * 4))
    what = (f"{s.scale_members:,} KIP-848 members in {s.scale_groups:,} groups, {s.scale_interval_ms / 1000:g} s "
            f"interval, {s.scale_measure_s:g} s")
    rss = r.get("rss") or 0
    rows = [
        Row("scale", f"heartbeat latency, {what}", "coordinator",
            fmt_rps(r) + f"; CPU: server {r['server_cpu']:.0f} %, load generator {r['loadgen_cpu']:.0f} % of a core",
            "p99 < 10 ms", verdict(r["p99_ms"] < 10 and r["settled"]), r),
        Row("scale", f"server RSS, {what}", "coordinator",
            f"{rss / 2**20:,.0f} MiB (peak {(r.get('rss_peak') or 0) / 2**20:,.0f} MiB; "
            f"{(r.get('rss_settled') or 0) / 2**20:,.0f} MiB once settled)", "< 1 GiB", verdict(rss < 2**30)),
        Row("scale", f"join and settle, {what}", "coordinator",
            f"{r['join_and_settle_s']:.1f} s (joins spread over {s.scale_join_s:g} s)"
            + ("" if r["settled"] else " — **did not settle**")
            + f"; CPU meanwhile: server {r['server_cpu_join']:.0f} %, load generator {r['loadgen_cpu_join']:.0f} %"),
    ]
    return rows


async def section_convergence(s: Sizes, workdir: Path) -> list[Row]:
    rows: list[Row] = []
    interval = s.conv_interval_ms
    target_s = 2 * interval / 1000 + 0.05
    what = f"{s.conv_members} members on {s.conv_partitions:,} partitions, add {s.conv_added}"
    with coordinator(workdir, "convergence", consumer_overrides(interval)) as server:
        port = server.port
        await sc.create_topics(port, {"conv": s.conv_partitions})
        runs: list[tuple[str, Any]] = []
        if 68 in await sc.api_versions(port):
            runs.append(("KIP-848 (uniform, server-side)", sc.converge_consumer(
                port, s.conv_members, s.conv_added, "conv", s.conv_partitions)))
        runs.append(("classic eager (range)", sc.converge_classic(
            port, s.conv_members, s.conv_added, "conv", s.conv_partitions, cooperative=False, interval_ms=interval)))
        runs.append(("classic cooperative-sticky", sc.converge_classic(
            port, s.conv_members, s.conv_added, "conv", s.conv_partitions, cooperative=True, interval_ms=interval)))
        for label, run in runs:
            try:
                r = await run
            except Exception as exc:
                rows.append(Row("convergence", f"{label}: {what}", "coordinator", f"failed: {exc!r}", "", "**no**"))
                continue
            took = r["seconds"]
            result = "timed out" if took is None else f"{took * 1000:,.0f} ms = {took * 1000 / interval:.2f} intervals"
            rows.append(Row("convergence", f"{label}: {what}", "coordinator",
                            f"{result} (interval {interval} ms)",
                            f"≤ 2 intervals + 50 ms ({target_s * 1000:,.0f} ms)",
                            verdict(took is not None and took <= target_s), r))
    return rows


async def section_churn(s: Sizes, workdir: Path) -> list[Row]:
    interval = 500
    with coordinator(workdir, "churn", consumer_overrides(interval, session_ms=3_000)) as server:
        port = server.port
        if 68 not in await sc.api_versions(port):
            return [Row("churn", "churn", "coordinator", "API 68 not served")]
        await sc.create_topics(port, {"churn": 100})
        leave = crash = max(s.churn_members // 10, 1)
        r = await sc.churn(port, s.churn_members, s.churn_groups, "churn", 100, leave=leave, crash=crash)
    return [Row("churn", f"KIP-848 join storm: {s.churn_members:,} members in {s.churn_groups} groups join at once, "
                f"then {leave} leave and {crash} crash (interval {interval} ms, session 3 s)", "coordinator",
                f"storm balanced in {r['storm_s']:.2f} s; after leaves+crashes in {r['leave_crash_settle_s']:.2f} s "
                f"(includes the session timeout); {fmt_rps(r)}", detail=r)]


def section_assignor(s: Sizes) -> list[Row]:
    from bench import assignor_bench as ab
    from coordinator.core.assignors import UniformAssignor

    shape = ab.Shape("suite", s.assignor_members, s.assignor_topics, s.assignor_per_topic, False)
    members, describer = ab.build(shape)
    spec = ab.spec_of(members)
    uniform = UniformAssignor()
    full_s, full = ab.best_of(1 if s.label == "full" else 2, lambda: uniform.assign(spec, describer))
    grown = ab.spec_of({**members, "member-new": next(iter(members.values()))}, full)
    inc_s, _ = ab.best_of(1, lambda: uniform.assign(grown, describer))
    parts = s.assignor_topics * s.assignor_per_topic
    return [Row("assignor", f"uniform assignor, {s.assignor_members:,} members × {parts:,} partitions "
                f"({s.assignor_topics} topics, homogeneous)", "in process",
                f"full {full_s * 1000:,.0f} ms; incremental (+1 member) {inc_s * 1000:,.0f} ms",
                "< 1 s at 1,000 × 100,000",
                verdict(max(full_s, inc_s) < 1.0) if s.assignor_members * parts >= 10**8 else "n/a (smaller run)"),
            streams_assignor_row(s)]


def streams_assignor_row(s: Sizes) -> Row:
    """The streams task assignor and the warm-up step at Kafka's StreamsStickyAssignorBenchmark
    shapes (bench/streams_assignor_bench.py): median CPU ms of 3 runs per shape."""
    from bench import streams_assignor_bench as sb

    measured = list(sb.run(s.assignor_members, 3, before=False))
    result = "; ".join(f"{' '.join(m.label.split())} {m.median_ms:.1f} ms" for m in measured)
    cold = next(m for m in measured if m.label.startswith("full") and " 1/process offsets=none" in m.label)
    return Row("assignor", f"streams task assignor (sticky) at Kafka's JMH shapes, {s.assignor_members:,} members, "
               "10,000 active + 5,000 standby tasks (median CPU of 3 runs)", "in process", result,
               "Kafka's published JMH: 2.39 ms (full, 1/process, no offsets)",
               verdict(cold.median_ms <= 2.39) if s.assignor_members >= 1000 else "n/a (smaller run)")


def section_replay(s: Sizes, workdir: Path) -> list[Row]:
    """Start-up replay into the core, side by side with the log-level pass over the same files
    (bench/replay_core_bench.py: its two logs, best of three runs each)."""
    from bench import replay_core_bench as rb

    rows = []
    shapes = {
        "distinct": "one per entry, every one a distinct OffsetCommit key, groups interleaved (worst case)",
        "compacted": "every one a distinct OffsetCommit key, 10 per entry, group by group (a compacted log)",
        "mixed": "commits of 200 groups × 100 partitions every interval, with rebalances (most superseded)",
    }
    for log, shape in shapes.items():
        r = rb.measure(log, s.replay_records, str(workdir), repeat=3, check=False, out=False)
        core_cpu = r.records / min(t.cpu_s for t in r.into_core)
        level_cpu = r.records / min(t.cpu_s for t in r.log_level)
        core_wall = r.records / r.best("core").wall_s
        level_wall = r.records / r.best("log").wall_s
        decode_ms = min(t.cpu_s for t in r.decoded) * 1000
        # The verdict is on CPU time: this load is one thread, so its CPU time is its wall time
        # on an idle core; on a shared machine the wall time measures the other jobs as well.
        rows.append(Row(
            "replay", f"start-up replay of {r.records:,} records, {shape}", "in process",
            f"{core_cpu:,.0f} records/s of CPU; log level (segments, frames, CRC) {level_cpu:,.0f}/s, ratio"
            f" {core_cpu / level_cpu:.2f}; wall {core_wall:,.0f}/s and {level_wall:,.0f}/s;"
            f" values decoded on first read (all of them: {decode_ms:,.0f} ms of CPU)",
            "≥ 1M records/s", verdict(core_cpu >= 1e6) if r.records >= 1_000_000 else "n/a (smaller run)"))
    return rows


async def section_commits(s: Sizes, workdir: Path, prof: Profiler, procs: int) -> list[Row]:
    rows = []
    for policy in ("always", "interval", "none"):
        with coordinator(workdir, f"commits-{policy}", {"log.flush.policy": policy}) as server:
            port = server.port
            await sc.create_topics(port, {"commits": 8})
            with prof.record(server.proc.pid, f"commit-{policy}", s.commit_seconds):  # type: ignore[union-attr]
                r = await sc.throughput(port, sc.commit_templates(256), connections=16, window=4,
                                        seconds=s.commit_seconds, warmup=min(0.5, s.commit_seconds / 4),
                                        processes=procs)
            log_bytes = sum(f.stat().st_size for f in server.data_dir.rglob("*.log"))
        wired = "record log written" if log_bytes else "no record log on disk (policy not wired)"
        rows.append(Row("commits", f"OffsetCommit v8 throughput, log.flush.policy={policy}", "coordinator",
                        f"{fmt_rps(r)}; {wired} ({log_bytes / 1e6:.1f} MB)", detail=r))
    return rows


async def section_sidecar(s: Sizes, workdir: Path) -> list[Row]:
    from bench.sidecar_throughput import measure

    result = await asyncio.to_thread(measure, s.sidecar_messages, 2, s.sidecar_latency, workdir)
    d, c, turns = result["direct"], result["sidecar"], result["ratios"]
    rows = []
    for label, key in (("Produce 1 KB through the sidecar", "produce"), ("Fetch 1 KB through the sidecar", "fetch")):
        ratio = c[f"{key}_msgs"] / d[f"{key}_msgs"]
        rows.append(Row("sidecar", label, "coordinator (sidecar)",
                        f"{c[f'{key}_msgs']:,.0f} msg/s vs {d[f'{key}_msgs']:,.0f} direct (ratio {ratio:.2f}; "
                        f"per turn {turns[f'{key}_min']:.2f}-{turns[f'{key}_max']:.2f})", ">= 0.8 of direct",
                        verdict(ratio >= 0.8)))
    rows.append(Row("sidecar", "Sidecar CPU per MB forwarded", "coordinator (sidecar)",
                    f"{c['sidecar_cpu_ms_per_mb_produced']:.2f} ms produced, "
                    f"{c['sidecar_cpu_ms_per_mb_fetched']:.2f} ms fetched (one core)"))
    for label, key in (("Produce round trip p99 added by the sidecar", "produce"),
                       ("Fetch round trip p99 added by the sidecar", "fetch")):
        added = c[f"{key}_p99_ms"] - d[f"{key}_p99_ms"]
        rows.append(Row("sidecar", label, "coordinator (sidecar)",
                        f"{added:+.2f} ms ({c[f'{key}_p99_ms']:.2f} vs {d[f'{key}_p99_ms']:.2f} ms direct)", "< 1 ms",
                        verdict(added < 1.0)))
    rows.append(Row("sidecar", "Fetch round trip of a 1 MB response, added by the sidecar", "coordinator (sidecar)",
                    f"p50 {c['large_p50_ms'] - d['large_p50_ms']:+.2f} ms, p99 {c['large_p99_ms'] - d['large_p99_ms']:+.2f} ms "
                    f"({c['large_p50_ms']:.2f} / {c['large_p99_ms']:.2f} vs {d['large_p50_ms']:.2f} / "
                    f"{d['large_p99_ms']:.2f} ms direct)"))
    return rows


async def section_shards(s: Sizes, workdir: Path, procs: int) -> list[Row]:
    from bench import shards_bench as sb

    knobs = sb.Knobs(groups=s.tp_groups, per_group=s.tp_per_group, connections=s.tp_connections,
                     window=s.tp_window, seconds=s.tp_seconds, processes=procs, scale_members=s.scale_members,
                     scale_groups=s.scale_groups, scale_interval_ms=s.scale_interval_ms,
                     scale_join_s=s.scale_join_s, scale_measure_s=s.scale_measure_s,
                     commit_seconds=s.commit_seconds, turns=1 if s.label == "tiny" else 2)
    # Its servers are set up with asyncio.run of their own: off this event loop.
    return await asyncio.to_thread(sb.rows, knobs, workdir, ["steady", "scale", "commits", "kafka"])


async def section_kafka(s: Sizes, workdir: Path) -> list[Row]:
    from bench import kafka_side as ks

    plan = ks.plan_for(s.label)
    # Its servers and load run on an event loop of their own: off this one.
    results, why, _ = await asyncio.to_thread(ks.run, plan, workdir)
    rows: list[Row] = ks.rows(plan, results, why)
    return rows


async def section_clusterlog(s: Sizes, workdir: Path) -> list[Row]:
    from bench import clusterlog_bench as cb

    plan = cb.plan_for(s.label)
    # Its servers and load run on an event loop of their own: off this one.
    results, why = await asyncio.to_thread(cb.run, plan, workdir)
    rows: list[Row] = cb.rows(plan, results, why)
    return rows


async def section_streams(s: Sizes, workdir: Path) -> list[Row]:
    from bench import streams_scaleout as ss

    if s.streams_runs == 0:
        return [Row("streams", "Streams scale-out 2 -> 3, warm-ups on vs off", "coordinator",
                    "not run at tiny sizes (a run takes about a minute)")]
    results, why = await asyncio.to_thread(ss.measure, s.streams_runs, s.streams_keys, workdir / "streams")
    if why:
        return [Row("streams", "Streams scale-out 2 -> 3, warm-ups on vs off", "coordinator", f"not run: {why}")]
    return [Row("streams", f"Streams scale-out 2 -> 3 over {s.streams_keys:,} keys, warm-ups "
                f"{'on' if r['warmups'] else 'off'} (run {r['run']})", "coordinator",
                f"longest gap of a moved task {r['moved_gap_ms']:,} ms (tasks that stayed {r['baseline_gap_ms']:,} ms); "
                f"take-over restored {', '.join(f'{c:,}' for c in r['restored_records'])} records; "
                f"load {r['load']:.2f}", detail=r) for r in results]


async def section_share(s: Sizes, workdir: Path, prof: Profiler) -> list[Row]:
    from bench import share_bench as shb

    runs = await shb.sitting(s.share_records, s.share_rounds, shb.KINDS + shb.CLIENT_KINDS, workdir / "share",
                             prof.directory / "share" if prof.directory is not None else None)
    return shb.rows(runs)


async def run_sections(args: argparse.Namespace, sizes: Sizes, workdir: Path) -> list[Row]:
    prof = Profiler(Path(args.profile) if args.profile else None)
    rows: list[Row] = []
    for section in args.only:
        started = time.perf_counter()
        print(f"== {section}", flush=True)
        try:
            if section == "throughput":
                got = await section_throughput(sizes, workdir, prof, args.loadgen_processes)
            elif section == "scale":
                got = await section_scale(sizes, workdir, prof)
            elif section == "convergence":
                got = await section_convergence(sizes, workdir)
            elif section == "churn":
                got = await section_churn(sizes, workdir)
            elif section == "assignor":
                got = section_assignor(sizes)
            elif section == "replay":
                got = section_replay(sizes, workdir)
            elif section == "sidecar":
                got = await section_sidecar(sizes, workdir)
            elif section == "shards":
                got = await section_shards(sizes, workdir, args.loadgen_processes)
            elif section == "kafka":
                got = await section_kafka(sizes, workdir)
            elif section == "clusterlog":
                got = await section_clusterlog(sizes, workdir)
            elif section == "streams":
                got = await section_streams(sizes, workdir)
            elif section == "share":
                got = await section_share(sizes, workdir, prof)
            else:
                got = await section_commits(sizes, workdir, prof, args.loadgen_processes)
        except Exception as exc:
            if args.strict:
                raise
            got = [Row(section, section, "", f"failed: {exc!r}", "", "**no**")]
        for row in got:
            print(f"  {row.benchmark} [{row.server}]: {row.result}  {row.target} {row.met}", flush=True)
        print(f"  ({time.perf_counter() - started:.1f} s)", flush=True)
        rows += got
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Benchmark suite; writes BENCHMARKS.md")
    parser.add_argument("--quick", action="store_true", help="reduced sizes (about 2 minutes)")
    parser.add_argument("--tiny", action="store_true", help="with --quick: a few seconds per section (smoke test)")
    parser.add_argument("--only", default=",".join(SECTIONS), help=f"comma-separated subset of {SECTIONS}")
    parser.add_argument("--output", default=str(ROOT / "BENCHMARKS.md"), help="where to write the report")
    parser.add_argument("--profile", metavar="DIR", help="py-spy the coordinator; raw + summaries into DIR")
    parser.add_argument("--loadgen-processes", type=int, default=1, help="closed-loop load generator processes")
    parser.add_argument("--strict", action="store_true", help="a failing section fails the run")
    parser.add_argument("--set", action="append", default=[], metavar="FIELD=N", help="override one size")
    args = parser.parse_args(argv)
    args.only = [s for s in args.only.split(",") if s]
    unknown = set(args.only) - set(SECTIONS)
    if unknown:
        parser.error(f"unknown sections {sorted(unknown)}")
    sizes = (TINY if args.tiny else QUICK) if args.quick or args.tiny else FULL
    for item in args.set:
        key, _, value = item.partition("=")
        sizes = replace(sizes, **{key: type(getattr(sizes, key))(value)})
    info = machine()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="coordinator-bench-") as tmp:
        rows = uvloop.run(run_sections(args, sizes, Path(tmp)))
    text = render(rows, info, args, sizes, time.perf_counter() - started)
    output = Path(args.output)
    previous = output.read_text() if output.exists() else None
    output.write_text(with_hand_written(text, previous))
    print(f"wrote {args.output}")
    return 0
