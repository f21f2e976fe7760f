"""ShareFetch and ShareAcknowledge on the shard (Kafka's ``SharePartitionManager.fetchMessages`` /
``acknowledge`` and ``newContext``), over reads the edge made of the log.

Theory of operation
-------------------
The log is not the core's: the edge reads each share partition of the member's session from where
its next delivery starts (``SharePartition.next_fetch_offset``), off the shard, and hands the core
what acquisition needs of the read (:class:`PartitionRead`: the batches' offsets, the aborted
ranges, the log start offset, how far the read reached). The core then, in this order and as one
log entry:

1. checks the share session (``sessions.ShareSessions``: epoch 0 opens, -1 closes, any other must
   be the session's; errors are top-level);
2. applies the piggy-backed acknowledgements, per partition and atomically (``acknowledgement``;
   a bad batch is that partition's ``AcknowledgeErrorCode``), before anything is acquired, so a
   released record may be acquired again by the same fetch;
3. for a final request (epoch -1), closes the session and releases every record the member holds
   in the group's partitions (Kafka's ``releaseSession``); nothing is fetched;
4. otherwise acquires, partition by partition within ``MaxRecords``, from each read
   (:func:`acquire_from_log`: the start offset moved past a log start that passed it, then the
   core's acquisition bounded by the last offset read, then acquired offsets of aborted
   transactions archived at once);
5. arms each touched partition's lock timer at its earliest deadline.

What the answer reports (acquisitions, acknowledgements) is in the records of the step, so the one
release rule makes it durable before the answer leaves.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass

from .acquisition import AcquiredRange, AcquireMode, acquire
from .config import ShareConfig
from .partition import Change, SharePartition, commit
from .records import ShareRecord, StateRun
from .release import advance_log_start
from .runs import ARCHIVED


@dataclass(frozen=True, slots=True)
class FromLog:
    acquired: list[AcquiredRange]
    records: list[ShareRecord]
    archived_aborted: int = 0


def acquire_from_log(p: SharePartition, member_id: str, log_start_offset: int, log_batches: Sequence[tuple[int, int]],
                     aborted: Sequence[tuple[int, int]], max_records: int, now_ms: int, config: ShareConfig,
                     mode: AcquireMode = AcquireMode.BATCH_OPTIMIZED) -> FromLog:
    """Acquire for ``member_id`` from a read of the log (batches' (base, last) offsets, ascending;
    aborted transactions' offset ranges); the records are replayed already."""
    records: list[ShareRecord] = []
    if p.initialized and log_start_offset > p.start_offset:
        records += advance_log_start(p, log_start_offset)
    if not p.initialized or not log_batches:
        return FromLog([], records)
    got = acquire(p, member_id, log_batches, max_records, now_ms, config, mode,
                  last_fetched_offset=log_batches[-1][1])
    records += got.records
    aborted_offsets = _aborted_offsets(got.acquired, aborted)
    if aborted_offsets:
        change = Change()
        change.set_span(p, [StateRun(first, last, ARCHIVED, count) for first, last, count in
                            _aborted_runs(got.acquired, aborted)])
        records += commit(p, change)
        # Never handed to the consumer: not a delivery (the counters count them archived only).
        p.applied.acquired -= len(aborted_offsets)
    return FromLog(_without(got.acquired, aborted_offsets), records, len(aborted_offsets))


def _aborted_offsets(acquired: list[AcquiredRange], aborted: Sequence[tuple[int, int]]) -> list[int]:
    out: list[int] = []
    for r in acquired:
        for first, last in aborted:
            out.extend(range(max(first, r.first_offset), min(last, r.last_offset) + 1))
    return sorted(out)


def _aborted_runs(acquired: list[AcquiredRange],
                  aborted: Sequence[tuple[int, int]]) -> list[tuple[int, int, int]]:
    """The acquired offsets of aborted transactions as (first, last, delivery count), ascending."""
    out: list[tuple[int, int, int]] = []
    for first, last, count in sorted((max(first, r.first_offset), min(last, r.last_offset), r.delivery_count)
                                     for r in acquired for first, last in aborted
                                     if first <= r.last_offset and last >= r.first_offset):
        if out and first <= out[-1][1]:  # overlapping aborted ranges: each offset once
            first = out[-1][1] + 1
        if first <= last:
            out.append((first, last, count))
    return out


def _without(acquired: list[AcquiredRange], offsets: list[int]) -> list[AcquiredRange]:
    """The ranges with ``offsets`` (ascending) cut out."""
    if not offsets:
        return acquired
    out: list[AcquiredRange] = []
    for r in acquired:
        start = r.first_offset
        i = bisect_right(offsets, r.first_offset - 1)
        while i < len(offsets) and offsets[i] <= r.last_offset:
            if offsets[i] > start:
                out.append(AcquiredRange(start, offsets[i] - 1, r.delivery_count))
            start = offsets[i] + 1
            i += 1
        if start <= r.last_offset:
            out.append(AcquiredRange(start, r.last_offset, r.delivery_count))
    return out
