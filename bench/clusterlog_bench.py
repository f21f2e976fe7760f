"""The cluster log measured (issue 27 point 7): the coordinator's record log on the Apache Kafka it
fronts (`coordinator.log.storage=upstream`) beside the same sidecar with its log on local disk, in one
run against one broker.

- commits: OffsetCommit v8 (simple commits, one partition each) in a closed loop, `connections` x
  `window` in flight, against one sidecar instance with the log upstream and one with it local
  (`log.flush.policy=always`: a reply waits for its fsync, as upstream it waits for its transaction's
  commit with acks=all): requests/s and p99;
- joins: KIP-848 members, one per new group on a topic of 8 partitions, one after the other: from the
  member's first ConsumerGroupHeartbeat to the answer that carries its assignment (each join writes
  the member, the target and the assignment to the log), p50 and p99, upstream and local;
- takeover: three instances with the log upstream; the owner of a group's log partition is
  SIGKILLed; from the kill to the first OffsetCommit for that group answered without error by the
  instance FindCoordinator then names (the instance group's session timeout, stated in the row,
  sets it: the cluster expires the dead instance a session timeout after its last heartbeat);
- replay: a fresh instance (new, empty data directory, no tail: `coordinator.log.tail.interval.ms=0`)
  starts on the log topic the commits left: the records its load read and how long it took (its
  `cluster_log_loaded` event), records/s; and its process start to its first answered commit.

Every row carries the load average before and after its measure (the machine is shared). Kafka comes
as in `bench/kafka_side.py` (KAFKA_HOME, shared/kafka beside the checkout, or BENCH_KAFKA); without
it every row says why.

    python -m bench.clusterlog_bench [--quick|--tiny]    prints the rows
    bench/run --only clusterlog                          writes them into BENCHMARKS.md

Prints numbers; asserts nothing about time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.loadgen import scenarios as sc
from bench.loadgen.wire import member_uuid

HOST = "127.0.0.1"
TOPIC, TOPIC_PARTITIONS = "commits", 8
WIDE_TOPIC, WIDE_PARTITIONS = "commits-wide", 100  # the replay's records: one commit writes 100
LOG_PARTITIONS = 10  # offsets.topic.num.partitions of every instance measured here
SESSION_MS = 6_000   # coordinator.log.session.timeout.ms of the takeover's instances
FIND_COORDINATOR, OFFSET_COMMIT, CONSUMER_GROUP_HEARTBEAT = 10, 8, 68


@dataclass(frozen=True)
class Plan:
    label: str
    commit_seconds: float
    commit_groups: int
    connections: int
    window: int
    joins: int
    replay_commits: int  # OffsetCommits of WIDE_PARTITIONS partitions written before the replay


FULL = Plan("full", 10.0, 1_000, 16, 16, 200, 2_000)
QUICK = Plan("quick", 3.0, 200, 8, 8, 50, 300)
TINY = Plan("tiny", 1.0, 20, 2, 4, 5, 10)


def plan_for(label: str) -> Plan:
    return {"full": FULL, "quick": QUICK, "tiny": TINY}[label]


Results = dict[str, dict[str, Any]]


def _load() -> float:
    return round(os.getloadavg()[0], 2)


# ---- instances ----------------------------------------------------------------------------------

def _instance(workdir: Path, name: str, bootstrap: str, storage: str, log_topic: str, **extra: str) -> Any:
    from tests.support.server import ServerProcess, free_port_block

    overrides = {
        "upstream.bootstrap.servers": bootstrap,
        "sidecar.listener.base.port": str(free_port_block(8)),
        "offsets.topic.num.partitions": str(LOG_PARTITIONS),
        "log.flush.policy": "always",
        "group.consumer.heartbeat.interval.ms": "5000",
        "coordinator.log.storage": storage,
        **extra,
    }
    if storage == "upstream":
        overrides |= {"coordinator.log.topic": log_topic, "coordinator.log.group.id": f"{log_topic}-instances"}
    server = ServerProcess(workdir / name / "data", overrides=overrides)
    server.data_dir.parent.mkdir(parents=True, exist_ok=True)
    return server


@contextmanager
def _running(servers: list[Any]) -> Iterator[list[Any]]:
    try:
        for server in servers:
            server.start(wait=False)
        for server in servers:
            server.wait_ready(90)
        yield servers
    finally:
        for server in servers:
            server.stop()


def _ensure_topics(bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bootstrap})
    existing = admin.list_topics(timeout=30).topics
    for name, partitions in ((TOPIC, TOPIC_PARTITIONS), (WIDE_TOPIC, WIDE_PARTITIONS)):
        if name not in existing:
            admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])[name].result(30)


def _wide_commits(count: int) -> list[Any]:
    """OffsetCommit v8 of every partition of WIDE_TOPIC, one group each: WIDE_PARTITIONS records each."""
    from bench.loadgen.wire import request

    return [request(OFFSET_COMMIT, 8, {
        "group_id": f"replay-{g}", "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
        "topics": [{"name": WIDE_TOPIC, "partitions": [
            {"partition_index": p, "committed_offset": 1000 + g, "committed_leader_epoch": -1,
             "committed_metadata": ""} for p in range(WIDE_PARTITIONS)]}]}) for g in range(count)]


# ---- requests -----------------------------------------------------------------------------------

async def _call(port: int, api_key: int, version: int, timeout: float = 10.0, **fields: Any) -> Any:
    from tests.support.wire import call, request

    return await call(port, request(api_key, version, **fields), timeout=timeout)


async def _commit(port: int, group: str, offset: int = 1) -> int:
    """One OffsetCommit v8 of `group`; its error code (a lost connection counts as -1)."""
    try:
        response = await _call(port, OFFSET_COMMIT, 8, timeout=5.0, group_id=group, generation_id_or_member_epoch=-1,
                               member_id="", group_instance_id=None, topics=[{"name": TOPIC, "partitions": [
                                   {"partition_index": 0, "committed_offset": offset, "committed_leader_epoch": -1,
                                    "committed_metadata": ""}]}])
    except (TimeoutError, OSError, asyncio.IncompleteReadError, ConnectionError):
        return -1
    return int(response.topics[0].partitions[0].error_code)


async def _coordinator_port(asked: int, group: str) -> int | None:
    try:
        response = await _call(asked, FIND_COORDINATOR, 3, timeout=5.0, key=group, key_type=0)
    except (TimeoutError, OSError, asyncio.IncompleteReadError, ConnectionError):
        return None
    return int(response.port) if int(response.error_code) == 0 else None


async def _until(what: str, check: Callable[[], Any], timeout: float, poll: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = await check()
        if got:
            return got
        await asyncio.sleep(poll)
    raise RuntimeError(f"timed out after {timeout:.0f} s waiting for {what}")


async def _serving(port: int) -> None:
    """Until the instance answers a commit (an upstream one has claimed and loaded its partitions)."""
    async def ok() -> bool:
        return await _commit(port, "warm-up") == 0
    await _until("the instance to answer OffsetCommit", ok, 90)


async def _joins(port: int, count: int, prefix: str) -> dict[str, float]:
    """`count` KIP-848 members, each alone in a new group: first heartbeat to its assignment (ms)."""
    from tests.support.wire import WireClient, request

    latencies = []
    client = await WireClient.connect(port)
    try:
        for i in range(count):
            member = member_uuid(10_000 + i)
            group = f"{prefix}-{i}"
            started = time.perf_counter()
            epoch = 0
            while True:
                response = await client.request(request(
                    CONSUMER_GROUP_HEARTBEAT, 1, group_id=group, member_id=member, member_epoch=epoch,
                    instance_id=None, rack_id=None, rebalance_timeout=60_000, subscribed_topic_names=[TOPIC],
                    subscribed_topic_regex=None, server_assignor="uniform",
                    topic_partitions=[] if epoch == 0 else None))
                if int(response.error_code):
                    raise RuntimeError(f"join of {group} answered error {int(response.error_code)}")
                epoch = int(response.member_epoch)
                assignment = response.assignment
                if assignment is not None and any(tp.partitions for tp in assignment.topic_partitions):
                    break
                if time.perf_counter() - started > 30:
                    raise RuntimeError(f"{group} got no assignment in 30 s")
            latencies.append((time.perf_counter() - started) * 1000)
            await client.request(request(  # leaves, unmeasured, so the next join is as alone as this one
                CONSUMER_GROUP_HEARTBEAT, 1, group_id=group, member_id=member, member_epoch=-1, instance_id=None,
                rack_id=None, rebalance_timeout=-1, subscribed_topic_names=None, subscribed_topic_regex=None,
                server_assignor=None, topic_partitions=None))
    finally:
        await client.close()
    ordered = sorted(latencies)
    return {"p50_ms": statistics.median(ordered), "p99_ms": ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))],
            "joins": len(ordered)}


# ---- measures -----------------------------------------------------------------------------------

async def _side(plan: Plan, port: int, storage: str) -> dict[str, Any]:
    await _serving(port)
    before = _load()
    commits = await sc.throughput(port, sc.commit_templates(plan.commit_groups, TOPIC), connections=plan.connections,
                                  window=plan.window, seconds=plan.commit_seconds, warmup=min(0.5, plan.commit_seconds / 4))
    after_commits = _load()
    joins = await _joins(port, plan.joins, f"join-{storage}")
    if storage == "upstream":  # what the replay will read (unmeasured)
        wrote = await sc.throughput(port, _wide_commits(plan.replay_commits), connections=2, window=4, seconds=300,
                                    max_requests=plan.replay_commits, warmup=0)
        if wrote["errors"]:
            raise RuntimeError(f"the replay's commits failed: {wrote['errors']}")
    return {"commits": commits, "commit_load": (before, after_commits), "joins": joins,
            "join_load": (after_commits, _load())}


def _loaded_event(server: Any) -> dict[str, Any] | None:
    for line in server.log().splitlines():
        if line.startswith("{") and '"cluster_log_loaded"' in line:
            event: dict[str, Any] = json.loads(line)
            if int(event.get("read", 0)) > 0:
                return event
    return None


def _owned(server: Any) -> frozenset[int]:
    last: frozenset[int] = frozenset()
    for line in server.log().splitlines():
        if line.startswith("{") and '"instance_group_assignment"' in line:
            last = frozenset(json.loads(line)["owned"])
    return last


async def _takeover(servers: list[Any]) -> dict[str, Any]:
    async def divided() -> bool:
        shares = [_owned(s) for s in servers]
        return all(shares) and frozenset().union(*shares) == frozenset(range(LOG_PARTITIONS))
    await _until("the log partitions divided among the instances", divided, 90)
    group = "takeover"

    async def owner_port() -> int | None:
        port = await _coordinator_port(servers[0].port, group)
        return port if port is not None and await _commit(port, group) == 0 else None
    port = await _until("the group's owner to answer", owner_port, 90)
    owner = next(s for s in servers if s.port == port)
    survivors = [s for s in servers if s is not owner]
    before = _load()
    killed = time.monotonic()
    owner.proc.kill()

    async def answered() -> bool:
        new = await _coordinator_port(survivors[0].port, group)
        return new is not None and new != owner.port and await _commit(new, group, 2) == 0
    await _until("a survivor to answer for the group", answered, 120, poll=0.02)
    return {"seconds": time.monotonic() - killed, "load": (before, _load())}


async def _replay(workdir: Path, bootstrap: str, log_topic: str) -> dict[str, Any]:
    # No tail: the load itself reads every partition from its start, so its event times the replay.
    server = _instance(workdir, "replay", bootstrap, "upstream", log_topic, **{"coordinator.log.tail.interval.ms": "0"})
    before = _load()
    started = time.monotonic()
    with _running([server]):
        await _serving(server.port)
        answered = time.monotonic() - started
        event = await _until("the instance's cluster_log_loaded event", lambda: _async(_loaded_event(server)), 30)
    return {"read": int(event["read"]), "records": int(event["records"]), "seconds": float(event["seconds"]),
            "start_to_answer_s": answered, "load": (before, _load())}


async def _async(value: Any) -> Any:
    return value


async def _measure(plan: Plan, workdir: Path, bootstrap: str) -> Results:
    _ensure_topics(bootstrap)
    log_topic = f"bench-log-{uuid.uuid4().hex[:8]}"
    results: Results = {}
    for storage in ("upstream", "local"):
        with _running([_instance(workdir, storage, bootstrap, storage, log_topic)]) as (server,):
            results[storage] = await _side(plan, server.port, storage)
    results["replay"] = await _replay(workdir, bootstrap, log_topic)
    takeover_topic = f"bench-takeover-{uuid.uuid4().hex[:8]}"
    trio = [_instance(workdir, f"t{n}", bootstrap, "upstream", takeover_topic,
                      **{"sidecar.node.id": str(2000 + n), "coordinator.log.session.timeout.ms": str(SESSION_MS)})
            for n in (1, 2, 3)]
    with _running(trio):
        results["takeover"] = await _takeover(trio)
    return results


def run(plan: Plan, workdir: Path) -> tuple[Results, str]:
    """Measures everything against one Kafka (started here or BENCH_KAFKA); or why not."""
    from bench import kafka_side as ks

    with ExitStack() as stack:
        kafka, why = stack.enter_context(ks.started_kafka(workdir))
        if kafka is None:
            return {}, why
        return asyncio.run(_measure(plan, workdir, f"{HOST}:{kafka.port}")), ""
    return {}, "unreachable"  # pragma: no cover - the with block returns


# ---- the report ---------------------------------------------------------------------------------

def _loads(pair: tuple[float, float]) -> str:
    return f"load {pair[0]:.2f} → {pair[1]:.2f}"


def rows(plan: Plan, results: Results, why: str) -> list[Any]:
    from bench.report import Row, fmt_ms

    up_vs_local = "log upstream vs local"
    commit_what = f"OffsetCommit v8 closed loop, {plan.connections} connections × {plan.window} in flight"
    join_what = f"KIP-848 join, first heartbeat to assignment ({plan.joins} members, each alone in a new group)"
    takeover_what = "takeover: SIGKILL of the owner to the first answered OffsetCommit on the new owner"
    replay_what = "start-up replay of the log topic (fresh instance, empty data directory, no tail)"
    if not results:
        return [Row("clusterlog", what, server, f"not run: {why}")
                for what, server in ((commit_what, up_vs_local), (join_what, up_vs_local),
                                     (takeover_what, "3 instances, log upstream"),
                                     (replay_what, "1 instance, log upstream"))]
    up, local = results["upstream"], results["local"]
    cu, cl = up["commits"], local["commits"]
    ratio = cu["rps"] / cl["rps"] if cl["rps"] else float("nan")
    errors = {k: v for side in (cu, cl) for k, v in side["errors"].items()}
    out = [
        Row("clusterlog", commit_what, up_vs_local,
            f"upstream {cu['rps']:,.0f} req/s, p99 {fmt_ms(cu['p99_ms'])}; local (fsync) {cl['rps']:,.0f} req/s, "
            f"p99 {fmt_ms(cl['p99_ms'])}; ratio {ratio:.2f}"
            + (f"; errors {errors}" if errors else "")
            + f"; upstream {_loads(up['commit_load'])}, local {_loads(local['commit_load'])}"),
        Row("clusterlog", join_what, up_vs_local,
            f"upstream p50 {fmt_ms(up['joins']['p50_ms'])}, p99 {fmt_ms(up['joins']['p99_ms'])}; "
            f"local p50 {fmt_ms(local['joins']['p50_ms'])}, p99 {fmt_ms(local['joins']['p99_ms'])}; "
            f"upstream {_loads(up['join_load'])}, local {_loads(local['join_load'])}"),
    ]
    take = results["takeover"]
    out.append(Row("clusterlog", takeover_what, "3 instances, log upstream",
                   f"{take['seconds']:.2f} s (coordinator.log.session.timeout.ms={SESSION_MS}, tail every 500 ms); "
                   f"{_loads(take['load'])}"))
    rep = results["replay"]
    rate = rep["read"] / rep["seconds"] if rep["seconds"] > 0 else float("inf")
    out.append(Row("clusterlog", replay_what, "1 instance, log upstream",
                   f"{rate:,.0f} records/s ({rep['read']:,} records read in {rep['seconds']:.2f} s, "
                   f"{rep['records']:,} replayed; process start to first answer {rep['start_to_answer_s']:.2f} s); "
                   f"{_loads(rep['load'])}"))
    return out


def main(argv: list[str] | None = None) -> int:
    import tempfile

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--tiny", action="store_true")
    args = parser.parse_args(argv)
    plan = TINY if args.tiny else QUICK if args.quick else FULL
    with tempfile.TemporaryDirectory(prefix="coordinator-clusterlog-bench-") as tmp:
        results, why = run(plan, Path(tmp))
    for row in rows(plan, results, why):
        print(f"{row.benchmark} [{row.server}]: {row.result}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
