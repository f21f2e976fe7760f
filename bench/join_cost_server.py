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

It imports ``coordinator`` from the path, so one copy of this file measures any checkout:

    PYTHONPATH=. .venv/bin/python bench/join_cost_server.py [--members 100 1000] [--joins 20] [--burst 1]
    PYTHONPATH=/other/checkout .venv/bin/python bench/join_cost_server.py --instructions --members 100

Prints numbers; asserts nothing about time.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
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
from coordinator.runtime import gc_policy
from coordinator.runtime.connection import KafkaConnection
from coordinator.runtime.server import CoordinatorServer

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

    async def send(self, members: list[ConsumerMember]) -> None:
        """One heartbeat of each member, 16 per read; returns when every response is in."""
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
            conn = self.conns[member_id] = KafkaConnection(self.server, len(self.conns) + 1_000_000)
            conn.connection_made(self.transport)  # type: ignore[arg-type]
        return conn

    async def round(self, members: list[ConsumerMember], first: Sequence[ConsumerMember] = ()) -> int:
        """Every member's regular heartbeat (``first``, newcomers, ahead of them), then
        acknowledgements until none is due. Returns the number of regular heartbeats."""
        everyone = [*first, *members]
        await self.send(everyone)
        while True:
            due = [m for m in everyone if m.wants_heartbeat_now]
            if not due:
                return len(members)
            await self.send(due)


def _stable(server: CoordinatorServer) -> bool:
    assert server.shard is not None
    group = server.shard.core.group(GROUP)
    return group is not None and group.state_name == "Stable"


async def measure(members_count: int, joins: int, window_rounds: int, burst: int = 1,
                  kinds: Sequence[str] = ("steady", "join")) -> dict[str, float]:
    workdir = tempfile.mkdtemp(prefix="join-cost-")
    overrides = {"group.initial.rebalance.delay.ms": "0", "group.consumer.max.size": "100000",
                 "group.consumer.session.timeout.ms": "600000", "group.consumer.max.session.timeout.ms": "600000"}
    config = resolve(environ={}, overrides=[f"{k}={v}" for k, v in overrides.items()],
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
        committer = server._committer
        assert committer is not None
        newcomer = members_count
        for _ in range(joins):
            for kind in kinds:
                cpu0, drv0, req0 = time.process_time(), driver.driver_cpu, driver.requests
                entries0, fsyncs0 = committer.log.next_offset, committer.batches_written + committer.syncs
                th0 = time.thread_time()
                regular = 0
                for r in range(window_rounds):
                    first: list[ConsumerMember] = []
                    if kind == "join" and r == 0:
                        first = [Member(GROUP, member_uuid(newcomer + i), [TOPIC]) for i in range(burst)]
                        newcomer += burst
                    regular += await driver.round(members, first)
                    members += first
                cpu = (time.process_time() - cpu0) - (driver.driver_cpu - drv0)
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
        for conn in driver.conns.values():
            conn.connection_lost(None)
        gc_policy.thaw()
        return totals
    finally:
        await server.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def report(members: int, windows: int, burst: int, t: dict[str, float]) -> None:
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


def instructions(members: int, joins: int, burst: int) -> None:
    """Instructions per joining member, by three valgrind runs (see the module docstring)."""
    if shutil.which("valgrind") is None:
        raise SystemExit("join_cost_server: --instructions needs valgrind")
    runs: dict[tuple[str, int], tuple[int, dict[str, float]]] = {}
    for kind, count in (("steady", joins), ("steady", 2 * joins), ("join", joins)):
        run = subprocess.run(
            ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
             sys.executable, os.path.abspath(__file__), "--members", str(members), "--joins", str(count),
             "--burst", str(burst), "--only", kind],
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
    parser.add_argument("--only", choices=KINDS, help=argparse.SUPPRESS)  # one valgrind run's windows
    args = parser.parse_args()
    coordinator_logging.configure("warning", json=True)
    if args.only is not None:
        totals = uvloop.run(measure(args.members[0], args.joins, args.rounds, args.burst, (args.only,)))
        print("TOTALS", json.dumps(totals), flush=True)
        return
    if args.instructions:
        for members in args.members:
            instructions(members, args.joins, args.burst)
        return
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    for members in args.members:
        for _ in range(args.repeat):
            totals = uvloop.run(measure(members, args.joins, args.rounds, args.burst))
            report(members, args.joins, args.burst, totals)
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)


if __name__ == "__main__":
    main()
