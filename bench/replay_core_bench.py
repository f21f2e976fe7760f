"""Measure start-up replay of a record log into the coordinator core and print the numbers.

Writes N OffsetCommit records (one per entry, through the real record codec: 1,000 groups x 10
topics x 100 partitions: every record a distinct key, so the core ends up holding N offsets), then
times, each over the same files:

1. log level: `RecordLog.open` with a replay callback that does nothing (frames, CRC, entry
   decoding, the duplicate/fencing filter);
2. into the core: `RecordLog.open(..., replay=Replayer(core))`, the loader the server uses at
   start-up (record decoding and `CoordinatorShard.replay` on top of 1).

No assertions. Run: ``.venv/bin/python bench/replay_core_bench.py [--records N] [--dir PATH]
[--repeat K]`` (best of K runs is printed alongside each run).
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import tempfile
import time

from coordinator.core.records import OffsetCommitKey, OffsetCommitValue, Record, encode_record
from coordinator.core.shard import CoordinatorShard
from coordinator.recordlog import (
    FlushPolicy,
    LogConfig,
    LogEntry,
    LogRecord,
    RealFileSystem,
    RecordLog,
)
from coordinator.runtime.ownership import Replayer

FS = RealFileSystem()


def write_log(directory: str, n: int) -> float:
    log = RecordLog.open(FS, directory, config=LogConfig(flush_policy=FlushPolicy.NONE, segment_bytes=64 * 1024 * 1024))
    started = time.perf_counter()
    for i in range(n):
        record = Record(
            OffsetCommitKey(f"group-{i % 1000}", f"topic-{(i // 1000) % 10}", (i // 10000) % 100),
            OffsetCommitValue(i, -1, "", 1_700_000_000_000 + i, -1),
        )
        log.append([LogRecord(*encode_record(record))], i)
        if i % 1000 == 999:
            log.flush()
    log.close()
    return time.perf_counter() - started


def replay_log_level(directory: str) -> tuple[float, int]:
    count = 0

    def replay(entry: LogEntry) -> None:
        nonlocal count
        count += len(entry.records)

    started = time.perf_counter()
    RecordLog.open(FS, directory, config=LogConfig(flush_policy=FlushPolicy.NONE), replay=replay).close()
    return time.perf_counter() - started, count


def replay_into_core(directory: str) -> tuple[float, int, int]:
    core = CoordinatorShard()
    replayer = Replayer(core)
    started = time.perf_counter()
    RecordLog.open(FS, directory, config=LogConfig(flush_policy=FlushPolicy.NONE), replay=replayer).close()
    elapsed = time.perf_counter() - started
    offsets = sum(len(parts) for topics in core.offsets.offsets.values() for parts in topics.values())
    return elapsed, replayer.records, offsets


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--dir", default=None, help="parent directory for the log (default: system temp)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    directory = tempfile.mkdtemp(prefix="replay-core-", dir=args.dir)
    try:
        wrote = write_log(directory, args.records)
        size = sum(os.path.getsize(os.path.join(directory, name)) for name in os.listdir(directory))
        print(f"wrote {args.records:,} OffsetCommit records in {wrote:.2f} s ({size / 1e6:.1f} MB)")
        log_times: list[float] = []
        core_times: list[float] = []
        for run in range(1, args.repeat + 1):
            gc.collect()
            elapsed, count = replay_log_level(directory)
            log_times.append(elapsed)
            print(f"run {run}: log-level replay   {count:,} records in {elapsed:.2f} s ({count / elapsed / 1e3:.0f}k records/s)")
            gc.collect()
            elapsed, count, offsets = replay_into_core(directory)
            core_times.append(elapsed)
            print(f"run {run}: into-core replay   {count:,} records in {elapsed:.2f} s ({count / elapsed / 1e3:.0f}k records/s,"
                  f" {offsets:,} offsets held)")
        print(f"best: log-level {min(log_times):.2f} s, into-core {min(core_times):.2f} s")
    finally:
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
