"""Server CPU attributable to one KIP-848 member joining a big group (issue 14 point 4).

What is measured: the whole server in this process (decode, adapter, shard, core, records, log
append, the committer's write and fsync in its thread, the history and metrics observers, encode),
fed over one `KafkaConnection` per member (as real clients have one each; a connection serves one
request at a time, so members sharing one would wait for each other's fsyncs) whose responses land
in memory, as `bench/hotpath.py` does. One group of ``N`` KIP-848 members on one topic of ``2N``
partitions is formed first; then the measured part alternates two kinds of window, each two
*rounds* long (a round: every member sends its regular heartbeat, in windows of 16 as a closed loop
keeps 16 in flight, then every member whose response carried a new assignment acknowledges it at
once, as the real clients do, until none has anything to acknowledge):

- a **steady** window: nothing else happens;
- a **join** window: a newcomer's epoch-0 heartbeat goes first (``--burst B``: B newcomers'). The
  group epoch moves, so every member's regular heartbeat of that round catches up to the new epoch,
  the members the newcomer takes partitions from revoke and acknowledge, and the newcomer picks its
  partitions up with its next regular heartbeat (the second round). The group is checked Stable at
  the end of each window.

The definition: **CPU per join = (CPU of the join windows - CPU the steady windows spent per
regular heartbeat x the join windows' regular heartbeats) / joins**. CPU is the process's
(every thread: the event loop, the log committer, the history writer) less the load generator's
own work (building frames, parsing responses; timed with ``thread_time`` around it). So the
heartbeats a member sends anyway are not charged to the join; what a join adds to them (the
catch-up, its record, the fsync it causes, the acknowledgements, the newcomer's heartbeats, the
target) is. Steady and join windows alternate, so machine load and group size drift alike on both.

``--burst B`` lets B newcomers join together at the start of each join window (their joins are
handled one after the other, each computing its target; the members then catch up once, to the
last epoch): the cost per joining member of a join storm.

``--instructions`` counts instructions instead, with valgrind, which other jobs on the machine
cannot disturb: three runs of the same set-up (J steady windows, 2J steady windows, J join
windows); per join = (I(J joins) - I(J steady) - the extra regular heartbeats of the newcomers x
the steady heartbeat's instructions) / J, where the steady heartbeat's instructions are
(I(2J steady) - I(J steady)) / its heartbeats. These counts include the load generator's work
(small next to the server's: a few thousand instructions per response parsed, the same in both
kinds of window) and only user space (not the kernel's share of write and fsync).

Where the CPU goes: ``--breakdown`` splits the join's CPU into user/system time (getrusage; coarse
here) and by thread (the event loop, the record log committer: its write and fsync, whose kernel
time counts; the others); ``--phases`` prints each send's cost per window (the newcomer's join
heartbeat with the members' catch-ups, the revocations' acknowledgements, the newcomer's next
heartbeat, ...) beside the steady window's same sends; ``--profile TOP`` runs the windows under
cProfile (every call inflated alike, ~2-3x) and prints the TOP functions per join; ``--set
log.flush.policy=none`` shows what the fsyncs cost.

It imports ``coordinator`` from the path, so one copy of this file measures any checkout:

    PYTHONPATH=. .venv/bin/python bench/join_cost_server.py [--members 100 1000] [--joins 20] [--burst 1]
    PYTHONPATH=/other/checkout .venv/bin/python bench/join_cost_server.py --instructions --members 100

Prints numbers; asserts nothing about time.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import json
import os
import pstats
import re
import resource
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from typing import Any

import uvloop

# Last on the path: a checkout named by PYTHONPATH is the one measured.
sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.loadgen import scenarios as sc
from bench.loadgen.consumer import ConsumerMember
from bench.loadgen.wire import CONSUMER_GROUP_HEARTBEAT, Template, member_uuid
from coordinator import logging as coordinator_logging
from coordinator.config import resolve
from coordinator.node.server import CoordinatorServer
from coordinator.runtime import gc_policy
from coordinator.runtime.connection import KafkaConnection

WINDOW = 16
GROUP = "join-cost"
TOPIC = "t"
_SIZE = struct.Struct(">i")
KINDS = ("steady", "join")


class Member(ConsumerMember):
    """The model consumer, with its steady heartbeat built by patching the epoch into bytes
    encoded once: after a join every member's epoch moves, and re-encoding 1,000 frames with kio
    would be load-generator work far larger than the server's (it is excluded from the measure,
    but it churns the allocator and the caches the server then runs in)."""

    __slots__ = ("_pattern",)
    _SENTINEL = 0x7EADBEEF

    def __init__(self, group_id: str, member_id: str, topics: list[str]) -> None:
        super().__init__(group_id, member_id, topics)
        self._pattern: tuple[bytes, bytes] | None = None

    def template(self) -> Template:
        if self.left or self.epoch == 0 or not self.acked:
            return super().template()
        if self._pattern is None:
            data = self._encode({"member_epoch": self._SENTINEL, "topic_partitions": None}).data
            at = data.index(_SIZE.pack(self._SENTINEL))
            self._pattern = (data[:at], data[at + 4:])
        head, tail = self._pattern
        return Template(CONSUMER_GROUP_HEARTBEAT, 1, head + _SIZE.pack(self.epoch) + tail)


class Responses:
    """The transport `KafkaConnection` writes to: frames kept in memory, counted as they come."""

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.frames: list[bytes] = []
        self.expected = 0
        self.all_in: asyncio.Event = asyncio.Event()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 1) if name == "peername" else default

    def write(self, data: bytes) -> None:
        buffer = self.buffer
        buffer += data
        pos = 0
        while len(buffer) - pos >= 4:
            (size,) = _SIZE.unpack_from(buffer, pos)
            if len(buffer) - pos - 4 < size:
                break
            self.frames.append(bytes(buffer[pos + 4:pos + 4 + size]))
            pos += 4 + size
        del buffer[:pos]
        if len(self.frames) >= self.expected:
            self.all_in.set()

    def pause_reading(self) -> None: ...

    def resume_reading(self) -> None: ...

    def close(self) -> None: ...

    def abort(self) -> None: ...


class Driver:
    """Sends members' heartbeats over one connection and hands each response to its member."""

    def __init__(self, server: CoordinatorServer, transport: Responses) -> None:
        self.server = server
        self.conns: dict[str, KafkaConnection] = {}
        """One connection per member, as real clients have: a connection serves one request at a
        time (as Kafka's does), so members sharing one would wait for each other's fsyncs."""
        self.transport = transport
        self.cid = 0
        self.driver_cpu = 0.0
        """Thread CPU spent here building frames and parsing responses (not the server's)."""
        self.requests = 0
        self.phase: str | None = None
        """Set by `measure` to ``"<kind> round <r>"`` to have each send's cost kept in `phases`."""
        self.sends_in_round = 0
        self.phases: dict[tuple[str, int], dict[str, float]] = {}
        """Per (phase, send in its round: 0 the regular heartbeats, 1 the first acknowledgements,
        2 any later ones): sends, requests, CPU (process less this driver's), the event loop's and
        the committer's thread CPU, log entries and writes (each with its fsync)."""

    async def send(self, members: list[ConsumerMember]) -> None:
        """One heartbeat of each member, 16 per read; returns when every response is in."""
        if self.phase is None:
            return await self._send(members)
        committer = self.server._committer
        assert committer is not None
        cpu0, drv0, threads0 = time.process_time(), self.driver_cpu, _thread_cpu()
        entries0, writes0 = committer.log.next_offset, committer.batches_written + committer.syncs
        await self._send(members)
        driver, threads = self.driver_cpu - drv0, _thread_cpu()
        row = self.phases.setdefault((self.phase, min(self.sends_in_round, 2)), dict.fromkeys(PHASE_COLUMNS, 0.0))
        row["sends"] += 1
        row["requests"] += len(members)
        row["cpu"] += time.process_time() - cpu0 - driver
        row["loop"] += threads["loop"] - threads0["loop"] - driver
        row["committer"] += threads["committer"] - threads0["committer"]
        row["entries"] += committer.log.next_offset - entries0
        row["writes"] += committer.batches_written + committer.syncs - writes0
        self.sends_in_round += 1

    async def _send(self, members: list[ConsumerMember]) -> None:
        started = time.thread_time()
        pending: dict[int, ConsumerMember] = {}
        frames: list[tuple[KafkaConnection, bytes]] = []
        for member in members:
            self.cid += 1
            pending[self.cid] = member
            frames.append((self._conn(member.member_id), member.template().frame(self.cid)))
        transport = self.transport
        transport.frames = []
        transport.expected = len(members)
        transport.all_in.clear()
        self.requests += len(members)
        self.driver_cpu += time.thread_time() - started
        for i, (conn, frame) in enumerate(frames, 1):
            conn.data_received(frame)
            if i % WINDOW == 0:
                await asyncio.sleep(0)  # the loop's other work runs between reads, as with sockets
        if len(transport.frames) < len(members):
            await asyncio.wait_for(transport.all_in.wait(), 60)
        started = time.thread_time()
        for payload in transport.frames:
            (cid,) = _SIZE.unpack_from(payload, 0)
            error = pending.pop(cid).on_response(payload)
            if error:
                raise RuntimeError(f"heartbeat answered with error {error}")
        self.driver_cpu += time.thread_time() - started

    def _conn(self, member_id: str) -> KafkaConnection:
        conn = self.conns.get(member_id)
        if conn is None:
            conn = self.conns[member_id] = KafkaConnection(self.server.connection_services, len(self.conns) + 1_000_000)
            conn.connection_made(self.transport)  # type: ignore[arg-type]
        return conn

    async def round(self, members: list[ConsumerMember], first: Sequence[ConsumerMember] = ()) -> int:
        """Every member's regular heartbeat (``first``, newcomers, ahead of them), then
        acknowledgements until none is due. Returns the number of regular heartbeats."""
        everyone = [*first, *members]
        self.sends_in_round = 0
        await self.send(everyone)
        while True:
            due = [m for m in everyone if m.wants_heartbeat_now]
            if not due:
                return len(members)
            await self.send(due)


THREADS = ("loop", "committer", "other")
PHASE_COLUMNS = ("sends", "requests", "cpu", "loop", "committer", "entries", "writes")


def _thread_cpu() -> dict[str, float]:
    """CPU seconds so far of the live threads: the event loop's, the record log committer's,
    the others' (the history writer's and the default executor's)."""
    out = {name: 0.0 for name in THREADS}
    for thread in threading.enumerate():
        if thread.ident is None:
            continue
        try:
            spent = time.clock_gettime(time.pthread_getcpuclockid(thread.ident))
        except (OSError, ProcessLookupError):
            continue  # ended meanwhile
        if thread is threading.main_thread():
            out["loop"] += spent
        elif thread.name.startswith("recordlog"):
            out["committer"] += spent
        else:
            out["other"] += spent
    return out


def _stable(server: CoordinatorServer) -> bool:
    assert server.shard is not None
    group = server.shard.core.group(GROUP)
    return group is not None and group.state_name == "Stable"


async def measure(members_count: int, joins: int, window_rounds: int, burst: int = 1,
                  kinds: Sequence[str] = ("steady", "join"), settings: Sequence[str] = (),
                  profiles: dict[str, cProfile.Profile] | None = None,
                  phases: dict[tuple[str, int], dict[str, float]] | None = None) -> dict[str, float]:
    """Runs the windows; returns the totals `report` reads. ``profiles`` (one per kind of window)
    are enabled around the windows; ``phases``, if given, is filled with each send's cost (see
    `Driver.phases`)."""
    workdir = tempfile.mkdtemp(prefix="join-cost-")
    overrides = {"group.initial.rebalance.delay.ms": "0", "group.consumer.max.size": "100000",
                 "group.consumer.session.timeout.ms": "600000", "group.consumer.max.session.timeout.ms": "600000"}
    config = resolve(environ={}, overrides=[f"{k}={v}" for k, v in overrides.items()] + list(settings),
                     flags={"listeners": "127.0.0.1:0", "metrics.listen": "127.0.0.1:0",
                            "log.dirs": os.path.join(workdir, "data")})
    server = CoordinatorServer(config)
    await server.start()
    try:
        await sc.create_topics(server.port, {TOPIC: 2 * members_count})
        transport = Responses()
        driver = Driver(server, transport)
        members: list[ConsumerMember] = [Member(GROUP, member_uuid(i), [TOPIC]) for i in range(members_count)]
        await driver.round(members)
        for _ in range(20):
            if _stable(server):
                break
            await driver.round(members)
        if not _stable(server):
            raise RuntimeError("the group did not settle")
        for _ in range(3):  # warm-up: caches, every member's timer armed
            await driver.round(members)
        gc.collect()
        gc_policy.freeze_survivors(asyncio.get_running_loop())  # as the server does after loading

        totals = {"steady_cpu": 0.0, "steady_heartbeats": 0, "steady_loop": 0.0, "join_cpu": 0.0,
                  "join_regular": 0, "join_requests": 0, "join_loop": 0.0, "join_entries": 0, "join_fsyncs": 0,
                  "unsettled": 0}
        for kind in kinds:
            totals.update({f"{kind}_user": 0.0, f"{kind}_system": 0.0})
            totals.update({f"{kind}_thread_{name}": 0.0 for name in THREADS})
        committer = server._committer
        assert committer is not None
        newcomer = members_count
        for _ in range(joins):
            for kind in kinds:
                cpu0, drv0, req0 = time.process_time(), driver.driver_cpu, driver.requests
                entries0, fsyncs0 = committer.log.next_offset, committer.batches_written + committer.syncs
                th0 = time.thread_time()
                usage0, threads0 = resource.getrusage(resource.RUSAGE_SELF), _thread_cpu()
                if profiles is not None:
                    profiles[kind].enable()
                regular = 0
                for r in range(window_rounds):
                    if phases is not None:
                        driver.phase = f"{kind} round {r}"
                    first: list[ConsumerMember] = []
                    if kind == "join" and r == 0:
                        first = [Member(GROUP, member_uuid(newcomer + i), [TOPIC]) for i in range(burst)]
                        newcomer += burst
                    regular += await driver.round(members, first)
                    members += first
                if profiles is not None:
                    profiles[kind].disable()
                cpu = (time.process_time() - cpu0) - (driver.driver_cpu - drv0)
                driver.phase = None  # the settling rounds below are not measured
                usage, threads = resource.getrusage(resource.RUSAGE_SELF), _thread_cpu()
                # The load generator's own CPU is nearly all user time: charged there.
                totals[kind + "_user"] += usage.ru_utime - usage0.ru_utime - (driver.driver_cpu - drv0)
                totals[kind + "_system"] += usage.ru_stime - usage0.ru_stime
                for name in THREADS:
                    totals[f"{kind}_thread_{name}"] += threads.get(name, 0.0) - threads0.get(name, 0.0)
                totals[kind + "_thread_loop"] -= driver.driver_cpu - drv0
                # The event loop's thread alone (the committer and history threads left out).
                totals[kind + "_loop"] += time.thread_time() - th0 - (driver.driver_cpu - drv0)
                if not _stable(server):
                    totals["unsettled"] += 1
                    while not _stable(server):
                        await driver.round(members)  # not measured
                if kind == "steady":
                    totals["steady_cpu"] += cpu
                    totals["steady_heartbeats"] += regular
                else:
                    totals["join_cpu"] += cpu
                    totals["join_regular"] += regular
                    totals["join_requests"] += driver.requests - req0
                    # Log entries and group commits (one write and fsync each, shared by every
                    # entry appended meanwhile, whatever its group or partition).
                    totals["join_entries"] += committer.log.next_offset - entries0
                    totals["join_fsyncs"] += committer.batches_written + committer.syncs - fsyncs0
        if phases is not None:
            phases.update(driver.phases)
        for conn in driver.conns.values():
            conn.connection_lost(None)
        gc_policy.thaw()
        return totals
    finally:
        await server.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def report(members: int, windows: int, burst: int, t: dict[str, float], breakdown: bool = False) -> None:
    joined = windows * burst
    per_heartbeat = t["steady_cpu"] / t["steady_heartbeats"]
    attributable = (t["join_cpu"] - per_heartbeat * t["join_regular"]) / joined
    loop_share = (t["join_loop"] - t["steady_loop"] / t["steady_heartbeats"] * t["join_regular"]) / joined
    extra = (t["join_requests"] - t["join_regular"]) / joined
    print(f"group of {members} ({2 * members} partitions), {windows} join windows of {burst} newcomer(s): "
          f"steady heartbeat {per_heartbeat * 1e6:.1f} us CPU; per joining member {attributable * 1e3:.3f} ms CPU "
          f"(event loop {loop_share * 1e3:.3f} ms), {extra:.1f} requests beyond the regular heartbeats; "
          f"per join window {t['join_entries'] / windows:.0f} log entries in {t['join_fsyncs'] / windows:.1f} fsyncs"
          + (f"; {t['unsettled']} windows needed extra rounds to settle" if t["unsettled"] else ""), flush=True)
    if breakdown:
        def share(key: str) -> float:
            """``key``'s CPU per joining member: join windows' less the steady rate x their heartbeats."""
            return (t["join_" + key] - t["steady_" + key] / t["steady_heartbeats"] * t["join_regular"]) / joined
        parts = {"user": share("user"), "system": share("system"),
                 **{f"thread {name}": share("thread_" + name) for name in THREADS}}
        print("  per joining member, us: " + ", ".join(f"{k} {v * 1e6:.0f}" for k, v in parts.items()), flush=True)


def phase_report(phases: dict[tuple[str, int], dict[str, float]], windows: int) -> None:
    """Each send's cost, per window of its kind: a join window's sends less the steady window's
    at the same place show what each step of a join adds."""
    print("  per window, us: phase, send (0 regular heartbeats, 1-2 acknowledgements): requests, CPU, "
          "event loop, committer thread, log entries, writes+fsyncs", flush=True)
    for (phase, send), row in sorted(phases.items()):
        print(f"    {phase:14} {send}  {row['requests'] / windows:6.1f} {row['cpu'] / windows * 1e6:8.1f} "
              f"{row['loop'] / windows * 1e6:8.1f} {row['committer'] / windows * 1e6:8.1f} "
              f"{row['entries'] / windows:6.1f} {row['writes'] / windows:5.2f}", flush=True)


def profile_report(profiles: dict[str, cProfile.Profile], t: dict[str, float], joined: int, top: int) -> None:
    """The event loop's functions by CPU per joining member under cProfile (which inflates every
    call alike): join windows' tottime less the steady windows' per heartbeat x the join windows'
    regular heartbeats. Cumulative times likewise, to see whole subsystems."""
    stats = {kind: pstats.Stats(prof).stats for kind, prof in profiles.items()}  # type: ignore[attr-defined]
    rate = t["join_regular"] / t["steady_heartbeats"]
    rows = []
    for func, (_cc, nc, tt, ct, _callers) in stats["join"].items():
        base = stats["steady"].get(func, (0, 0, 0.0, 0.0, None))
        rows.append(((tt - base[2] * rate) / joined, (ct - base[3] * rate) / joined,
                     (nc - base[1] * rate) / joined, func))
    for title, index in (("own time", 0), ("cumulative", 1)):
        print(f"  cProfile, per joining member, by {title} (us own, us cumulative, calls):")
        for row in sorted(rows, key=lambda r: -r[index])[:top]:
            file, line, name = row[3]
            where = f"{os.path.relpath(file) if file.startswith('/') else file}:{line}({name})"
            print(f"    {row[0] * 1e6:8.1f} {row[1] * 1e6:9.1f} {row[2]:8.1f}  {where}")


def instructions(members: int, joins: int, burst: int, settings: Sequence[str] = ()) -> None:
    """Instructions per joining member, by three valgrind runs (see the module docstring)."""
    if shutil.which("valgrind") is None:
        raise SystemExit("join_cost_server: --instructions needs valgrind")
    runs: dict[tuple[str, int], tuple[int, dict[str, float]]] = {}
    for kind, count in (("steady", joins), ("steady", 2 * joins), ("join", joins)):
        run = subprocess.run(
            ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
             sys.executable, os.path.abspath(__file__), "--members", str(members), "--joins", str(count),
             "--burst", str(burst), "--only", kind, *(f"--set={s}" for s in settings)],
            capture_output=True, text=True, check=True)
        match = re.search(r"I\s+refs:\s+([\d,]+)", run.stderr)
        totals = re.search(r"^TOTALS (.*)$", run.stdout, re.MULTILINE)
        if match is None or totals is None:
            raise SystemExit(f"join_cost_server: no counts in valgrind's output:\n{run.stderr[-2000:]}")
        runs[(kind, count)] = (int(match.group(1).replace(",", "")), json.loads(totals.group(1)))
    (steady, steady_t), (steady2, steady2_t), (joined, joined_t) = runs.values()
    per_heartbeat = (steady2 - steady) / (steady2_t["steady_heartbeats"] - steady_t["steady_heartbeats"])
    extra_regular = joined_t["join_regular"] - steady_t["steady_heartbeats"]
    per_member = (joined - steady - extra_regular * per_heartbeat) / (joins * burst)
    print(f"group of {members} ({2 * members} partitions), {joins} join windows of {burst} newcomer(s): "
          f"steady heartbeat {per_heartbeat:,.0f} instructions; per joining member {per_member:,.0f} instructions "
          f"({per_member / per_heartbeat:.0f} steady heartbeats)", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--members", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--joins", type=int, default=20, help="join windows (and as many steady ones)")
    parser.add_argument("--burst", type=int, default=1, help="newcomers joining together per join window")
    parser.add_argument("--rounds", type=int, default=2, help="rounds per window (default 2)")
    parser.add_argument("--repeat", type=int, default=1, help="runs per group size")
    parser.add_argument("--instructions", action="store_true",
                        help="count instructions under valgrind (minutes per group size)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a server setting, e.g. log.flush.policy=none to see the fsyncs' share")
    parser.add_argument("--breakdown", action="store_true",
                        help="also split the join's CPU into user/system time and by thread")
    parser.add_argument("--phases", action="store_true",
                        help="also print each send's cost per window (newcomer + catch-ups, acknowledgements, ...)")
    parser.add_argument("--profile", type=int, metavar="TOP", default=0,
                        help="run the event loop under cProfile and print the TOP functions per join")
    parser.add_argument("--only", choices=KINDS, help=argparse.SUPPRESS)  # one valgrind run's windows
    args = parser.parse_args()
    coordinator_logging.configure("warning", json=True)
    if args.only is not None:
        totals = uvloop.run(measure(args.members[0], args.joins, args.rounds, args.burst, (args.only,), args.set))
        print("TOTALS", json.dumps(totals), flush=True)
        return
    if args.instructions:
        for members in args.members:
            instructions(members, args.joins, args.burst, args.set)
        return
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    for members in args.members:
        for _ in range(args.repeat):
            profiles = {kind: cProfile.Profile() for kind in KINDS} if args.profile else None
            phases: dict[tuple[str, int], dict[str, float]] | None = {} if args.phases else None
            totals = uvloop.run(measure(members, args.joins, args.rounds, args.burst, KINDS, args.set, profiles, phases))
            report(members, args.joins, args.burst, totals, args.breakdown)
            if phases is not None:
                phase_report(phases, args.joins)
            if profiles is not None:
                profile_report(profiles, totals, args.joins * args.burst, args.profile)
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)


if __name__ == "__main__":
    main()
