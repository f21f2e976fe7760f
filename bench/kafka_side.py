"""The coordinator side by side with Apache Kafka 4.0 in one sitting (issue 31 point 1).

Kafka is the yardstick: the same socket-level load generator (`bench/loadgen`) drives both servers,
measure by measure, in alternating order, after a whole warm-up cycle of the workload on both (a
cold JVM costs several times a warm one per request; the warm-up cycle's numbers are kept as
"cold"). CPU is every thread of the server's process, from `/proc/PID/task/*/schedstat` (time on
CPU in ns, user and kernel), read before and after each measure. The measures:

- steady: ConsumerGroupHeartbeat v1 of members that really joined, sent at a fixed rate (an open
  loop paced every few ms over several connections): CPU per heartbeat, and the same net of the
  server's idle CPU (taken just before, with no load: a JVM's background threads, our timers);
- closed loop: the same heartbeats, `window` outstanding on each connection: requests per second;
- joins: a KIP-848 group of N members on a topic of 2N partitions; windows of two *rounds* (every
  member heartbeats once, back to back, acknowledging a new assignment at once, until no member has
  anything to acknowledge) alternate between steady windows and join windows, where a newcomer's
  join goes first. CPU per join = (CPU of the join windows - the steady windows' CPU per regular
  heartbeat x the join windows' regular heartbeats) / joins; the members' own heartbeats are not
  charged to the join, what the join adds (the catch-ups, revocations, acknowledgements, the
  newcomer's requests, the target) is. After each join window, unmeasured, the newcomer leaves and
  the group settles again, so every window sees a group of N. Join-to-stable: from the newcomer's join to every member
  owning its balanced share with everything acknowledged, members heartbeating in rounds;
- commits: OffsetCommit v8 (simple commits, one partition) at a fixed rate: CPU per commit (and
  net of idle, as the heartbeats).
  Kafka's durability is its log append (no fsync: `log.flush.interval.messages` is unbounded by
  default); the coordinator is measured with `log.flush.policy=always` (fsync before the reply)
  and `none` beside it.

Kafka comes from `KAFKA_HOME`, else from `shared/kafka/kafka_2.13-4.0.0` beside the checkout (or
beside one of its parents: a git worktree lives a level deeper), started here (single-node KRaft,
`tests/support/kafka.py`) and stopped at the end; or `BENCH_KAFKA=host:port` names a running broker
(its process is found from the listening socket; CPU rows need it on this machine). Without Kafka
every row says why.

    python -m bench.kafka_side [--quick|--tiny]     prints the rows (--quick and --tiny measure one
                                                     turn after the warm-up, when a JVM is not yet
                                                     warm: their ratios are indicative only)
    bench/run --only kafka                            writes them into BENCHMARKS.md

Prints numbers; asserts nothing about time. The machine is shared: absolute numbers move with the
load average every row carries; the ratios of alternating runs are the result.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from bench.loadgen import scenarios as sc
from bench.loadgen.conn import Connection
from bench.loadgen.consumer import ConsumerMember
from bench.loadgen.wire import (
    Template,
    decode_response,
    member_uuid,
    offset_commit_v8_error,
    request,
)

ROOT = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"
KAFKA_DIST = Path("shared") / "kafka" / "kafka_2.13-4.0.0"
STEADY_TOPIC, STEADY_PARTITIONS = "side-t10", 10
COMMIT_TOPIC = "side-commits"
FIND_COORDINATOR = 10
SESSION_MS = 600_000  # members idle while the other server is measured must not expire

KAFKA = "Apache Kafka 4.0"
OURS = "coordinator"
OURS_NO_FSYNC = "coordinator, log.flush.policy=none"


@dataclass(frozen=True)
class Plan:
    label: str
    turns: int                       # measured turns, after the warm-up cycle
    groups: int                      # steady members: groups x per_group
    per_group: int
    rate: int                        # steady heartbeats per second (open loop)
    rate_seconds: float
    connections: int                 # closed loop: connections x window outstanding
    window: int
    loop_seconds: float
    join_sizes: tuple[int, ...]      # N
    joins: int                       # join windows (and as many steady windows) per N per turn
    commit_rate: int
    commit_seconds: float
    commit_connections: int = 64     # a reply waits for its fsync: enough connections for the rate
    loadgen_processes: int = 2       # the closed loop's load generators: one Python process saturates first
    idle_seconds: float = 1.0        # each fixed-rate measure first takes the server's idle CPU this long


FULL = Plan("full", 3, 100, 10, 5_000, 5.0, 16, 16, 5.0, (10, 100, 500, 1_000), 5, 2_000, 5.0)
QUICK = Plan("quick", 1, 20, 10, 2_000, 2.0, 16, 16, 2.0, (10, 100), 3, 1_000, 2.0, idle_seconds=0.5)
TINY = Plan("tiny", 1, 2, 5, 300, 0.5, 4, 4, 0.5, (10,), 1, 200, 0.5, commit_connections=8, loadgen_processes=1,
            idle_seconds=0.2)


# ---- CPU and load -------------------------------------------------------------------------------

def task_cpu_ns(pid: int) -> int:
    """Time on CPU of every live thread of `pid` (ns, user and kernel), from schedstat."""
    total = 0
    base = f"/proc/{pid}/task"
    for tid in os.listdir(base):
        with contextlib.suppress(OSError), open(f"{base}/{tid}/schedstat") as stat:
            total += int(stat.read().split()[0])
    return total


def load1() -> float:
    return os.getloadavg()[0]


@dataclass
class Sample:
    """One measure on one server: the numbers, the load average around it."""

    values: dict[str, float]
    load: tuple[float, float]


# ---- servers ------------------------------------------------------------------------------------

@dataclass
class Server:
    name: str
    port: int
    pid: int | None  # None: CPU not measurable (a BENCH_KAFKA broker on another machine)


def kafka_home() -> tuple[Path | None, str]:
    """The Kafka distribution to start, or None and why not."""
    value = os.environ.get("KAFKA_HOME")
    if value:
        home = Path(value)
        if (home / "bin" / "kafka-server-start.sh").is_file():
            return home, ""
        return None, f"KAFKA_HOME={value} holds no bin/kafka-server-start.sh"
    for parent in ROOT.parents:
        home = parent / KAFKA_DIST
        if (home / "bin" / "kafka-server-start.sh").is_file():
            return home, ""
    return None, f"no Kafka: KAFKA_HOME and BENCH_KAFKA unset and no {KAFKA_DIST} beside the checkout"


def listening_pid(port: int) -> int | None:
    """The pid of the process listening on `port` on this machine, from /proc, or None."""
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
    return None


def coordinator_overrides(policy: str) -> dict[str, str]:
    return {"log.flush.policy": policy, "group.consumer.session.timeout.ms": str(SESSION_MS),
            "group.consumer.max.session.timeout.ms": str(SESSION_MS),
            "group.consumer.heartbeat.interval.ms": "5000"}


@contextlib.contextmanager
def started_kafka(workdir: Path) -> Iterator[tuple[Server | None, str]]:
    """Kafka from BENCH_KAFKA or a distribution started here (stopped on exit); or None and why."""
    target = os.environ.get("BENCH_KAFKA")
    if target:
        host, _, port_text = target.rpartition(":")
        if host not in ("", HOST, "localhost"):
            yield None, f"BENCH_KAFKA={target}: only a broker on {HOST} can be measured (CPU from /proc)"
            return
        port = int(port_text)
        pid = listening_pid(port)
        yield (Server(KAFKA, port, pid), "") if pid else (None, f"BENCH_KAFKA={target}: no process listens there")
        return
    home, why = kafka_home()
    if home is None:
        yield None, why
        return
    from tests.support.kafka import KafkaBroker

    broker = KafkaBroker(home, workdir / "kafka", {
        "group.consumer.session.timeout.ms": str(SESSION_MS),
        "group.consumer.max.session.timeout.ms": str(SESSION_MS),
        "group.consumer.heartbeat.interval.ms": "5000",
    })
    try:
        broker.start()
    except Exception as exc:  # a broker that cannot start: the rows say why
        broker.stop()
        yield None, f"Kafka from {home} did not start: {str(exc).splitlines()[0] if str(exc) else exc!r}"
        return
    try:
        assert broker.proc is not None
        yield Server(KAFKA, broker.port, broker.proc.pid), ""  # the start script execs java: one pid
    finally:
        broker.stop()


@contextlib.contextmanager
def started_coordinator(workdir: Path, name: str, policy: str) -> Iterator[Server]:
    from tests.support.server import ServerProcess

    server = ServerProcess(workdir / name / "data", overrides=coordinator_overrides(policy))
    server.data_dir.parent.mkdir(parents=True, exist_ok=True)
    try:
        server.start()
        assert server.proc is not None
        yield Server(name, server.port, server.proc.pid)
    finally:
        server.stop()


# ---- load: paced, closed, rounds ----------------------------------------------------------------

async def paced(port: int, templates: Sequence[Template], rate: int, seconds: float, connections: int,
                check: Callable[[bytes], int]) -> dict[str, Any]:
    """`rate` requests per second for `seconds` (sent every 2 ms, cycling over `templates` and the
    connections), then every response awaited: requests, errors, achieved rate."""
    conns = [await Connection.open(HOST, port) for _ in range(connections)]
    outstanding = [0]
    errors: dict[int, int] = {}
    sent = 0

    def on_response(payload: bytes, latency: int) -> None:
        outstanding[0] -= 1
        code = check(payload) if latency >= 0 else -1
        if code:
            errors[code] = errors.get(code, 0) + 1

    try:
        started = time.perf_counter()
        while (now := time.perf_counter()) - started < seconds:
            due = int((now - started) * rate) - sent
            for _ in range(due):
                conns[sent % connections].send(templates[sent % len(templates)], on_response)
                sent += 1
            outstanding[0] += due
            await asyncio.sleep(0.002)
        deadline = time.perf_counter() + 30
        while outstanding[0] > 0 and time.perf_counter() < deadline:
            await asyncio.sleep(0.002)
        elapsed = time.perf_counter() - started
    finally:
        await sc.close_quietly(conns)
    return {"requests": sent - outstanding[0], "seconds": elapsed, "rps": (sent - outstanding[0]) / elapsed,
            "errors": errors}


class Rounds:
    """Members heartbeat in rounds over a few connections: every member once (pipelined), then at
    once whoever has a new assignment to acknowledge, until none has; errors reset the member as a
    client does (it rejoins in the next round)."""

    def __init__(self, conns: list[Connection]) -> None:
        self.conns = conns
        self.errors: dict[int, int] = {}

    async def send(self, members: Sequence[ConsumerMember]) -> int:
        futures = [self.conns[i % len(self.conns)].call(m.template()) for i, m in enumerate(members)]
        replies = await asyncio.wait_for(asyncio.gather(*futures), 60)  # a server that stops answering
        for member, payload in zip(members, replies, strict=True):
            code = member.on_response(payload)
            if code:
                self.errors[code] = self.errors.get(code, 0) + 1
        return len(members)

    async def acknowledge(self, members: Sequence[ConsumerMember]) -> int:
        sent = 0
        for _ in range(50):
            pending = [m for m in members if m.wants_heartbeat_now]
            if not pending:
                break
            sent += await self.send(pending)
        return sent

    async def round(self, members: Sequence[ConsumerMember]) -> int:
        """Requests sent: the members' regular heartbeats first, their acknowledgements after."""
        return await self.send(members) + await self.acknowledge(members)


async def form(rounds: Rounds, members: list[ConsumerMember], partitions: int, timeout: float = 120.0) -> None:
    deadline = time.perf_counter() + timeout
    while not sc.consumer_balanced(members, partitions):
        if time.perf_counter() > deadline:
            raise RuntimeError(f"a group of {len(members)} did not balance in {timeout:g} s "
                               f"(errors {rounds.errors})")
        await rounds.round(members)
        await asyncio.sleep(0.01)  # a broker may still be taking in a new topic's metadata


@dataclass
class JoinGroup:
    """One group of N members on its own topic of 2N partitions, on one server."""

    n: int
    group: str
    topic: str
    members: list[ConsumerMember]
    rounds: Rounds
    joined: int = 0

    @property
    def partitions(self) -> int:
        return 2 * self.n


@dataclass
class ServerState:
    server: Server
    steady: list[Template] = field(default_factory=list)
    joins: dict[int, JoinGroup] = field(default_factory=dict)


async def coordinator_ready(port: int, group: str, timeout: float = 60.0) -> None:
    """FindCoordinator until the server coordinates `group`: Kafka creates and loads its offsets
    topic on the first FindCoordinator and answers NOT_COORDINATOR to group requests until then."""
    conn = await Connection.open(HOST, port)
    deadline = time.perf_counter() + timeout
    try:
        while True:
            payload = await conn.call(request(FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": [group]}))
            found = decode_response(FIND_COORDINATOR, 4, payload).coordinators[0]
            if not found.error_code:
                return
            if time.perf_counter() > deadline:
                raise RuntimeError(f"FindCoordinator({group}) still answers error {found.error_code}")
            await asyncio.sleep(0.2)
    finally:
        conn.close()


def _cgh_error(payload: bytes) -> int:
    return (payload[9] << 8) | payload[10]


async def prepare(state: ServerState, plan: Plan, tag: str) -> None:
    """Topics, the steady members (joined, then idle) and one group per join size, formed."""
    port = state.server.port
    topics = {STEADY_TOPIC: STEADY_PARTITIONS, COMMIT_TOPIC: 8}
    topics.update({f"side-join-{tag}-{n}": 2 * n for n in plan.join_sizes})
    await sc.create_topics(port, topics)
    await coordinator_ready(port, f"side-{tag}-0")
    conns = [await Connection.open(HOST, port) for _ in range(16)]
    rounds = Rounds(conns)
    steady: list[ConsumerMember] = []
    for g in range(plan.groups):
        group = [ConsumerMember(f"side-{tag}-{g}", member_uuid(g * plan.per_group + i), [STEADY_TOPIC])
                 for i in range(plan.per_group)]
        await form(rounds, group, STEADY_PARTITIONS)
        steady += group
    await sc.close_quietly(conns)
    state.steady = [m.template() for m in steady]
    for n in plan.join_sizes:
        conns = [await Connection.open(HOST, port) for _ in range(16)]
        members = [ConsumerMember(f"side-join-{tag}-{n}", member_uuid(1_000_000 * n + i), [f"side-join-{tag}-{n}"])
                   for i in range(n)]
        joining = JoinGroup(n, f"side-join-{tag}-{n}", f"side-join-{tag}-{n}", members, Rounds(conns))
        await form(joining.rounds, members, joining.partitions)
        state.joins[n] = joining


# ---- measures -----------------------------------------------------------------------------------

async def fixed_rate(server: Server, templates: Sequence[Template], rate: int, seconds: float, connections: int,
                     check: Callable[[bytes], int], idle_seconds: float) -> dict[str, float]:
    """CPU per request at `rate` (after a short warm-up at the same rate), and the same net of
    what the server spends idle (measured just before: a JVM's background threads, our timers)."""
    pid = server.pid
    await paced(server.port, templates, rate, min(0.5, seconds), connections, check)
    idle_rate = 0.0
    if pid:
        await asyncio.sleep(0.1)  # the warm-up's last replies (and their writes) out of the way
        before, started = task_cpu_ns(pid), time.perf_counter()
        await asyncio.sleep(idle_seconds)
        idle_rate = (task_cpu_ns(pid) - before) / (time.perf_counter() - started)  # ns per second
    before = task_cpu_ns(pid) if pid else 0
    got = await paced(server.port, templates, rate, seconds, connections, check)
    used = task_cpu_ns(pid) - before if pid else 0
    requests = max(got["requests"], 1)
    return {"us_per_request": used / 1e3 / requests,
            "us_net_of_idle": (used - idle_rate * got["seconds"]) / 1e3 / requests,
            "idle_pct": idle_rate / 1e7, "rps": got["rps"], "errors": sum(got["errors"].values())}


async def measure_steady(state: ServerState, plan: Plan) -> dict[str, float]:
    return await fixed_rate(state.server, state.steady, plan.rate, plan.rate_seconds, plan.connections,
                            _cgh_error, plan.idle_seconds)


async def measure_closed(state: ServerState, plan: Plan) -> dict[str, float]:
    pid = state.server.pid
    before = task_cpu_ns(pid) if pid else 0
    started = time.perf_counter()
    got = await sc.throughput(state.server.port, state.steady, connections=plan.connections, window=plan.window,
                              seconds=plan.loop_seconds, warmup=min(0.5, plan.loop_seconds / 4),
                              processes=plan.loadgen_processes)
    used = task_cpu_ns(pid) - before if pid else 0
    elapsed = time.perf_counter() - started
    return {"rps": got["rps"], "p99_ms": got["p99_ms"], "cpu_pct": used / 1e9 / elapsed * 100,
            "errors": sum(got["errors"].values())}


async def measure_joins(state: ServerState, plan: Plan, n: int) -> dict[str, float]:
    """`plan.joins` steady and as many join windows, alternating (see the module's docstring)."""
    group = state.joins[n]
    pid = state.server.pid
    rounds = group.rounds
    cpu = {"steady": 0, "join": 0}
    regular = {"steady": 0, "join": 0}
    requests = {"steady": 0, "join": 0}
    stable_s: list[float] = []
    steady_s: list[float] = []
    for _ in range(plan.joins):
        # steady window: two rounds
        before = task_cpu_ns(pid) if pid else 0
        started = time.perf_counter()
        for _ in range(2):
            requests["steady"] += await rounds.round(group.members)
            regular["steady"] += len(group.members)
        steady_s.append(time.perf_counter() - started)
        cpu["steady"] += (task_cpu_ns(pid) - before) if pid else 0
        # join window: a newcomer first, then two rounds, then rounds until balanced
        newcomer = ConsumerMember(group.group, member_uuid(2_000_000 * n + group.joined), [group.topic])
        group.joined += 1
        before = task_cpu_ns(pid) if pid else 0
        started = time.perf_counter()
        regulars = list(group.members)
        group.members.append(newcomer)
        requests["join"] += await rounds.send([newcomer]) + await rounds.acknowledge([newcomer])
        took: float | None = None
        for i in range(20):
            requests["join"] += await rounds.send(regulars) + await rounds.send([newcomer])
            regular["join"] += len(regulars)
            requests["join"] += await rounds.acknowledge(group.members)
            if took is None and sc.consumer_balanced(group.members, group.partitions):
                took = time.perf_counter() - started
            if i >= 1 and took is not None:
                break
        cpu["join"] += (task_cpu_ns(pid) - before) if pid else 0
        if took is None:
            raise RuntimeError(f"{state.server.name}: the group of {n} did not balance after a join "
                               f"(errors {rounds.errors})")
        stable_s.append(took)
        # Not measured: the newcomer leaves and the group settles, so every window sees N members.
        newcomer.left = True
        await rounds.send([newcomer])
        group.members.remove(newcomer)
        await form(rounds, group.members, group.partitions)
    per_heartbeat = cpu["steady"] / max(regular["steady"], 1)
    per_join = (cpu["join"] - per_heartbeat * regular["join"]) / plan.joins
    return {"ms_per_join": per_join / 1e6, "stable_ms": statistics.median(stable_s) * 1000,
            "steady_window_ms": statistics.median(steady_s) * 1000,
            "us_per_heartbeat": per_heartbeat / 1e3, "requests_per_join": requests["join"] / plan.joins,
            "errors": sum(rounds.errors.values())}


async def measure_commits(server: Server, plan: Plan) -> dict[str, float]:
    return await fixed_rate(server, sc.commit_templates(256, COMMIT_TOPIC), plan.commit_rate, plan.commit_seconds,
                            plan.commit_connections, offset_commit_v8_error, plan.idle_seconds)


# ---- the sitting --------------------------------------------------------------------------------

Results = dict[tuple[str, str], list[Sample]]
"""(measure, server name) -> one sample per turn; turn 0 is the warm-up cycle."""


async def _timed(results: Results, key: tuple[str, str], run: Any) -> None:
    low = load1()
    values = await run
    results.setdefault(key, []).append(Sample(values, (low, load1())))
    print(f"  {key[0]} [{key[1]}]: " + ", ".join(f"{k} {v:,.2f}" for k, v in values.items())
          + f" (load {low:.1f})", flush=True)


async def sitting(plan: Plan, servers: list[Server], no_fsync: Server | None) -> Results:
    states = [ServerState(s) for s in servers]
    for state in states:
        await prepare(state, plan, uuid.uuid4().hex[:6])
    if no_fsync is not None:
        await sc.create_topics(no_fsync.port, {COMMIT_TOPIC: 8})
    results: Results = {}
    for turn in range(plan.turns + 1):  # turn 0: the warm-up cycle, the whole workload once
        order = states if turn % 2 == 0 else states[::-1]
        print(f"  -- turn {turn}{' (warm-up)' if turn == 0 else ''}", flush=True)
        for state in order:
            await _timed(results, ("steady", state.server.name), measure_steady(state, plan))
        for state in order[::-1]:
            await _timed(results, ("closed", state.server.name), measure_closed(state, plan))
        for n in plan.join_sizes:
            for state in order:
                await _timed(results, (f"join{n}", state.server.name), measure_joins(state, plan, n))
        commit_servers = [s.server for s in order] + ([no_fsync] if no_fsync else [])
        for server in commit_servers if turn % 2 == 0 else commit_servers[::-1]:
            await _timed(results, ("commit", server.name), measure_commits(server, plan))
    for state in states:
        for group in state.joins.values():
            await sc.close_quietly(group.rounds.conns)
    return results


def run(plan: Plan, workdir: Path) -> tuple[Results, str, dict[str, str]]:
    """Both servers in one sitting. Returns the results, why Kafka is missing ("" when it ran), and
    the Kafka distribution or broker used."""
    import uvloop

    with contextlib.ExitStack() as stack:
        ours = stack.enter_context(started_coordinator(workdir, OURS, "always"))
        no_fsync = stack.enter_context(started_coordinator(workdir, OURS_NO_FSYNC, "none"))
        kafka, why = stack.enter_context(started_kafka(workdir))
        servers = [kafka, ours] if kafka is not None else [ours]
        results = uvloop.run(sitting(plan, servers, no_fsync))
    where = {"kafka": os.environ.get("BENCH_KAFKA") or str(kafka_home()[0])} if kafka is not None else {}
    return results, why, where


# ---- rows ---------------------------------------------------------------------------------------

def _warm(samples: list[Sample]) -> list[Sample]:
    return samples[1:] or samples


def _span(values: list[float], fmt: str) -> str:
    low, high = min(values), max(values)
    return format(low, fmt) if format(low, fmt) == format(high, fmt) else f"{format(low, fmt)}–{format(high, fmt)}"


def _load(samples: list[Sample]) -> str:
    loads = [x for s in samples for x in s.load]
    return f"load {min(loads):.1f}–{max(loads):.1f}"


def rows(plan: Plan, results: Results, why: str) -> list[Any]:
    """The report's rows (bench.report.Row): per measure, ours beside Kafka's warm (and cold) number,
    their ratio (the medians of the measured turns) and the target where the issue sets one."""
    from bench.report import Row, verdict

    measures: list[tuple[str, str, str, str, float | None, str]] = [
        # (key, what, value, unit, target ratio, format)
        ("steady", f"CPU per steady ConsumerGroupHeartbeat v1 at {plan.rate:,} req/s "
                   f"({plan.groups * plan.per_group:,} members)", "us_per_request", "µs", 0.3, ".1f"),
        ("closed", f"closed-loop ConsumerGroupHeartbeat v1, {plan.connections} connections × {plan.window} "
                   "in flight", "rps", "req/s", None, ",.0f"),
    ]
    for n in plan.join_sizes:
        measures.append((f"join{n}", f"CPU per member joining a group of {n:,} ({2 * n:,} partitions)",
                         "ms_per_join", "ms", 0.8, ".2f"))
        measures.append((f"join{n}", f"join to stable, group of {n:,} (members heartbeat in back-to-back rounds; "
                         "a steady window's two rounds beside it)", "stable_ms", "ms", None, ".1f"))
    measures.append(("commit", f"CPU per OffsetCommit v8 at {plan.commit_rate:,} req/s", "us_per_request", "µs",
                     1.0, ".1f"))
    out = []
    for key, what, value, unit, target, fmt in measures:
        ours = results.get((key, OURS), [])
        if not ours:
            continue
        ours_v = [s.values[value] for s in _warm(ours)]
        text = f"ours {_span(ours_v, fmt)} {unit}"
        if value == "stable_ms":
            text += f" (two steady rounds {_span([s.values['steady_window_ms'] for s in _warm(ours)], fmt)} ms)"
        if key == "commit" and (key, OURS_NO_FSYNC) in results:
            text += f" with fsync, {_span([s.values[value] for s in _warm(results[(key, OURS_NO_FSYNC)])], fmt)} " \
                    f"{unit} without"
        theirs = results.get((key, KAFKA), [])
        samples = _warm(ours) + _warm(theirs)
        errors = sum(s.values.get("errors", 0) for s in ours + theirs)
        target_text = f"≤ {target:g}× warm Kafka" if target is not None else ""
        if not theirs:
            out.append(Row("kafka", what, f"{OURS} vs {KAFKA}", f"{text}; Kafka not run: {why}; {_load(samples)}",
                           target_text, "n/a"))
            continue
        kafka_v = [s.values[value] for s in _warm(theirs)]
        ratio = statistics.median(ours_v) / max(statistics.median(kafka_v), 1e-12)
        text += f"; Kafka {_span(kafka_v, fmt)} {unit} warm"
        if value == "stable_ms":
            text += f" (two steady rounds {_span([s.values['steady_window_ms'] for s in _warm(theirs)], fmt)} ms)"
        text += (f", {format(theirs[0].values[value], fmt)} cold (warm-up cycle); ratio **{ratio:.2f}**; "
                 f"{_load(samples)}")
        if value == "us_per_request":  # the fixed-rate rows: the same net of each server's idle CPU
            ours_net = statistics.median(s.values["us_net_of_idle"] for s in _warm(ours))
            kafka_net = statistics.median(s.values["us_net_of_idle"] for s in _warm(theirs))
            idle = [statistics.median(s.values["idle_pct"] for s in _warm(x)) for x in (ours, theirs)]
            text += (f"; net of idle CPU (ours {idle[0]:.1f} %, Kafka {idle[1]:.1f} % of a core): ours "
                     f"{format(ours_net, fmt)}, Kafka {format(kafka_net, fmt)} {unit}, ratio "
                     f"{ours_net / max(kafka_net, 1e-12):.2f}")
        if errors:
            text += f"; {errors:,.0f} error responses"
        if value == "rps" or value == "stable_ms":
            met = "n/a"
        else:
            met = verdict(ratio <= target) if target is not None else "n/a"
        out.append(Row("kafka", what, f"{OURS} vs {KAFKA}", text, target_text, met,
                       {"ours": [s.values for s in ours], "kafka": [s.values for s in theirs], "ratio": ratio}))
    return out


def plan_for(label: str) -> Plan:
    return {"full": FULL, "quick": QUICK, "tiny": TINY}[label]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="The coordinator side by side with Apache Kafka 4.0")
    parser.add_argument("--quick", action="store_true", help="smaller sizes (a couple of minutes)")
    parser.add_argument("--tiny", action="store_true", help="the smoke test's sizes (under 30 s)")
    parser.add_argument("--sizes", help="join sizes, comma-separated (e.g. 10,100)")
    parser.add_argument("--turns", type=int, help="measured turns after the warm-up")
    parser.add_argument("--json", metavar="FILE", help="write every sample (turn 0 is the warm-up) as JSON")
    args = parser.parse_args(argv)
    plan = TINY if args.tiny else QUICK if args.quick else FULL
    if args.sizes:
        plan = replace(plan, join_sizes=tuple(int(n) for n in args.sizes.split(",")))
    if args.turns:
        plan = replace(plan, turns=args.turns)
    # SIGTERM unwinds like Ctrl-C, so the servers started here are stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    with tempfile.TemporaryDirectory(prefix="coordinator-kafka-side-") as tmp:
        results, why, _ = run(plan, Path(tmp))
    for row in rows(plan, results, why):
        print(f"{row.benchmark}: {row.result}  [{row.target} {row.met}]")
    if args.json:
        Path(args.json).write_text(json.dumps({f"{k[0]} [{k[1]}]": [{"load": s.load, **s.values} for s in v]
                                               for k, v in results.items()}, indent=1))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
