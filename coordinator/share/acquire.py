"""The glue between a record source and a share partition: a read becomes an acquisition and the bytes to send.

A ShareFetch for one share partition is two steps, split where the waiting is:

1. :func:`read_for` (async, off the shard): read the source from where the partition's next
   delivery starts (``SharePartition.next_fetch_offset``: the first AVAILABLE offset, else the
   first never acquired). Records gone from the log (OFFSET_OUT_OF_RANGE) are not an error for
   the member: the read comes back empty with the log start offset, and step 2 moves the share
   partition's start offset there (Kafka's ``updateCacheAndOffsets``).
2. :func:`acquire_read` (pure: state, a read and the clock in, records and an answer out; the
   shard runs it, because the state may have moved while step 1 waited):

   - the log start offset passed the partition's start offset: everything below is forgotten;
   - the core's acquisition (``core.share.acquisition.acquire``) over the read's batch offsets,
     bounded by the last offset read (a redelivery past it waits for a read that reaches it);
   - acquired offsets in batches of aborted transactions are archived at once and left out of
     the ``AcquiredRecords`` (Kafka's ``maybeFilterAbortedTransactionalAcquiredRecords``); a
     transaction marker's offset stays acquired and the client acknowledges it as GAP;
   - the batches to send are the batches read that hold an acquired offset, whole (Kafka slices
     the fetched records to the acquired ranges at batch granularity, ``ShareFetchUtils``); the
     client delivers only the listed offsets.

   The records returned are already replayed into the partition; the caller logs them as one
   entry before the answer leaves.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass

from coordinator.core.share.acquisition import AcquiredRange, AcquireMode, acquire
from coordinator.core.share.config import ShareConfig
from coordinator.core.share.partition import Change, OffsetState, SharePartition, apply, plan
from coordinator.core.share.records import RecordState, ShareRecord
from coordinator.core.share.release import advance_log_start

from .source import FetchedBatch, OffsetOutOfRange, PartitionRead, PartitionRef, RecordSource


@dataclass(frozen=True, slots=True)
class FetchedAcquisition:
    acquired: list[AcquiredRange]
    """The ``AcquiredRecords`` of the answer, ascending."""
    batches: list[FetchedBatch]
    """The batches to send, whole, in offset order."""
    records: list[ShareRecord]
    """The share-partition records of the change, already replayed: one log entry."""
    archived_aborted: int = 0
    """How many acquired offsets were archived as records of aborted transactions."""

    def records_bytes(self) -> bytes:
        """The ``Records`` field of the answer's partition."""
        return b"".join(b.data for b in self.batches)


async def read_for(source: RecordSource, p: SharePartition, ref: PartitionRef, max_bytes: int) -> PartitionRead:
    """Read ``source`` where ``p``'s next delivery starts; records gone from the log read as nothing
    with the log start offset."""
    offset = p.next_fetch_offset()
    try:
        return await source.read(ref, offset, max_bytes)
    except OffsetOutOfRange as exc:
        return PartitionRead([], exc.log_start_offset, -1, -1)


def acquire_read(p: SharePartition, member_id: str, read: PartitionRead, max_records: int, now_ms: int,
                 config: ShareConfig, mode: AcquireMode = AcquireMode.BATCH_OPTIMIZED) -> FetchedAcquisition:
    """Acquire for ``member_id`` from ``read`` (see the module docstring)."""
    records: list[ShareRecord] = []
    if p.initialized and read.log_start_offset > p.start_offset:
        records += advance_log_start(p, read.log_start_offset)
    if not p.initialized or not read.batches:
        return FetchedAcquisition([], [], records)
    got = acquire(p, member_id, read.offsets(), max_records, now_ms, config, mode,
                  last_fetched_offset=read.batches[-1].last_offset)
    records += got.records
    aborted = _aborted_offsets(got.acquired, read.aborted_ranges())
    if aborted:
        change = Change(states={o: OffsetState(RecordState.ARCHIVED, p.offsets[o].delivery_count) for o in aborted})
        records += apply(p, plan(p, change))
    acquired = _without(got.acquired, aborted)
    return FetchedAcquisition(acquired, _batches_holding(read.batches, acquired), records, len(aborted))


def _aborted_offsets(acquired: list[AcquiredRange], aborted: list[tuple[int, int]]) -> list[int]:
    out: list[int] = []
    for r in acquired:
        for first, last in aborted:
            out.extend(range(max(first, r.first_offset), min(last, r.last_offset) + 1))
    return sorted(out)


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


def _batches_holding(batches: list[FetchedBatch], acquired: list[AcquiredRange]) -> list[FetchedBatch]:
    return [b for b in batches
            if any(r.first_offset <= b.last_offset and b.base_offset <= r.last_offset for r in acquired)]
