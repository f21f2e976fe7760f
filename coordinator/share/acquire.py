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

from collections.abc import Sequence
from dataclasses import dataclass

from coordinator.core.share.acquisition import AcquiredRange, AcquireMode
from coordinator.core.share.config import ShareConfig
from coordinator.core.share.fetch import acquire_from_log
from coordinator.core.share.partition import SharePartition
from coordinator.core.share.records import ShareRecord

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


async def read_for(source: RecordSource, p: SharePartition, ref: PartitionRef, max_bytes: int,
                   bound: int | None = None, offset_bytes: float | None = None) -> PartitionRead:
    """Read ``source`` where ``p``'s next delivery starts; records gone from the log read as nothing
    with the log start offset. With a ``bound`` (:func:`read_bound`) the read stops at the batch
    holding it: asked for about that many bytes when ``offset_bytes`` (the partition's bytes per
    offset so far) is known, and cut there, so a fetch carries and walks the batches it can
    acquire from, not ``max_bytes`` of them (a read always has its first batch)."""
    offset, max_bytes = _asked(p, max_bytes, bound, offset_bytes)
    try:
        read = await source.read(ref, offset, max_bytes)
    except OffsetOutOfRange as exc:
        return PartitionRead([], exc.log_start_offset, -1, -1)
    return _cut(read, bound)


def read_for_now(source: RecordSource, p: SharePartition, ref: PartitionRef, max_bytes: int,
                 bound: int | None = None, offset_bytes: float | None = None) -> PartitionRead | None:
    """:func:`read_for` when the source answers at once (``RecordSource.read_now``), else None."""
    offset, max_bytes = _asked(p, max_bytes, bound, offset_bytes)
    try:
        read = source.read_now(ref, offset, max_bytes)
    except OffsetOutOfRange as exc:
        return PartitionRead([], exc.log_start_offset, -1, -1)
    return None if read is None else _cut(read, bound)


def _asked(p: SharePartition, max_bytes: int, bound: int | None, offset_bytes: float | None) -> tuple[int, int]:
    offset = p.next_fetch_offset()
    if bound is not None and offset_bytes is not None:
        max_bytes = min(max_bytes, int((bound - offset + 1) * offset_bytes * 1.25) + 1)
    return offset, max_bytes


def _cut(read: PartitionRead, bound: int | None) -> PartitionRead:
    if bound is not None:
        for i, batch in enumerate(read.batches):
            if batch.base_offset > bound and i > 0:
                return PartitionRead(read.batches[:i], read.log_start_offset, read.high_watermark,
                                     read.last_stable_offset)
    return read


def read_bound(p: SharePartition, max_records: int, fetching: int) -> int | None:
    """The last offset a fetch of ``max_records`` can use of a read, with ``fetching`` fetches of
    the partition (itself included) between their reads and their answers: each may take
    ``max_records`` new records (rounded up to whole batches: twice it) ahead of it, so concurrent
    members read past one another rather than all reading the records the first takes. None:
    no bound (``MaxRecords`` absent)."""
    if max_records <= 0:
        return None
    return p.next_offset + 2 * max_records * max(fetching, 1) - 1


def bytes_per_offset(read: PartitionRead) -> float | None:
    """The read's bytes per offset (what :func:`read_for` sizes the next read by), None if empty."""
    if not read.batches:
        return None
    return sum(len(b.data) for b in read.batches) / (read.batches[-1].last_offset - read.batches[0].base_offset + 1)


def acquire_read(p: SharePartition, member_id: str, read: PartitionRead, max_records: int, now_ms: int,
                 config: ShareConfig, mode: AcquireMode = AcquireMode.BATCH_OPTIMIZED) -> FetchedAcquisition:
    """Acquire for ``member_id`` from ``read`` (see the module docstring; the pure part is the
    core's ``fetch.acquire_from_log``)."""
    got = acquire_from_log(p, member_id, read.log_start_offset, read.offsets(), read.aborted_ranges(), max_records,
                           now_ms, config, mode)
    held = batches_holding(read.batches, [(r.first_offset, r.last_offset) for r in got.acquired])
    return FetchedAcquisition(got.acquired, held, got.records, got.archived_aborted)


def batches_holding(batches: list[FetchedBatch], acquired: Sequence[tuple[int, ...]]) -> list[FetchedBatch]:
    """The batches read that hold an acquired offset, whole, in offset order. ``acquired``: the
    ranges as (first, last, ...) tuples (the core's ``AcquiredRecords``), ascending and apart:
    one pass over both, no object per range."""
    out: list[FetchedBatch] = []
    if not acquired:
        return out
    ranges = iter(acquired)
    first, last = next(ranges)[:2]
    for b in batches:
        while last < b.base_offset:  # ranges wholly before this batch
            following = next(ranges, None)
            if following is None:
                return out
            first, last = following[:2]
        if first <= b.last_offset:
            out.append(b)
    return out
