"""Shards over cores (issue 14 point 5): the coordinator as 1 and as 2 shard processes, side by side.

Every shard process is `coordinator serve --shard K` (node `node.id + K` on port `+ K`) on a data
directory laid out by `coordinator.shards.reshard.ensure_layout`, started directly (not through
a supervisor). The load generator (`bench/loadgen`, in its own process or processes) sends each
group's requests to the node of its shard (`ShardLayout.shard_of_group`), as a client does after
FindCoordinator. Rows:

- steady: ConsumerGroupHeartbeat v1 of joined members, closed loop, against 1 shard, 2 shards and
  the decode-only reference server (`bench/refservers.py`), in alternated turns (A B C C B A ...)
  so the machine's load hits every side alike; the ratios are the result.
- scale: KIP-848 members in many groups joining over a window, then heartbeating at their interval
  over every shard: p99, RSS summed over the shard processes, members fenced while joining
  (members that had to join again).
- commits: OffsetCommit v8 under `log.flush.policy=always` (an fsync per batch), 1 and 2 shards.
- kafka: the steady row against `BENCH_KAFKA=host:port` (a single broker: it coordinates every
  group), when set.

    python -m bench.shards_bench [--rows steady,scale,commits,kafka] [--members N] ...

prints one line per row (and `--json FILE` the numbers). `bench/run --only shards` runs the same
rows with the suite's sizes and puts them in BENCHMARKS.md's table.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import multiprocessing
import os
import statistics
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.loadgen import scenarios as sc
from bench.loadgen.conn import Connection
from bench.loadgen.consumer import ConsumerMember
from bench.loadgen.stats import Recorder
from bench.loadgen.wire import Template, member_uuid
from coordinator.shards.placement import ShardLayout
from coordinator.shards.reshard import ensure_layout
from tests.support.server import free_port_block
from tests.support.shard_process import ShardProcess

PARTITIONS = 50  # offsets.topic.num.partitions (the default)
TOPIC, TOPIC_PARTITIONS = "t10", 10
SCALE_PARTITIONS = 100  # the scale row's topic, as bench/suite.py's scale section


# ---- servers ----------------------------------------------------------------------------------


@dataclass
class Nodes:
    """Where each group is served: `host`, `ports[k]` for shard k, the layout; the processes."""

    host: str
    ports: list[int]
    layout: ShardLayout
    procs: list[ShardProcess]

    def port_of(self, group: str) -> int:
        return self.ports[self.layout.shard_of_group(group)]

    def pids(self) -> list[int]:
        return [p.proc.pid for p in self.procs if p.proc is not None]


@contextlib.contextmanager
def sharded(workdir: Path, name: str, shards: int, overrides: dict[str, str],
            topics: dict[str, int]) -> Iterator[Nodes]:
    """`shards` shard processes on a fresh data directory, topics created (on shard 0, before the
    other shards load the catalog)."""
    root = workdir / name / "data"
    root.mkdir(parents=True, exist_ok=True)
    layout = ShardLayout(PARTITIONS, shards)
    ensure_layout(root, layout)
    port = free_port_block(shards)
    procs = [ShardProcess(root, k, shards, port, {"group.initial.rebalance.delay.ms": "300", **overrides})
             for k in range(shards)]
    try:
        procs[0].start()
        if topics:
            asyncio.run(sc.create_topics(port, topics))
        for proc in procs[1:]:
            proc.start(wait=False)
        for proc in procs[1:]:
            proc.wait_ready(timeout=60)
        yield Nodes("127.0.0.1", [port + k for k in range(shards)], layout, procs)
    finally:
        for proc in procs:
            proc.stop()


def rss_total(pids: list[int]) -> tuple[int, int]:
    """(VmRSS, VmHWM) summed over `pids`, bytes."""
    now = peak = 0
    for pid in pids:
        got = sc.server_rss(pid)
        now += got.get("VmRSS", 0)
        peak += got.get("VmHWM", 0)
    return now, peak


def consumer_overrides(interval_ms: int, session_ms: int = 60_000) -> dict[str, str]:
    return {
        "group.consumer.heartbeat.interval.ms": str(interval_ms),
        "group.consumer.min.heartbeat.interval.ms": str(min(interval_ms, 5_000)),
        "group.consumer.session.timeout.ms": str(session_ms),
        "group.consumer.min.session.timeout.ms": str(min(session_ms, 45_000)),
        "group.consumer.max.session.timeout.ms": str(max(session_ms, 60_000)),
    }


# ---- joining and the closed loop, per node ----------------------------------------------------


async def join(nodes: Nodes, members: list[ConsumerMember], *, partitions: int = TOPIC_PARTITIONS,
               connections: int = 16, spread_s: float = 0.0, timeout: float = 180.0, keep: bool = False
               ) -> tuple[bool, float, Recorder, list[Any]]:
    """Members heartbeat to their group's node until every group is balanced over `partitions`
    (their topic's). Returns (settled, seconds, the recorder of the join, the drivers: still
    heartbeating if `keep`)."""
    rec = Recorder()
    rec.start()
    by_port: dict[int, list[ConsumerMember]] = {}
    for member in members:
        by_port.setdefault(nodes.port_of(member.group_id), []).append(member)
    drivers: list[Any] = []
    for port, share in by_port.items():
        count = max(1, round(connections * len(share) / len(members)))
        conns = [await Connection.open(nodes.host, port) for _ in range(count)]
        driver = sc.ConsumerDriver(conns, rec, seed=port)
        driver.add(share, spread_s=spread_s)
        drivers.append(driver)
    started = time.perf_counter()
    took = await sc.wait_for(lambda: sc.groups_balanced(members, partitions), timeout,
                             0.5 if len(members) > 5_000 else 0.05)
    seconds = time.perf_counter() - started
    if not keep:
        await stop_drivers(drivers)
    return took is not None, seconds, rec, drivers


async def stop_drivers(drivers: list[Any]) -> None:
    for driver in drivers:
        driver.stop()
    await asyncio.sleep(0.2)
    for driver in drivers:
        for conn in driver.conns:
            conn.close()


async def closed_loop(host: str, by_port: dict[int, list[Template]], *, connections: int, window: int,
                      seconds: float, warmup: float, processes: int) -> dict[str, Any]:
    """Requests/s and latency of a closed loop, each node getting connections in proportion to its
    requests; over `processes` load-generator processes (each with its share of every node)."""
    first = next(iter(by_port.values()))[0]
    total = sum(len(t) for t in by_port.values())
    jobs = []
    for i in range(processes):
        targets = []
        for port, templates in by_port.items():
            count = max(1, round(connections * len(templates) / total / processes))
            raw = [t.data for t in templates][i::processes] or [templates[0].data]
            targets.append((port, raw, count))
        jobs.append((host, targets, first.api_key, first.api_version, window, seconds, 1 << 62, warmup))
    if processes <= 1:
        rec = await sc._closed_loop(*jobs[0])
    else:
        ctx = multiprocessing.get_context("spawn")
        with ctx.Pool(processes) as pool:
            parts = await asyncio.get_running_loop().run_in_executor(None, pool.map, sc._worker, jobs)
        rec = Recorder()
        for part in parts:
            rec.merge(part)
    return rec.summary()


def members_of(groups: int, per_group: int, prefix: str = "g", first: int = 0) -> list[ConsumerMember]:
    return [ConsumerMember(f"{prefix}{i // per_group}", member_uuid(first + i), [TOPIC])
            for i in range(groups * per_group)]


def by_node(nodes: Nodes, members: list[ConsumerMember]) -> dict[int, list[Template]]:
    out: dict[int, list[Template]] = {}
    for member in members:
        out.setdefault(nodes.port_of(member.group_id), []).append(member.template())
    return out


# ---- rows -------------------------------------------------------------------------------------


@dataclass
class Knobs:
    groups: int = 100
    per_group: int = 10
    connections: int = 16
    window: int = 16
    seconds: float = 8.0
    turns: int = 2
    processes: int = 1
    scale_members: int = 50_000
    scale_groups: int = 1_000
    scale_interval_ms: int = 5_000
    scale_join_s: float = 300.0
    scale_measure_s: float = 60.0
    scale_shards: tuple[int, ...] = (2,)
    commit_seconds: float = 5.0
    commit_connections: int = 64  # 64 x 8 commits in flight: what one fsync per batch can serve at once
    commit_window: int = 8
    server: tuple[tuple[str, str], ...] = ()
    """`--set KEY=VALUE` overrides given to every server (e.g. group.coordinator.append.linger.ms)."""


def decode_pid(port: int) -> int:
    """The pid of the process listening on 127.0.0.1:`port` (the decode-only reference), from /proc."""
    wanted = f":{port:04X}"
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table) as lines:
            for line in list(lines)[1:]:
                fields = line.split()
                if fields[1].endswith(wanted) and fields[3] == "0A":  # LISTEN
                    inodes.add(fields[9])
    for pid in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):
                    link = os.readlink(f"/proc/{pid}/fd/{fd}")
                    if link.startswith("socket:[") and link[8:-1] in inodes:
                        return int(pid)
    return os.getpid()  # not found: count nothing useful rather than fail


def loadavg() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def steady(knobs: Knobs, workdir: Path) -> dict[str, Any]:
    """Steady ConsumerGroupHeartbeat: 1 shard, 2 shards, decode-only, in ABBA turns."""
    from bench.suite import reference

    members_n = knobs.groups * knobs.per_group
    loop_args = {"connections": knobs.connections, "window": knobs.window, "seconds": knobs.seconds,
                 "warmup": min(0.5, knobs.seconds / 4), "processes": knobs.processes}
    overrides = {**consumer_overrides(1_000), **dict(knobs.server)}
    runs: dict[str, list[dict[str, Any]]] = {"1 shard": [], "2 shards": [], "decode-only": []}
    cpu: dict[str, list[float]] = {"1 shard": [], "2 shards": [], "decode-only": []}
    us_per_request: dict[str, list[float]] = {"1 shard": [], "2 shards": [], "decode-only": []}
    with contextlib.ExitStack() as stack:
        one = stack.enter_context(sharded(workdir, "steady-1", 1, overrides, {TOPIC: TOPIC_PARTITIONS}))
        two = stack.enter_context(sharded(workdir, "steady-2", 2, overrides, {TOPIC: TOPIC_PARTITIONS}))
        decode_port = stack.enter_context(reference("decode"))
        sides: dict[str, tuple[Any, list[int]]] = {}
        for label, nodes in (("1 shard", one), ("2 shards", two)):
            members = members_of(knobs.groups, knobs.per_group)
            settled, _, _, _ = asyncio.run(join(nodes, members))
            if not settled:
                raise RuntimeError(f"{label}: members did not settle")
            sides[label] = (by_node(nodes, members), nodes.pids())
        sides["decode-only"] = ({decode_port: sc.synthetic_consumer_heartbeats(members_n)}, [])
        order = list(sides) + list(reversed(sides))
        loads = []
        for _ in range(knobs.turns):
            for label in order:
                targets, pids = sides[label]
                before = sum(sc.cpu_seconds(p) for p in pids or [decode_pid(decode_port)])
                loads.append(os.getloadavg()[0])
                got = asyncio.run(closed_loop("127.0.0.1", targets, **loop_args))
                runs[label].append(got)
                used = sum(sc.cpu_seconds(p) for p in pids or [decode_pid(decode_port)]) - before
                cpu[label].append(used / got["seconds"] * 100)
                us_per_request[label].append(used / max(got["requests"], 1) * 1e6)
                print(f"  steady {label}: {got['rps']:,.0f} req/s p99 {got['p99_ms']:.2f} ms "
                      f"errors {got['errors']} (load {loadavg()})", flush=True)
    rps = {label: sum(r["requests"] for r in rs) / sum(r["seconds"] for r in rs) for label, rs in runs.items()}
    per_round = [(runs["2 shards"][i]["rps"] / runs["1 shard"][i]["rps"],
                  runs["2 shards"][i]["rps"] / runs["decode-only"][i]["rps"]) for i in range(len(runs["1 shard"]))]
    return {"rps": rps, "runs": runs, "cpu_pct": {k: statistics.mean(v) for k, v in cpu.items() if v},
            "us_per_request": {k: statistics.median(v) for k, v in us_per_request.items() if v},
            "two_vs_one": rps["2 shards"] / rps["1 shard"], "two_vs_decode": rps["2 shards"] / rps["decode-only"],
            "per_turn": per_round, "members": members_n, "load_during": (min(loads), max(loads))}


def scale(knobs: Knobs, workdir: Path, shards: int) -> dict[str, Any]:
    """KIP-848 members over `shards` shards at their heartbeat interval: latency, RSS, fenced joins."""
    interval = knobs.scale_interval_ms
    with sharded(workdir, f"scale-{shards}", shards, {**consumer_overrides(interval), **dict(knobs.server)},
                 {"scale": SCALE_PARTITIONS}) as nodes:
        async def run() -> dict[str, Any]:
            per_group = max(knobs.scale_members // knobs.scale_groups, 1)
            members = [ConsumerMember(f"scale-{i // per_group}", member_uuid(i), ["scale"])
                       for i in range(knobs.scale_members)]
            gc.collect()
            gc.disable()  # the load generator's garbage is acyclic (see sc.scale)
            try:
                me = os.getpid()
                cpu0 = sum(sc.cpu_seconds(p) for p in nodes.pids())
                own0 = sc.cpu_seconds(me)
                took = time.perf_counter()
                settled, seconds, join_rec, drivers = await _scale_join(nodes, members, knobs)
                rss_settled = rss_total(nodes.pids())[0]
                cpu1 = sum(sc.cpu_seconds(p) for p in nodes.pids())
                own1 = sc.cpu_seconds(me)
                rec = Recorder()
                for driver in drivers:
                    driver.recorder = rec
                rec.start()
                await asyncio.sleep(knobs.scale_measure_s)
                rec.stop()
                cpu2 = sum(sc.cpu_seconds(p) for p in nodes.pids())
                own2 = sc.cpu_seconds(me)
                rss, peak = rss_total(nodes.pids())
                await stop_drivers(drivers)
            finally:
                gc.enable()
            fenced = sum(1 for m in members if m.joins > 1)
            window = max(rec.stopped - rec.started, 1e-9)
            # What the joins cost beyond the heartbeats the members would send anyway: the measured
            # window prices a joined member's steady second, and members joined uniformly over the
            # join window, so the ramp held half of them on average until the window closed.
            steady_per_member_s = (cpu2 - cpu1) / window / len(members)
            member_seconds = len(members) * (knobs.scale_join_s / 2 + max(seconds - knobs.scale_join_s, 0.0))
            join_cpu = (cpu1 - cpu0) - steady_per_member_s * member_seconds
            return {**rec.summary(), "settled": settled, "join_and_settle_s": seconds, "fenced_members": fenced,
                    "join_errors": dict(join_rec.errors), "rss": rss, "rss_peak": peak, "rss_settled": rss_settled,
                    "server_cpu_join": (cpu1 - cpu0) / max(time.perf_counter() - took, 1e-9) * 100,
                    "server_cpu": (cpu2 - cpu1) / window * 100, "shards": shards,
                    "loadgen_cpu_join": (own1 - own0) / max(seconds, 1e-9) * 100,
                    "loadgen_cpu": (own2 - own1) / window * 100,
                    "members": knobs.scale_members, "groups": knobs.scale_groups,
                    "server_cpu_ramp_s": cpu1 - cpu0, "join_cpu_ms_per_member": join_cpu / len(members) * 1e3}

        return asyncio.run(run())


async def _scale_join(nodes: Nodes, members: list[ConsumerMember], knobs: Knobs
                      ) -> tuple[bool, float, Recorder, list[Any]]:
    return await join(nodes, members, partitions=SCALE_PARTITIONS, connections=64, spread_s=knobs.scale_join_s,
                      timeout=max(120.0, knobs.scale_join_s * 4), keep=True)


def commits(knobs: Knobs, workdir: Path) -> dict[str, Any]:
    """OffsetCommit v8 with an fsync per batch (`log.flush.policy=always`), 1 and 2 shards, ABBA."""
    groups = 256
    templates = sc.commit_templates(groups)
    out: dict[str, list[dict[str, Any]]] = {"1 shard": [], "2 shards": []}
    us: dict[str, list[float]] = {"1 shard": [], "2 shards": []}
    with contextlib.ExitStack() as stack:
        sides = {}
        pids: dict[str, list[int]] = {}
        for label, shards in (("1 shard", 1), ("2 shards", 2)):
            nodes = stack.enter_context(sharded(workdir, f"commits-{shards}", shards, {"log.flush.policy": "always", **dict(knobs.server)},
                                                {"commits": 8}))
            targets: dict[int, list[Template]] = {}
            for g, template in enumerate(templates):
                targets.setdefault(nodes.port_of(f"commit-{g}"), []).append(template)
            sides[label] = targets
            pids[label] = nodes.pids()
        order = list(sides) + list(reversed(sides))
        for _ in range(knobs.turns):
            for label in order:
                before = sum(sc.cpu_seconds(p) for p in pids[label])
                got = asyncio.run(closed_loop("127.0.0.1", sides[label], connections=knobs.commit_connections,
                                              window=knobs.commit_window,
                                              seconds=knobs.commit_seconds, warmup=min(0.5, knobs.commit_seconds / 4),
                                              processes=knobs.processes))
                out[label].append(got)
                us[label].append((sum(sc.cpu_seconds(p) for p in pids[label]) - before) / max(got["requests"], 1) * 1e6)
                print(f"  commits {label}: {got['rps']:,.0f} req/s p99 {got['p99_ms']:.2f} ms errors {got['errors']} "
                      f"(load {loadavg()})", flush=True)
    rps = {label: sum(r["requests"] for r in rs) / sum(r["seconds"] for r in rs) for label, rs in out.items()}
    return {"rps": rps, "runs": out, "two_vs_one": rps["2 shards"] / rps["1 shard"],
            "us_per_request": {k: statistics.median(v) for k, v in us.items()}}


def kafka(knobs: Knobs) -> dict[str, Any] | None:
    """The steady row against `BENCH_KAFKA=host:port` (one broker), or None when unset/unreachable."""
    target = os.environ.get("BENCH_KAFKA")
    if not target:
        return None
    host, _, port_text = target.rpartition(":")
    port = int(port_text)
    nodes = Nodes(host or "127.0.0.1", [port], ShardLayout(PARTITIONS, 1), [])

    async def run() -> dict[str, Any]:
        await sc.create_topics(port, {TOPIC: TOPIC_PARTITIONS}, host=nodes.host)
        members = members_of(knobs.groups, knobs.per_group, prefix=f"bench-{os.getpid()}-")
        settled, _, _, _ = await join(nodes, members)
        if not settled:
            raise RuntimeError("Kafka: members did not settle")
        return await closed_loop(nodes.host, by_node(nodes, members), connections=knobs.connections,
                                 window=knobs.window, seconds=knobs.seconds, warmup=min(0.5, knobs.seconds / 4),
                                 processes=knobs.processes)

    try:
        return asyncio.run(run())
    except OSError as exc:
        print(f"  BENCH_KAFKA={target} unreachable: {exc}", flush=True)
        return None


# ---- for bench/suite.py and the command line ---------------------------------------------------


def rows(knobs: Knobs, workdir: Path, which: list[str]) -> list[Any]:
    """The suite's rows (bench.report.Row) for the rows named in `which`."""
    from bench.report import Row, fmt_rps, verdict

    out: list[Any] = []
    if "steady" in which:
        r = steady(knobs, workdir)
        what = (f"ConsumerGroupHeartbeat v1 steady throughput, {r['members']:,} members, 1 vs 2 shards vs "
                f"decode-only ({knobs.turns} ABBA rounds, load {r['load_during'][0]:.1f}-{r['load_during'][1]:.1f})")
        for label in ("1 shard", "2 shards", "decode-only"):
            runs = r["runs"][label]
            cpu = r["cpu_pct"].get(label)
            out.append(Row("shards", what, f"coordinator, {label}" if label != "decode-only" else label,
                           f"{r['rps'][label]:,.0f} req/s (turns: {', '.join(format(x['rps'], ',.0f') for x in runs)}); "
                           f"p99 {statistics.median(x['p99_ms'] for x in runs):.2f} ms"
                           + (f"; server CPU {cpu:.0f} % of a core, {r['us_per_request'][label]:.1f} µs a request"
                              if cpu is not None else "")))
        turns = ", ".join(f"{a:.2f}/{b:.2f}" for a, b in r["per_turn"])
        out.append(Row("shards", what, "2 shards ÷ 1 shard", f"**{r['two_vs_one']:.2f}×** (per turn {turns})",
                       "≥ 1.35×", verdict(r["two_vs_one"] >= 1.35)))
        out.append(Row("shards", what, "2 shards ÷ decode-only", f"**{r['two_vs_decode']:.2f}×**", "≥ 1.0×",
                       verdict(r["two_vs_decode"] >= 1.0)))
    if "scale" in which:
        for shards in knobs.scale_shards:
            r = scale(knobs, workdir, shards)
            what = (f"{r['members']:,} KIP-848 members in {r['groups']:,} groups, {knobs.scale_interval_ms / 1000:g} s "
                    f"interval, joins over {knobs.scale_join_s:g} s, {knobs.scale_measure_s:g} s measured")
            out.append(Row("shards", f"heartbeat latency, {what}", f"coordinator, {shards} shard(s)",
                           fmt_rps(r) + f"; CPU: servers {r['server_cpu']:.0f} % of a core (all shards), "
                           f"load generator {r['loadgen_cpu']:.0f} %",
                           "p99 < 10 ms", verdict(r["p99_ms"] < 10 and r["settled"])))
            out.append(Row("shards", f"RSS over all shard processes, {what}", f"coordinator, {shards} shard(s)",
                           f"{r['rss'] / 2**20:,.0f} MiB (peak {r['rss_peak'] / 2**20:,.0f} MiB)", "< 1 GiB",
                           verdict(r["rss"] < 2**30)))
            out.append(Row("shards", f"members fenced while joining, {what}", f"coordinator, {shards} shard(s)",
                           f"{r['fenced_members']:,} (settled in {r['join_and_settle_s']:.1f} s"
                           + ("" if r["settled"] else ", **did not settle**") + f"; join errors {r['join_errors']})",
                           "0", verdict(r["fenced_members"] == 0 and r["settled"])))
            out.append(Row("shards", f"server CPU per joining member (ramp CPU less the members' steady "
                           f"heartbeats), {what}", f"coordinator, {shards} shard(s)",
                           f"{r['join_cpu_ms_per_member']:.2f} ms (ramp and settling: "
                           f"{r['server_cpu_ramp_s']:.1f} s of server CPU)", "≤ 0.5 ms",
                           verdict(r["join_cpu_ms_per_member"] <= 0.5)))
    if "commits" in which:
        r = commits(knobs, workdir)
        for label in ("1 shard", "2 shards"):
            out.append(Row("shards", f"OffsetCommit v8, log.flush.policy=always (fsync per batch), "
                           f"{knobs.commit_connections} connections × {knobs.commit_window} in flight",
                           f"coordinator, {label}", fmt_rps({**r["runs"][label][-1], "rps": r["rps"][label]})
                           + f"; server CPU {r['us_per_request'][label]:.0f} µs a commit ({knobs.turns} ABBA rounds)",
                           "≥ 20k/s" if label == "2 shards" else "",
                           verdict(r["rps"][label] >= 20_000) if label == "2 shards" else ""))
    if "kafka" in which:
        r = kafka(knobs)
        if r is None:
            out.append(Row("shards", "ConsumerGroupHeartbeat v1 steady throughput", "Apache Kafka (BENCH_KAFKA)",
                           "not run (BENCH_KAFKA unset or unreachable)"))
        else:
            out.append(Row("shards", "ConsumerGroupHeartbeat v1 steady throughput", "Apache Kafka (BENCH_KAFKA)",
                           fmt_rps(r)))
    return out


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Shards benchmarks (issue 14 point 5)")
    parser.add_argument("--rows", default="steady,scale,commits,kafka")
    parser.add_argument("--groups", type=int, default=100)
    parser.add_argument("--per-group", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=8.0, help="per turn of the steady row")
    parser.add_argument("--turns", type=int, default=2, help="ABBA rounds")
    parser.add_argument("--loadgen-processes", type=int, default=1)
    parser.add_argument("--members", type=int, default=50_000, help="scale row: members")
    parser.add_argument("--scale-groups", type=int, default=1_000)
    parser.add_argument("--join-seconds", type=float, default=300.0)
    parser.add_argument("--measure-seconds", type=float, default=60.0)
    parser.add_argument("--scale-shards", default="2", help="scale row: comma-separated shard counts")
    parser.add_argument("--commit-seconds", type=float, default=5.0)
    parser.add_argument("--commit-connections", type=int, default=64)
    parser.add_argument("--commit-window", type=int, default=8)
    parser.add_argument("--json", metavar="FILE")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", type=_key_value,
                        help="a server setting for every side (repeatable)")
    args = parser.parse_args(argv)
    knobs = Knobs(groups=args.groups, per_group=args.per_group, seconds=args.seconds, turns=args.turns,
                  processes=args.loadgen_processes, scale_members=args.members, scale_groups=args.scale_groups,
                  scale_join_s=args.join_seconds, scale_measure_s=args.measure_seconds,
                  scale_shards=tuple(int(x) for x in args.scale_shards.split(",")),
                  commit_seconds=args.commit_seconds, commit_connections=args.commit_connections,
                  commit_window=args.commit_window,
                  server=tuple(args.set))
    import tempfile

    print(f"load average at start: {loadavg()}", flush=True)
    with tempfile.TemporaryDirectory(prefix="coordinator-shards-bench-") as tmp:
        got = rows(knobs, Path(tmp), args.rows.split(","))
    for row in got:
        print(f"{row.benchmark} [{row.server}]: {row.result}  {row.target} {row.met}")
    print(f"load average at end: {loadavg()}")
    if args.json:
        Path(args.json).write_text(json.dumps([row.__dict__ for row in got], indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
