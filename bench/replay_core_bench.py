"""Measure start-up replay of a record log into the coordinator core and print the numbers.

Three logs of N records each, written through the real record codec:

- ``distinct``: N OffsetCommit records, one per entry, every one a distinct key (1,000 groups x
  10 topics x 100 partitions, ..., groups interleaved record by record): the worst case for
  loading (what a fully compacted log holds, at its least local), since every record must be
  CRC-checked on its own, decoded and applied. The shape of the earlier replay benchmark.
- ``compacted``: N OffsetCommit records, every one a distinct key, as compaction leaves a log of
  commits: each member's 10 partitions in one entry, group after group.
- ``mixed``: a coordinator's day: 100 classic and 100 KIP-848 groups of 10 members on 100
  partitions each; every member commits its 10 partitions once per commit interval (one entry
  of 10 records, as the coordinator writes an OffsetCommit), and some groups rebalance in every
  interval (KIP-848: group epoch, targets, every member's current assignment; classic: a new
  GroupMetadata generation with every member's subscription and assignment). That is what the
  active segment holds before compaction reaches it: most records are superseded by later ones.

For each log, each run times, over the same files:

1. log level: ``RecordLog.open`` with no consumer: segments read, frames and CRC checked, the
   reading rules (duplicates, fencing) applied -- the floor of any replay;
2. into the core: ``RecordLog.open(..., load=Replayer(core))``, what the server runs at start-up
   (and the standby while tailing): every record gathered as bytes and replayed (offset commit
   values stored encoded until read, ``OffsetManager.replay_loaded``).

Records/s counts the records in the log (superseded ones included) over the wall time and over
the CPU time of the process, which moves less with the load of a shared machine (the load is one
thread: on an idle core its CPU time is its wall time). The
ratio into-core / log-level is the number to compare across machines. ``--check`` also
replays every record one by one (``decode_record`` + ``CoordinatorShard.replay``) and asserts
both states are equal.

No assertions otherwise. Run: ``.venv/bin/python bench/replay_core_bench.py [--records N]
[--dir PATH] [--repeat K] [--logs distinct,mixed] [--check]``.
"""

from __future__ import annotations

import argparse
import functools
import gc
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from coordinator.core.records import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    GroupMetadataKey,
    GroupMetadataMember,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
    TopicPartitions,
    decode_record,
    encode_record,
)
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
_T0 = 1_700_000_000_000


def distinct_entries(n: int) -> Iterator[list[Record]]:
    """One OffsetCommit record per entry, every one a distinct key, groups interleaved."""
    for i in range(n):
        yield [Record(
            OffsetCommitKey(f"group-{i % 1000}", f"topic-{(i // 1000) % 10}", i // 10000),
            OffsetCommitValue(i, -1, "", _T0 + i, -1),
        )]


def compacted_entries(n: int) -> Iterator[list[Record]]:
    """Every key once, as compaction leaves a log of member commits: each member's 10 partitions in
    one entry (one OffsetCommit), group after group (groups of 10 members on 2 x 50 partitions)."""
    made = 0
    for g in range(n):
        group = f"group-{g}"
        for m in range(10):
            commit = [Record(OffsetCommitKey(group, topic, p), OffsetCommitValue(made + p, 3, "", _T0 + made, -1))
                      for topic in ("orders", "payments") for p in range(m * 5, m * 5 + 5)][: n - made]
            yield commit
            made += len(commit)
            if made == n:
                return


def mixed_entries(n: int) -> Iterator[list[Record]]:
    """Commit intervals of 200 groups x 10 members x 10 partitions, with rebalances, until n records.

    Each member commits its 10 partitions in one OffsetCommit (one entry of 10 records, as the
    coordinator writes it); a rebalance is one entry per record (close enough to the several
    requests a rebalance takes)."""
    members = [f"consumer-{m}-{uuid.UUID(int=m).hex[:8]}" for m in range(10)]
    topic_ids = {name: uuid.UUID(int=k + 1) for k, name in enumerate(("orders", "payments"))}
    made = 0
    interval = 0
    epochs: dict[str, int] = {}
    while True:
        now = _T0 + interval * 5000
        for g in range(200):
            group = f"{'classic' if g < 100 else 'consumer'}-group-{g}"
            if interval == 0 or (g * 7 + interval) % 20 == 0:  # ~5 % of the groups per interval
                epoch = epochs[group] = epochs.get(group, 0) + 1
                rebalance = _classic_rebalance if g < 100 else _consumer_rebalance
                for record in rebalance(group, epoch, members, topic_ids, now):
                    yield [record]
                    made += 1
                    if made == n:
                        return
            for m in range(len(members)):
                commit = [Record(OffsetCommitKey(group, topic, p),
                                 OffsetCommitValue(interval * 1000 + p, epochs[group], "", now, -1))
                          for topic in topic_ids for p in range(m * 5, m * 5 + 5)][: n - made]
                yield commit
                made += len(commit)
                if made == n:
                    return
        interval += 1


def _classic_rebalance(group: str, generation: int, members: list[str], topic_ids: dict[str, uuid.UUID],
                       now: int) -> Iterator[Record]:
    subscription = b"\x00\x03\x00\x00\x00\x02\x00\x06orders\x00\x08payments\xff\xff\xff\xff\x00\x00\x00\x00"
    yield Record(GroupMetadataKey(group), GroupMetadataValue(
        "consumer", generation, "range", members[0], now,
        tuple(GroupMetadataMember(m, None, "rdkafka", "/10.0.0.1", 300_000, 45_000, subscription, bytes(60))
              for m in members)))


def _consumer_rebalance(group: str, epoch: int, members: list[str], topic_ids: dict[str, uuid.UUID],
                        now: int) -> Iterator[Record]:
    topics = tuple(sorted(topic_ids))
    yield Record(ConsumerGroupMetadataKey(group), ConsumerGroupMetadataValue(epoch, 0x5EED + epoch))
    for member in members:
        yield Record(ConsumerGroupMemberMetadataKey(group, member), ConsumerGroupMemberMetadataValue(
            None, None, "consumer", "/10.0.0.1", topics, "", 300_000, "uniform"))
    owned = {m: tuple(TopicPartitions(tid, tuple(range(k * 5, k * 5 + 5))) for tid in topic_ids.values())
             for k, m in enumerate(members)}
    for member in members:
        yield Record(ConsumerGroupTargetAssignmentMemberKey(group, member),
                     ConsumerGroupTargetAssignmentMemberValue(owned[member]))
    yield Record(ConsumerGroupTargetAssignmentMetadataKey(group), ConsumerGroupTargetAssignmentMetadataValue(epoch))
    for member in members:
        yield Record(ConsumerGroupCurrentMemberAssignmentKey(group, member),
                     ConsumerGroupCurrentMemberAssignmentValue(epoch, epoch - 1, 0, owned[member], ()))


MAKERS: dict[str, Callable[[int], Iterator[list[Record]]]] = {
    "distinct": distinct_entries, "compacted": compacted_entries, "mixed": mixed_entries}
LOGS = tuple(MAKERS)


def write_log(directory: str, entries: Iterator[list[Record]]) -> int:
    log = RecordLog.open(FS, directory, config=LogConfig(flush_policy=FlushPolicy.NONE))
    n = 0
    for i, records in enumerate(entries, 1):
        log.append([LogRecord(*encode_record(record)) for record in records], _T0 + i)
        n += len(records)
        if not i % 1000:
            log.flush()
    log.close()
    return n


@dataclass
class Timing:
    wall_s: float
    cpu_s: float


def timed(work: Callable[[], object]) -> Timing:
    gc.collect()
    wall, cpu = time.perf_counter(), time.process_time()
    work()
    return Timing(time.perf_counter() - wall, time.process_time() - cpu)


def timed_into_core(directory: str) -> tuple[Timing, tuple[CoordinatorShard, Replayer]]:
    gc.collect()
    wall, cpu = time.perf_counter(), time.process_time()
    loaded = into_core(directory)
    return Timing(time.perf_counter() - wall, time.process_time() - cpu), loaded


def log_level(directory: str) -> None:
    RecordLog.open(FS, directory, config=LogConfig(flush_policy=FlushPolicy.NONE)).close()


def into_core(directory: str) -> tuple[CoordinatorShard, Replayer]:
    core = CoordinatorShard()
    replayer = Replayer(core)
    RecordLog.open(FS, directory, config=LogConfig(flush_policy=FlushPolicy.NONE), load=replayer).close()
    return core, replayer


def decode_all(core: CoordinatorShard) -> int:
    """What the first reads of every group's offsets cost after loading (values are decoded then)."""
    return sum(len(core.offsets.group_offsets(group_id) or ()) for group_id in list(core.offsets.offsets))


def one_by_one(directory: str) -> CoordinatorShard:
    """The reference: every record decoded and replayed in log order."""
    core = CoordinatorShard()

    def replay(entry: LogEntry) -> None:
        for record in entry.records:
            core.replay(decode_record(*record))

    RecordLog.open(FS, directory, config=LogConfig(flush_policy=FlushPolicy.NONE), replay=replay).close()
    return core


@dataclass
class Result:
    log: str
    records: int
    log_level: list[Timing]
    into_core: list[Timing]
    decoded: list[Timing]  # afterwards, decoding every offset loading left encoded

    def best(self, which: str) -> Timing:
        runs = self.log_level if which == "log" else self.into_core
        return min(runs, key=lambda t: t.wall_s)


def measure(log: str, n: int, parent: str | None, repeat: int, check: bool, out: bool = True) -> Result:
    directory = tempfile.mkdtemp(prefix=f"replay-{log}-", dir=parent)
    try:
        records = write_log(directory, MAKERS[log](n))
        size = sum(os.path.getsize(os.path.join(directory, name)) for name in os.listdir(directory))
        result = Result(log, records, [], [], [])
        if out:
            print(f"{log}: {records:,} records, {size / 1e6:.1f} MB")
        for run in range(1, repeat + 1):
            level = timed(lambda: log_level(directory))
            result.log_level.append(level)
            core_t, (core, replayer) = timed_into_core(directory)
            result.into_core.append(core_t)
            assert replayer.records == records, (replayer.records, records)
            decoded = timed(functools.partial(decode_all, core))
            result.decoded.append(decoded)
            if out:
                print(f"  run {run}: log level {records / level.wall_s / 1e3:6.0f}k records/s"
                      f" (cpu {records / level.cpu_s / 1e3:5.0f}k);"
                      f"  into the core {records / core_t.wall_s / 1e3:6.0f}k records/s"
                      f" (cpu {records / core_t.cpu_s / 1e3:5.0f}k);"
                      f"  ratio {level.wall_s / core_t.wall_s:.2f};"
                      f"  then decoding every offset {decoded.cpu_s * 1e3:.0f} ms of cpu")
            if check and run == 1:
                assert core.durable_view() == one_by_one(directory).durable_view(), "loaded state differs"
                if out:
                    print("  checked: the loaded state equals a record-by-record replay")
            del core, replayer
        return result
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--dir", default=None, help="parent directory for the logs (default: system temp)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--logs", default=",".join(LOGS))
    parser.add_argument("--check", action="store_true", help="compare with a record-by-record replay")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")
    for log in args.logs.split(","):
        if log not in LOGS:
            parser.error(f"unknown log {log!r}; choose from {', '.join(LOGS)}")
        result = measure(log, args.records, args.dir, args.repeat, args.check)
        lvl, core = result.best("log"), result.best("core")
        print(f"  best: log level {result.records / lvl.wall_s / 1e3:.0f}k records/s,"
              f" into the core {result.records / core.wall_s / 1e3:.0f}k records/s")
    print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")


if __name__ == "__main__":
    main()
