"""CPU per request of the server's hot path, measured in-process so that the machine's load matters less.

`bench/run --only throughput` measures the whole system over sockets, with the load generator on the
same cores; on a shared machine its ratios swing by 2x from one run to the next. This measures the
part that is the coordinator's own: an in-process server is set up over real sockets (a topic,
classic members joined and synced, KIP-848 members joined and reconciled, by `bench/loadgen`), then
the measured loop hands one `KafkaConnection` the members' steady-state heartbeat frames in windows
of 16 (as the closed loop keeps 16 in flight per connection) and writes the responses to an
in-memory transport: decode, adapter, shard, core, encode, metrics — no kernel, no client.

Two measures:
- wall time per request, the minimum over many short rounds (the least disturbed one);
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
from coordinator import logging as coordinator_logging
from coordinator.config import resolve
from coordinator.node.server import CoordinatorServer
from coordinator.runtime.connection import KafkaConnection

WINDOW = 16
APIS = ("heartbeat", "consumer-group-heartbeat")


class MemoryTransport:
    """What `KafkaConnection` writes to, kept in memory (the measured loop has no socket)."""

    def __init__(self) -> None:
        self.writes = 0

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 1) if name == "peername" else default

    def write(self, data: bytes) -> None:
        self.writes += 1

    def pause_reading(self) -> None: ...

    def resume_reading(self) -> None: ...

    def close(self) -> None: ...

    def abort(self) -> None: ...


async def _frames(server: CoordinatorServer, api: str, groups: int, per_group: int) -> list[bytes]:
    port = server.port
    if api == "heartbeat":
        return [t.data for t in await sc.join_classic(port, groups, per_group, {"t10": 10}, timeout=600)]
    members, _ = await sc.join_consumers(port, groups, per_group, "t10", 10, timeout=600)
    return [m.template().data for m in members]


def _windows(frames: list[bytes]) -> list[bytes]:
    return [b"".join(frames[i:i + WINDOW]) for i in range(0, len(frames), WINDOW)]


async def _feed(conn: KafkaConnection, windows: list[bytes], passes: int) -> int:
    for _ in range(passes):
        for window in windows:
            conn.data_received(window)
            await asyncio.sleep(0)  # as between two reads of a socket
    return passes * len(windows)


async def measure(api: str, groups: int, per_group: int, rounds: int, count: int | None) -> None:
    workdir = tempfile.mkdtemp(prefix="hotpath-")
    overrides = {"group.initial.rebalance.delay.ms": "0", "group.consumer.heartbeat.interval.ms": "1000",
                 "group.consumer.min.heartbeat.interval.ms": "1000"}
    config = resolve(environ={}, overrides=[f"{k}={v}" for k, v in overrides.items()],
                     flags={"listeners": "127.0.0.1:0", "metrics.listen": "127.0.0.1:0",
                            "log.dirs": os.path.join(workdir, "data")})
    server = CoordinatorServer(config)
    await server.start()
    try:
        await sc.create_topics(server.port, {"t10": 10})
        frames = await _frames(server, api, groups, per_group)
        windows = _windows(frames)
        transport = MemoryTransport()
        conn = KafkaConnection(server.connection_services, 1_000_000)
        conn.connection_made(transport)  # type: ignore[arg-type]
        await _feed(conn, windows, 3)  # warm-up: every member's timer armed, caches filled
        if count is not None:  # under valgrind: a fixed amount of work, no timing
            await _feed(conn, windows[:1], count)
        else:
            best = float("inf")
            for _ in range(rounds):
                started = time.perf_counter()
                fed = await _feed(conn, windows, 2)
                best = min(best, (time.perf_counter() - started) / (fed * WINDOW))
            print(f"{api}: {best * 1e6:.2f} us/request (min of {rounds} rounds of {2 * len(frames)} requests)",
                  flush=True)
        if transport.writes == 0:
            raise RuntimeError("no response was written")
        conn.connection_lost(None)
    finally:
        await server.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def instructions(api: str, groups: int, per_group: int) -> None:
    """Instructions per request: two valgrind runs, 50 and 450 windows of 16, differenced (the
    set-up, start-up and shut-down cancel out)."""
    if shutil.which("valgrind") is None:
        raise SystemExit("hotpath: --instructions needs valgrind")
    totals = []
    for count in (50, 450):
        run = subprocess.run(
            ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
             sys.executable, os.path.abspath(__file__), "--api", api, "--groups", str(groups),
             "--per-group", str(per_group), "--count", str(count)],
            capture_output=True, text=True, check=True)
        match = re.search(r"I\s+refs:\s+([\d,]+)", run.stderr)
        if match is None:
            raise SystemExit(f"hotpath: no instruction count in valgrind's output:\n{run.stderr[-2000:]}")
        totals.append(int(match.group(1).replace(",", "")))
    print(f"{api}: {(totals[1] - totals[0]) / (400 * WINDOW):,.0f} instructions/request", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--api", choices=[*APIS, "both"], default="both")
    parser.add_argument("--groups", type=int, default=20, help="default 20 (2 with --instructions)")
    parser.add_argument("--per-group", type=int, default=10, help="default 10 (8 with --instructions)")
    parser.add_argument("--rounds", type=int, default=150)
    parser.add_argument("--instructions", action="store_true",
                        help="count instructions under valgrind (about a minute per API)")
    parser.add_argument("--count", type=int, help=argparse.SUPPRESS)  # one valgrind run's windows
    args = parser.parse_args()
    coordinator_logging.configure("warning", json=True)
    apis = APIS if args.api == "both" else (args.api,)
    for api in apis:
        if args.instructions:  # valgrind is ~50x slower: a smaller set-up (the loop is what counts)
            instructions(api, 2 if args.groups == 20 else args.groups, 8 if args.per_group == 10 else args.per_group)
        else:
            uvloop.run(measure(api, args.groups, args.per_group, args.rounds, args.count))


if __name__ == "__main__":
    main()
