"""CPU per request of the server's hot path, measured in-process so that the machine's load matters less.

`bench/run --only throughput` measures the whole system over sockets, with the load generator on the
same cores; on a shared machine its ratios swing by 2x from one run to the next. This measures the
part that is the coordinator's own: an in-process server is set up over real sockets (a topic,
classic members joined and synced, KIP-848 members joined and reconciled, by `bench/loadgen`), then
the measured loop hands one `KafkaConnection` the members' steady-state heartbeat frames in windows
of 16 (as the closed loop keeps 16 in flight per connection) and writes the responses to an
in-memory transport: decode, adapter, shard, core, encode, metrics — no kernel, no client.
The OffsetCommit loops commit the same offsets again and again: v8 as simple commits (no member,
`bench/loadgen`'s commit templates), v9 as the joined KIP-848 members' commits of the partitions
they own (sessions made long enough that the slow valgrind runs expire none); each commit also
writes its record to the log (the committer's write and fsync run in their thread).

`share-fetch` is one share-group member's steady ShareFetch v2 (a topic of 1 partition, stored
batches of 140 records of 100 B, `MaxRecords` 500 as the clients' `max.poll.records`, each fetch
accepting what the previous one acquired, piggy-backed, as `bench/share_bench.py` does): decode,
authorization, session, the read through the batch cache, the shard and its core, the log entry
written and fsynced in its thread, the response with the acquired batches. Its frames are built
before the loop (a rehearsal group shows what each fetch acquires; the measured group, fresh on
the same log, acquires the same), and the last response is checked.

Two measures (three for `share-fetch`):
- wall time per request, the minimum over many short rounds (the least disturbed one);
- with `--stages` (`share-fetch` only): the CPU time of the main thread and of the whole process
  per fetch, and of each stage of the fetch (the thread CPU inside a few functions, each wrapped:
  about a microsecond of clock reads per wrapped call is in each figure); a stage missing in the
  measured checkout is left out;
- with `--instructions`: instructions per request, counted by valgrind (cachegrind) over two runs
  of different lengths and differenced, which no other job on the machine can disturb.

It imports `coordinator` from the path, so one copy of this file measures any checkout:

    .venv/bin/python bench/hotpath.py
    PYTHONPATH=/path/to/other/checkout .venv/bin/python bench/hotpath.py --instructions

Prints numbers; asserts nothing on time.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any

import uvloop

# Last on the path: a checkout named by PYTHONPATH is the one measured.
sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.loadgen import scenarios as sc
from bench.loadgen.consumer import ConsumerMember
from bench.loadgen.wire import OFFSET_COMMIT, decode_response, request
from coordinator import logging as coordinator_logging
from coordinator.config import resolve
from coordinator.node.server import CoordinatorServer
from coordinator.runtime.connection import KafkaConnection

WINDOW = 16
SHARE_FETCH = 78
APIS = ("heartbeat", "consumer-group-heartbeat", "offset-commit-v8", "offset-commit-v9", "share-fetch")
SESSION_MS = 3_600_000  # the commit loops feed no heartbeat: no member may expire under valgrind


class MemoryTransport:
    """What `KafkaConnection` writes to, kept in memory (the measured loop has no socket)."""

    def __init__(self, count: bool) -> None:
        self.writes = 0
        self.last = b""
        self.count = count
        """Count the responses written (the commit loops wait for them; the heartbeat loops do not
        pay for counting)."""
        self.responses = 0
        self._waiting: tuple[int, asyncio.Future[None]] | None = None

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 1) if name == "peername" else default

    def write(self, data: bytes) -> None:
        self.writes += 1
        self.last = data
        if not self.count:
            return
        at = 0
        while at < len(data):  # whole responses only, one or several a write
            at += 4 + int.from_bytes(data[at:at + 4], "big")
            self.responses += 1
        if self._waiting is not None and self.responses >= self._waiting[0]:
            self._waiting[1].set_result(None)
            self._waiting = None

    async def until(self, responses: int) -> None:
        """Until `responses` responses in all have been written (without spinning: a reply that
        waits for the log's fsync is written when the fsync thread reports)."""
        if self.responses < responses:
            waiter = asyncio.get_running_loop().create_future()
            self._waiting = (responses, waiter)
            await waiter

    def pause_reading(self) -> None: ...

    def resume_reading(self) -> None: ...

    def close(self) -> None: ...

    def abort(self) -> None: ...


async def _frames(server: CoordinatorServer, api: str, groups: int, per_group: int) -> list[bytes]:
    port = server.port
    if api == "heartbeat":
        return [t.data for t in await sc.join_classic(port, groups, per_group, {"t10": 10}, timeout=600)]
    if api == "offset-commit-v8":
        return [t.data for t in sc.commit_templates(groups * per_group, "t10")]
    members, _ = await sc.join_consumers(port, groups, per_group, "t10", 10, timeout=600)
    if api == "offset-commit-v9":
        return [_commit_v9(m) for m in members]
    return [m.template().data for m in members]


def _commit_v9(member: ConsumerMember) -> bytes:
    """The member's commit of every partition it owns (of topic t10, the only one), at its epoch."""
    owned = sorted(p for partitions in member.owned.values() for p in partitions)
    return request(OFFSET_COMMIT, 9, {
        "group_id": member.group_id, "generation_id_or_member_epoch": member.epoch, "member_id": member.member_id,
        "group_instance_id": None, "topics": [{"name": "t10", "partitions": [
            {"partition_index": p, "committed_offset": 1000 + p, "committed_leader_epoch": -1,
             "committed_metadata": ""} for p in owned]}]}).data


def _windows(frames: list[bytes]) -> list[tuple[bytes, int]]:
    """The frames in windows of WINDOW (the last may be shorter), each with its frame count."""
    return [(b"".join(frames[i:i + WINDOW]), len(frames[i:i + WINDOW])) for i in range(0, len(frames), WINDOW)]


async def _feed(conn: KafkaConnection, windows: list[tuple[bytes, int]], passes: int,
                transport: MemoryTransport, wait: bool) -> int:
    """`wait`: each window's responses are awaited before the next (commits wait for the log).
    Returns the number of requests fed."""
    fed = 0
    expected = transport.responses
    for _ in range(passes):
        for window, count in windows:
            conn.data_received(window)
            fed += count
            if wait:
                expected += count
                await transport.until(expected)
            else:
                await asyncio.sleep(0)  # as between two reads of a socket
    return fed


async def measure(api: str, groups: int, per_group: int, rounds: int, count: int | None) -> None:
    workdir = tempfile.mkdtemp(prefix="hotpath-")
    overrides = {"group.initial.rebalance.delay.ms": "0", "group.consumer.heartbeat.interval.ms": "1000",
                 "group.consumer.min.heartbeat.interval.ms": "1000",
                 "group.consumer.session.timeout.ms": str(SESSION_MS),
                 "group.consumer.max.session.timeout.ms": str(SESSION_MS)}
    config = resolve(environ={}, overrides=[f"{k}={v}" for k, v in overrides.items()],
                     flags={"listeners": "127.0.0.1:0", "metrics.listen": "127.0.0.1:0",
                            "log.dirs": os.path.join(workdir, "data")})
    server = CoordinatorServer(config)
    await server.start()
    try:
        await sc.create_topics(server.port, {"t10": 10})
        frames = await _frames(server, api, groups, per_group)
        windows = _windows(frames)
        wait = api.startswith("offset-commit")
        transport = MemoryTransport(count=wait)
        conn = KafkaConnection(server.connection_services, 1_000_000)
        conn.connection_made(transport)  # type: ignore[arg-type]
        await _feed(conn, windows, 3, transport, wait)  # warm-up: every member's timer armed, caches filled
        if count is not None:  # under valgrind: a fixed amount of work, no timing
            await _feed(conn, windows[:1], count, transport, wait)
        else:
            best = float("inf")
            for _ in range(rounds):
                started = time.perf_counter()
                fed = await _feed(conn, windows, 2, transport, wait)
                best = min(best, (time.perf_counter() - started) / fed)
            print(f"{api}: {best * 1e6:.2f} us/request (min of {rounds} rounds of {2 * len(frames)} requests)",
                  flush=True)
        if transport.writes == 0:
            raise RuntimeError("no response was written")
        if api.startswith("offset-commit"):  # the loop measured commits that were accepted
            _check_committed(int(api[-1]), bytes(transport.last))
        conn.connection_lost(None)
    finally:
        await server.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def _check_committed(version: int, written: bytes) -> None:
    """The first response of the last write accepted every partition."""
    size = int.from_bytes(written[:4], "big")
    body = decode_response(OFFSET_COMMIT, version, written[4:4 + size])
    errors = {p.error_code for t in body.topics for p in t.partitions}
    if errors != {0}:
        raise RuntimeError(f"OffsetCommit v{version} answered {errors}")


# ---- share-fetch ------------------------------------------------------------------------------

SHARE_BATCH = 140
"""Records per stored batch: Kafka's default 16 KB batch.size of 100-byte records."""
SHARE_REHEARSAL = 6
SHARE_WARM = 3
SHARE_INSTRUCTION_COUNTS = (20, 120)
"""The two valgrind runs' measured fetches (the records produced are the same for both)."""


async def _produce_batches(port: int, topic: str, records: int) -> None:
    """``records`` records of 100 B into partition 0, one stored batch of SHARE_BATCH per Produce."""
    from bench.loadgen.conn import Connection
    from tests.dataplane.records import make_batch

    batch = make_batch([b"v" * 100] * SHARE_BATCH)
    frame = request(0, 9, {"acks": -1, "timeout": 30_000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": batch}]}]})
    conn = await Connection.open("127.0.0.1", port)
    try:
        for start in range(0, -(-records // SHARE_BATCH), 64):  # 64 in flight at a time
            payloads = await asyncio.gather(*(conn.call(frame) for _ in range(start, min(start + 64,
                                                                                       -(-records // SHARE_BATCH)))))
            for payload in payloads:
                body = decode_response(0, 9, payload)
                codes = {int(p.error_code) for t in body.responses for p in t.partition_responses}
                if codes != {0}:
                    raise RuntimeError(f"Produce answered {codes}")
    finally:
        conn.close()


async def _share_member(port: int, group: str, topic: str) -> Any:
    """A member of ``group`` that has its assignment (the partitions' start offsets are set after
    the first heartbeat's answer: the next ones get them)."""
    from bench.loadgen.conn import Connection
    from bench.share_bench import ShareMember

    member = ShareMember(await Connection.open("127.0.0.1", port), group, "M" * 22, topic)
    await member.heartbeat(0)
    deadline = time.monotonic() + 60
    while not member.partitions:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{group}: no assignment in 60 s")
        await asyncio.sleep(0.01)
        await member.heartbeat(member.epoch)
    return member


def _acquired(payload: bytes) -> tuple[list[tuple[int, int]], int]:
    """A ShareFetch v2 response's acquired ranges of its one partition, and its acknowledgement error."""
    body = decode_response(SHARE_FETCH, 2, payload)
    if body.error_code:
        raise RuntimeError(f"ShareFetch answered {body.error_code} {body.error_message}")
    (part,) = body.responses[0].partitions
    if part.error_code:
        raise RuntimeError(f"ShareFetch partition answered {part.error_code} {part.error_message}")
    return [(int(a.first_offset), int(a.last_offset)) for a in part.acquired_records], int(part.acknowledge_error_code)


async def _rehearse(port: int, topic: str) -> int:
    """How many records each steady fetch acquires (the same for every fetch: whole stored batches
    up to MaxRecords), found by a member of another group fetching on the fly."""
    member = await _share_member(port, "rehearsal", topic)
    try:
        acks: dict[int, list[tuple[int, int]]] = {}
        got: list[tuple[int, int]] = []
        for epoch in range(SHARE_REHEARSAL):
            ranges, error = _acquired(await member.conn.call(member._fetch(epoch, acks)))
            if error or len(ranges) != 1:
                raise RuntimeError(f"rehearsal fetch {epoch}: acquired {ranges}, acknowledgement error {error}")
            got.append(ranges[0])
            acks = {0: ranges}
        await member.conn.call(member._fetch(SHARE_REHEARSAL, acks, final=True))  # nothing left in flight
    finally:
        member.conn.close()
    step = got[0][1] - got[0][0] + 1
    if got != [(k * step, k * step + step - 1) for k in range(SHARE_REHEARSAL)]:
        raise RuntimeError(f"the fetches acquire unevenly: {got}")
    return step


STAGES = (
    ("protocol.codec", "RequestCodec", "decode", "request decode"),
    ("coordinator.runtime.connection", "KafkaConnection", "_process", "connection: serve the frames read"),
    ("coordinator.share.fetch_apis", "_Serving", "_serve", "share fetch handler (with the shard's submit)"),
    ("coordinator.share.fetch_apis", "_Serving", "_read_now", "read (cache, data plane)"),
    ("coordinator.runtime.shard", "ShardRuntime", "submit", "shard submit (with the core)"),
    ("coordinator.core.shard", "CoordinatorShard", "handle_batch", "core"),
    ("coordinator.share.fetch_apis", "_Serving", "_describe", "answer described and encoded"),
    ("coordinator.runtime.connection_replies", "ReplyPipeline", "_respond", "connection: response queued"),
)


def _wrap_stages(totals: dict[str, int], on: list[bool]) -> None:
    """Count the thread CPU spent in each of STAGES while ``on[0]``."""
    import importlib

    clock = time.thread_time_ns
    for module, cls_name, name, label in STAGES:
        cls = getattr(importlib.import_module(module), cls_name)
        original = getattr(cls, name, None)
        if original is None:
            continue

        def wrapped(*args: Any, __original: Any = original, __label: str = label, **kwargs: Any) -> Any:
            if not on[0]:
                return __original(*args, **kwargs)
            started = clock()
            try:
                return __original(*args, **kwargs)
            finally:
                totals[__label] = totals.get(__label, 0) + clock() - started

        setattr(cls, name, wrapped)


async def measure_share(rounds: int, count: int | None, stages: bool = False) -> None:
    """The steady ShareFetch (see the module docstring): ``count`` fetches under valgrind, else
    the minimum wall time per fetch over ``rounds`` rounds of 10."""
    fetches = SHARE_WARM + (max(SHARE_INSTRUCTION_COUNTS) if count is not None else rounds * 10)
    workdir = tempfile.mkdtemp(prefix="hotpath-")
    long = str(SESSION_MS)
    config = resolve(environ={}, overrides=[
        "share.auto.offset.reset=earliest", f"group.share.session.timeout.ms={long}",
        f"group.share.max.session.timeout.ms={long}", f"group.share.heartbeat.interval.ms={long}",
        f"group.share.max.heartbeat.interval.ms={long}"],
        flags={"listeners": "127.0.0.1:0", "metrics.listen": "127.0.0.1:0", "log.dirs": os.path.join(workdir, "data")})
    server = CoordinatorServer(config)
    await server.start()
    try:
        await sc.create_topics(server.port, {"s1": 1})
        await _produce_batches(server.port, "s1", (fetches + SHARE_REHEARSAL + 1) * 600)
        step = await _rehearse(server.port, "s1")
        member = await _share_member(server.port, "measured", "s1")
        frames = [member._fetch(0, {}).data] + [
            member._fetch(k, {0: [((k - 1) * step, k * step - 1)]}).data for k in range(1, fetches)]
        transport = MemoryTransport(count=True)
        conn = KafkaConnection(server.connection_services, 1_000_000)
        conn.connection_made(transport)  # type: ignore[arg-type]

        async def feed(frames: list[bytes]) -> None:
            for frame in frames:
                conn.data_received(frame)
                await transport.until(transport.responses + 1)

        await feed(frames[:SHARE_WARM])
        if stages:
            totals: dict[str, int] = {}
            on = [True]
            _wrap_stages(totals, on)
            chunk = frames[SHARE_WARM:SHARE_WARM + 10 * rounds]
            main0, process0 = time.thread_time_ns(), time.process_time_ns()
            await feed(chunk)
            main, process = time.thread_time_ns() - main0, time.process_time_ns() - process0
            on[0] = False
            per = 1000 * len(chunk)
            print(f"share-fetch: CPU per fetch of {step} records: main thread {main / per:.0f} us, "
                  f"all threads {process / per:.0f} us", flush=True)
            for label, spent in sorted(totals.items(), key=lambda item: -item[1]):
                print(f"  {spent / per:6.1f} us  {label}", flush=True)
        elif count is not None:
            await feed(frames[SHARE_WARM:SHARE_WARM + count])
        else:
            best = float("inf")
            for r in range(rounds):
                chunk = frames[SHARE_WARM + 10 * r:SHARE_WARM + 10 * (r + 1)]
                started = time.perf_counter()
                await feed(chunk)
                best = min(best, (time.perf_counter() - started) / len(chunk))
            print(f"share-fetch: {best * 1e6:.1f} us/fetch of {step} records (min of {rounds} rounds of 10)",
                  flush=True)
        last = bytes(transport.last)
        ranges, error = _acquired(last[4:4 + int.from_bytes(last[:4], "big")])
        k = transport.responses - 1
        if ranges != [(k * step, k * step + step - 1)] or error:
            raise RuntimeError(f"fetch {k} acquired {ranges} (expected {k * step}..), acknowledgement error {error}")
        conn.connection_lost(None)
        member.conn.close()
    finally:
        await server.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def instructions(api: str, groups: int, per_group: int) -> None:
    """Instructions per request: two valgrind runs, 50 and 450 windows of 16, differenced (the
    set-up, start-up and shut-down cancel out)."""
    if shutil.which("valgrind") is None:
        raise SystemExit("hotpath: --instructions needs valgrind")
    totals = []
    counts = SHARE_INSTRUCTION_COUNTS if api == "share-fetch" else (50, 450)
    for count in counts:
        run = subprocess.run(
            ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
             sys.executable, os.path.abspath(__file__), "--api", api, "--groups", str(groups),
             "--per-group", str(per_group), "--count", str(count)],
            capture_output=True, text=True, check=True)
        match = re.search(r"I\s+refs:\s+([\d,]+)", run.stderr)
        if match is None:
            raise SystemExit(f"hotpath: no instruction count in valgrind's output:\n{run.stderr[-2000:]}")
        totals.append(int(match.group(1).replace(",", "")))
    requests = counts[1] - counts[0] if api == "share-fetch" else (counts[1] - counts[0]) * WINDOW
    print(f"{api}: {(totals[1] - totals[0]) / requests:,.0f} instructions/request", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--api", choices=[*APIS, "all"], default="all")
    parser.add_argument("--groups", type=int, default=20, help="default 20 (2 with --instructions)")
    parser.add_argument("--per-group", type=int, default=10, help="default 10 (8 with --instructions)")
    parser.add_argument("--rounds", type=int, default=150)
    parser.add_argument("--instructions", action="store_true",
                        help="count instructions under valgrind (about a minute per API)")
    parser.add_argument("--stages", action="store_true",
                        help="share-fetch: CPU per fetch, main thread and process, and per stage")
    parser.add_argument("--count", type=int, help=argparse.SUPPRESS)  # one valgrind run's windows
    args = parser.parse_args()
    coordinator_logging.configure("warning", json=True)
    apis = APIS if args.api == "all" else (args.api,)
    for api in apis:
        if args.instructions:  # valgrind is ~50x slower: a smaller set-up (the loop is what counts)
            instructions(api, 2 if args.groups == 20 else args.groups, 8 if args.per_group == 10 else args.per_group)
        elif api == "share-fetch":
            uvloop.run(measure_share(min(args.rounds, 40), args.count, args.stages))
        else:
            uvloop.run(measure(api, args.groups, args.per_group, args.rounds, args.count))


if __name__ == "__main__":
    main()
