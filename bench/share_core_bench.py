"""The share-partition core alone, in process: what a ShareFetch costs the core per record.

    .venv/bin/python -m bench.share_core_bench [--records 200000] [--repeat 3]

No server, no log, no codec: one share partition (``coordinator/core/share``) driven the way the
shard drives it for one consumer reading a topic of log batches of ``--batch`` records (140: what
librdkafka and the Java producer write with the default 16 KB ``batch.size`` and 100 B records):

- **accept-all**: each fetch (``acquire_from_log``, ``MaxRecords`` 500, batch-optimized, handed
  the log batches from the partition's next fetch offset) acquires, then the consumer accepts
  everything it got with one ACCEPT per acquired range (what the clients' implicit
  acknowledgement sends), until every record is acknowledged;
- **mixed**: the same, but the acknowledgement of a first delivery carries one type per offset:
  every 20th offset released (delivered again by a later fetch, then accepted) and every 50th
  rejected (archived); the rest accepted, so the state holds AVAILABLE holes and the start offset
  waits for them;
- **replay**: every record those runs produced (the live path's log), replayed into an empty
  partition, as a load or a standby does.

Printed: microseconds of the core per record of the topic (the wall time of the core's calls
only, one core, ``gc`` as in the server) and per fetch, for each, the best of ``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import time
from bisect import bisect_right
from uuid import UUID

from coordinator.core.share.acknowledgement import AckBatch, AckType, acknowledge
from coordinator.core.share.acquisition import AcquiredRange, AcquireMode
from coordinator.core.share.config import ShareConfig
from coordinator.core.share.fetch import acquire_from_log
from coordinator.core.share.records import ShareRecord
from coordinator.core.share.state import SharePartitions, initialize

GROUP, TOPIC = "bench", UUID(int=7)
MAX_RECORDS = 500
READ_BATCHES = 8  # the log batches one read hands the core (about a fetch's worth and more)


def log_batches(records: int, batch: int) -> list[tuple[int, int]]:
    return [(base, min(base + batch, records) - 1) for base in range(0, records, batch)]


def acks_for(acquired: list[AcquiredRange], mixed: bool) -> list[AckBatch]:
    """What the consumer answers: ACCEPT for everything, or (mixed) one type per offset where a
    first delivery of every 20th offset is released and of every 50th rejected."""
    acks = []
    for r in acquired:
        types: tuple[int, ...] = (int(AckType.ACCEPT),)
        if mixed and r.delivery_count == 1:
            types = tuple(int(AckType.RELEASE) if o % 20 == 0 else int(AckType.REJECT) if o % 50 == 7
                          else int(AckType.ACCEPT) for o in range(r.first_offset, r.last_offset + 1))
        acks.append(AckBatch(r.first_offset, r.last_offset, types))
    return acks


def run(records: int, batch: int, mixed: bool) -> tuple[float, int, list[ShareRecord]]:
    """Read every record through the core; (seconds in the core, fetches, the log). Only the
    core's calls are timed, not the bench's own building of the acknowledgements."""
    config = ShareConfig()
    partitions = SharePartitions()
    log: list[ShareRecord] = list(initialize(partitions, GROUP, TOPIC, 0, 0))
    p = partitions.get(GROUP, TOPIC, 0)
    assert p is not None
    batches = log_batches(records, batch)
    bases = [b for b, _ in batches]
    now = 1_000_000
    fetches = 0
    spent = 0.0
    clock = time.perf_counter
    while p.start_offset < records:
        i = max(0, bisect_right(bases, p.next_fetch_offset()) - 1)
        read = batches[i:i + READ_BATCHES]
        started = clock()
        got = acquire_from_log(p, "m", 0, read, (), MAX_RECORDS, now, config, AcquireMode.BATCH_OPTIMIZED)
        spent += clock() - started
        log += got.records
        acks = acks_for(got.acquired, mixed)
        started = clock()
        result = acknowledge(p, "m", acks, now, config)
        spent += clock() - started
        assert not result.error, result
        log += result.records
        fetches += 1
        now += 1
    return spent, fetches, log


def replay(log: list[ShareRecord]) -> float:
    partitions = SharePartitions()
    started = time.perf_counter()
    for record in log:
        partitions.replay(record)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=140)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    for name, mixed in (("accept-all", False), ("mixed", True)):
        best = replayed = float("inf")
        entries = fetches = 0
        for _ in range(args.repeat):
            seconds, fetches, log = run(args.records, args.batch, mixed)
            best = min(best, seconds)
            replayed = min(replayed, replay(log))
            entries = len(log)
        print(f"{name:10s} live {best / args.records * 1e6:6.3f} us/record ({best / fetches * 1e6:7.1f} us/fetch, "
              f"{fetches} fetches)   replay {replayed / args.records * 1e6:6.3f} us/record   "
              f"({entries} log records)")

if __name__ == "__main__":
    main()
