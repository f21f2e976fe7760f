"""Measure the record log on a real directory and print the numbers (no assertions).

1. Append + flush throughput under each flush policy (always, interval, none), with one entry
   per flush (a lone client: every reply waits for its own fsync) and with 100 entries per flush
   (group commit under load). One entry = one small record (20-byte key, 40-byte value).
2. The asyncio GroupCommitter with 1 and with 64 concurrent appenders under `always`: how much
   group commit buys when many requests wait for durability at once.
3. Replay: write 1,000,000 small records (one per entry, over 10,000 keys) and time
   `RecordLog.open` replaying them entry by entry, loading them at log level (no consumer) and
   loading them into a dict (`load`, superseded values skipped), then time a compaction of the
   closed segments.

Run: ``.venv/bin/python bench/recordlog_bench.py [--dir PATH] [--fsyncs N] [--records N]``.
The directory defaults to the system temp directory; put it on the disk you want to measure
(a tmpfs makes fsync free and the numbers meaningless for `always`).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import tempfile
import time

from coordinator.recordlog import (
    FlushPolicy,
    GroupCommitter,
    LoadBatch,
    LogConfig,
    LogEntry,
    LogRecord,
    RealFileSystem,
    RecordLog,
    compact,
)

FS = RealFileSystem()


def record(i: int, keys: int = 10_000) -> LogRecord:
    return LogRecord(1, b"group-%014d" % (i % keys), b"v" * 40)


def bench_policy(root: str, policy: FlushPolicy, entries: int, per_flush: int) -> None:
    directory = tempfile.mkdtemp(dir=root)
    config = LogConfig(flush_policy=policy, flush_interval_ms=5)
    log = RecordLog.open(FS, directory, config=config)
    started = time.perf_counter()
    for i in range(entries):
        log.append([record(i)], 0)
        if (i + 1) % per_flush == 0:
            log.flush(now_ms=int(time.monotonic() * 1000))
    log.close()
    elapsed = time.perf_counter() - started
    flushes = entries // per_flush
    print(
        f"  {policy.value:<8} {per_flush:>3} entries/flush: {entries / elapsed:>11,.0f} entries/s"
        f"  {elapsed / flushes * 1e6:>8,.1f} us/flush"
    )
    shutil.rmtree(directory)


async def bench_committer(root: str, appenders: int, entries: int) -> None:
    directory = tempfile.mkdtemp(dir=root)
    committer = GroupCommitter(RecordLog.open(FS, directory), on_fatal=_raise)
    committer.start()
    per_appender = entries // appenders

    async def appender(n: int) -> None:
        for i in range(per_appender):
            await committer.append([record(n * per_appender + i)], 0)

    started = time.perf_counter()
    await asyncio.gather(*(appender(n) for n in range(appenders)))
    elapsed = time.perf_counter() - started
    batches = committer.batches_written
    await committer.close()
    total = per_appender * appenders
    print(
        f"  {appenders:>3} concurrent appenders: {total / elapsed:>11,.0f} entries/s"
        f"  {batches:>6} fsynced batches ({total / batches:.1f} entries/batch)"
    )
    shutil.rmtree(directory)


def _raise(exc: BaseException) -> None:
    raise exc


def bench_replay(root: str, records: int) -> None:
    directory = tempfile.mkdtemp(dir=root)
    config = LogConfig(flush_policy=FlushPolicy.NONE, segment_bytes=8 * 1024 * 1024)
    log = RecordLog.open(FS, directory, config=config)
    started = time.perf_counter()
    for i in range(records):
        log.append([record(i)], i)
        if i % 1000 == 999:
            log.flush()
    log.close()
    write_s = time.perf_counter() - started
    size = sum(os.path.getsize(os.path.join(directory, n)) for n in os.listdir(directory))
    segments = len(os.listdir(directory))
    print(
        f"  wrote {records:,} records in {write_s:.2f} s ({size / 1e6:.1f} MB, {segments} segments)"
    )

    count = 0

    def count_only(entry: LogEntry) -> None:
        nonlocal count
        count += len(entry.records)

    started = time.perf_counter()
    RecordLog.open(FS, directory, config=config, replay=count_only).close()
    elapsed = time.perf_counter() - started
    print(
        f"  replay entry by entry (decode + verify CRC): {elapsed:.2f} s  {count / elapsed:>11,.0f} records/s"
        f"  {size / elapsed / 1e6:.0f} MB/s"
    )

    started = time.perf_counter()
    recovery = RecordLog.open(FS, directory, config=config).recovery
    elapsed = time.perf_counter() - started
    print(f"  load, log level (frames + CRC, no consumer): {elapsed:.2f} s  {recovery.entries_read / elapsed:>11,.0f} records/s")

    state: dict[bytes, bytes | None] = {}
    kept = 0

    def apply(batch: LoadBatch) -> None:
        nonlocal kept
        kept += len(batch)
        state.update(batch.items())

    started = time.perf_counter()
    RecordLog.open(FS, directory, config=config, load=apply).close()
    elapsed = time.perf_counter() - started
    print(f"  load into a dict (latest value per key, {kept:,} records): {elapsed:.2f} s"
          f"  {records / elapsed:>11,.0f} records/s")

    started = time.perf_counter()
    report = compact(FS, directory, now_ms=records, segment_bytes=config.segment_bytes)
    elapsed = time.perf_counter() - started
    print(
        f"  compaction of {report.segments_before} closed segments: {elapsed:.2f} s"
        f"  {report.records_before:,} -> {report.records_after:,} records,"
        f" {report.bytes_before / 1e6:.1f} -> {report.bytes_after / 1e6:.1f} MB"
    )
    shutil.rmtree(directory)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dir", default=tempfile.gettempdir(), help="where to create logs")
    parser.add_argument("--fsyncs", type=int, default=2000, help="flushes per policy run")
    parser.add_argument("--records", type=int, default=1_000_000, help="records to replay")
    args = parser.parse_args()
    root = tempfile.mkdtemp(prefix="recordlog-bench-", dir=args.dir)
    try:
        print(f"append + flush ({root})")
        for policy in FlushPolicy:
            bench_policy(root, policy, args.fsyncs, 1)
            bench_policy(root, policy, args.fsyncs * 100, 100)
        print("GroupCommitter, policy always")
        for appenders in (1, 64):
            asyncio.run(
                bench_committer(root, appenders, args.fsyncs * (1 if appenders == 1 else 20))
            )
        print("replay and compaction")
        bench_replay(root, args.records)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
