"""One partition's log: its offsets, a compact index of its batches, the memory cache, waiters.

Offsets: `log_start_offset` <= `high_watermark` <= `log_end_offset`. The log end offset is the next
offset to assign; the high watermark (= last stable offset, no transactions) is the durable end:
every batch below it is on disk per `log.flush.policy`. Fetch and ListOffsets see only batches
below the high watermark and Produce answers once its batch is below it, so what a crash can lose
(the tail above it) was never acknowledged nor read. Batches are only ever removed from the head,
so the retained offsets are always the contiguous range [log_start_offset, log_end_offset).

Memory: the index is columnar (`array`s of base offset, virtual position, max timestamp and record
count: 28 bytes a batch, no object per batch), so a long log of small batches stays small. The
bytes of the newest batches are cached in memory (a suffix of the log, bounded by the store's
caps); older ones are read back from their segment file. `StoredBatch` is a view made on demand
for a read: use it at once (the index shifts when the head is compacted).

Long polling: a Fetch that must wait registers one future on every log it reads; the high
watermark moving (or the topic's deletion) resolves and forgets them all. Waiters re-check their
condition, so a wake-up is only a hint. Produce waits on `wait_durable` (a heap by offset, because
a duplicate waits on an earlier batch than the newest).

Mutated only through `log.PartitionStore` (the `_` methods).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import uuid
from array import array
from bisect import bisect_right
from collections import deque
from collections.abc import Callable, Iterator

from .batch import BatchHeader, parse_header, record_timestamps
from .producers import ProducerStates
from .segments import PartitionFiles, Segment

_SEQUENCE = itertools.count()


class StoredBatch:
    """One batch as served: its index fields and its bytes (`bytes()`, from disk if not cached)."""

    __slots__ = (
        "base_offset", "data", "file_position", "last_offset", "max_timestamp", "position",
        "records_count", "segment", "size",
    )

    def __init__(
        self, data: bytes | None, base_offset: int, last_offset: int, max_timestamp: int,
        records_count: int, position: int, size: int, segment: Segment | None, file_position: int,
    ) -> None:
        self.data = data
        """The bytes when cached in memory, else None."""
        self.base_offset = base_offset
        self.last_offset = last_offset
        self.max_timestamp = max_timestamp
        self.records_count = records_count
        self.position = position
        """Bytes appended to the log before this batch (a virtual file position)."""
        self.size = size
        self.segment = segment
        self.file_position = file_position

    def bytes(self) -> bytes:
        if self.data is not None:
            return self.data
        assert self.segment is not None
        return self.segment.read(self.file_position, self.size)

    def header(self) -> BatchHeader:
        return parse_header(self.bytes())


class PartitionLog:
    def __init__(self, topic: str, topic_id: uuid.UUID, partition: int, files: PartitionFiles | None = None) -> None:
        self.topic = topic
        self.topic_id = topic_id
        self.partition = partition
        self.files = files
        self.log_start_offset = 0
        self.log_end_offset = 0
        self.durable_end = 0
        self.size_bytes = 0
        self.cached_bytes = 0
        self.deleted = False
        self.last_retention_check_ms = 0
        self.producers = ProducerStates()
        self._base = array("q")
        self._position = array("q")
        self._max_ts = array("q")
        self._count = array("i")
        self._head = 0
        self._end_position = 0
        self._segments: list[Segment] = []
        self._segment_starts = array("q")
        """Virtual position of each segment's first byte, in `_segments` order."""
        self._cache: deque[bytes] = deque()
        self._cache_start = 0
        """Index of the first cached batch; the cache holds batches [_cache_start, len)."""
        self._max_timestamp: tuple[int, int] | None = None
        """(timestamp, offset) of the largest timestamp retained; None = recompute."""
        self._waiters: set[asyncio.Future[None]] = set()
        self._durable_waiters: list[tuple[int, int, asyncio.Future[None]]] = []
        self.on_durable: Callable[[PartitionLog], None] | None = None

    # -- index -------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._base) - self._head

    def _last_offset(self, i: int) -> int:
        return (self._base[i + 1] if i + 1 < len(self._base) else self.log_end_offset) - 1

    def _size(self, i: int) -> int:
        return (self._position[i + 1] if i + 1 < len(self._position) else self._end_position) - self._position[i]

    def _view(self, i: int) -> StoredBatch:
        position = self._position[i]
        s = bisect_right(self._segment_starts, position) - 1
        segment = self._segments[s] if s >= 0 else None
        file_position = position - self._segment_starts[s] if s >= 0 else 0
        data = self._cache[i - self._cache_start] if i >= self._cache_start else None
        return StoredBatch(
            data, self._base[i], self._last_offset(i), self._max_ts[i], self._count[i], position,
            self._size(i), segment, file_position,
        )

    def _index_of(self, offset: int) -> int:
        """Index of the first batch whose last offset is >= `offset` (len when none)."""
        i = bisect_right(self._base, offset, lo=self._head) - 1
        if i < self._head:
            return self._head
        if self._last_offset(i) < offset:
            return i + 1
        return i

    def _visible_end(self) -> int:
        """Index just past the last batch below the high watermark."""
        return bisect_right(self._base, self.durable_end - 1, lo=self._head)

    # -- reads -------------------------------------------------------------------------------
    @property
    def high_watermark(self) -> int:
        return self.durable_end

    @property
    def last_stable_offset(self) -> int:
        return self.durable_end

    def batches(self) -> Iterator[StoredBatch]:
        """Retained batches below the high watermark, in offset order."""
        for i in range(self._head, self._visible_end()):
            yield self._view(i)

    def read(self, fetch_offset: int, max_bytes: int, min_one: bool) -> list[StoredBatch]:
        """Whole batches from the one holding `fetch_offset`, up to `max_bytes` in total; the first
        batch is returned even if larger when `min_one` (KIP-74)."""
        out: list[StoredBatch] = []
        total = 0
        for i in range(self._index_of(fetch_offset), self._visible_end()):
            size = self._size(i)
            if total + size > max_bytes and not (min_one and not out):
                break
            out.append(self._view(i))
            total += size
        return out

    def read_records(self, fetch_offset: int, max_bytes: int, min_one: bool) -> tuple[bytes, int]:
        """What `read` selects, as (the batches' bytes back to back, their record count), with no
        object per batch: cached bytes from memory, the rest with one read per segment."""
        i = self._index_of(fetch_offset)
        end = self._visible_end()
        if i >= end:
            return b"", 0
        start = self._position[i]
        limit = start + max(max_bytes, 0)
        j = bisect_right(self._position, limit, lo=i + 1, hi=end)  # batches i..j-2 fit, j-1 maybe
        last_end = self._position[j] if j < len(self._position) else self._end_position
        if last_end > limit:
            j -= 1
        if j == i:
            if not min_one:
                return b"", 0
            j = i + 1
        parts: list[bytes] = []
        disk_end = min(j, self._cache_start)
        if i < disk_end:
            position = start
            stop = self._position[disk_end] if disk_end < len(self._position) else self._end_position
            while position < stop:
                s = bisect_right(self._segment_starts, position) - 1
                segment_end = self._segment_starts[s + 1] if s + 1 < len(self._segment_starts) else stop
                chunk_end = min(stop, segment_end)
                base = self._segment_starts[s]
                parts.append(self._segments[s].read(position - base, chunk_end - position))
                position = chunk_end
        if j > self._cache_start:
            first = max(i, self._cache_start) - self._cache_start
            parts.extend(itertools.islice(self._cache, first, j - self._cache_start))
        return b"".join(parts), sum(self._count[i:j])

    def bytes_from(self, fetch_offset: int) -> int:
        i = self._index_of(fetch_offset)
        end = self._visible_end()
        if i >= end:
            return 0
        end_position = self._position[end] if end < len(self._position) else self._end_position
        return end_position - self._position[i]

    def offset_for_timestamp(self, target: int) -> tuple[int, int] | None:
        """(timestamp, offset) of the first record whose timestamp is >= `target`, Kafka's rule:
        the first batch whose max timestamp is >= target, then the first such record in it. For a
        batch whose codec cannot be read here, its base offset and max timestamp stand in (an
        offset never later than the exact answer)."""
        for i in range(self._head, self._visible_end()):
            if self._max_ts[i] < target:
                continue
            batch = self._view(i)
            data = batch.bytes()
            records = record_timestamps(data, parse_header(data))
            if records is None:
                return batch.max_timestamp, batch.base_offset
            for timestamp, offset in records:
                if timestamp >= target:
                    return timestamp, offset
            return batch.max_timestamp, batch.base_offset
        return None

    def max_timestamp(self) -> tuple[int, int] | None:
        """(timestamp, offset) of the record with the largest timestamp (the first such), or None
        for an empty log. Undecodable batches answer with their last offset, as Kafka did before
        KAFKA-16310."""
        if self._max_timestamp is None or self._max_timestamp[1] >= self.durable_end:
            best = -1
            for i in range(self._head, self._visible_end()):
                if best < 0 or self._max_ts[i] > self._max_ts[best]:
                    best = i
            if best < 0:
                return None
            self._max_timestamp = (self._max_ts[best], _offset_of_max_timestamp(self._view(best)))
        return self._max_timestamp

    # -- waiters -----------------------------------------------------------------------------
    def add_waiter(self, waiter: asyncio.Future[None]) -> None:
        self._waiters.add(waiter)

    def discard_waiter(self, waiter: asyncio.Future[None]) -> None:
        self._waiters.discard(waiter)

    def wake(self) -> None:
        waiters, self._waiters = self._waiters, set()
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)
        if self.deleted:
            durable, self._durable_waiters = self._durable_waiters, []
            for _, _, future in durable:
                if not future.done():
                    future.set_result(None)

    def wait_durable(self, end_offset: int) -> asyncio.Future[None] | None:
        """A future resolved once every offset below `end_offset` is durable (None: it is)."""
        if end_offset <= self.durable_end or self.deleted:
            return None
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._durable_waiters, (end_offset, next(_SEQUENCE), future))
        return future

    def mark_durable(self, end_offset: int) -> None:
        """Every offset below `end_offset` is durable: the high watermark moves."""
        if end_offset <= self.durable_end:
            return
        self.durable_end = end_offset
        waiters = self._durable_waiters
        while waiters and waiters[0][0] <= end_offset:
            _, _, future = heapq.heappop(waiters)
            if not future.done():
                future.set_result(None)
        self.wake()
        if self.on_durable is not None:
            self.on_durable(self)

    # -- mutations (PartitionStore only) -----------------------------------------------------
    def _add(
        self, base_offset: int, header: BatchHeader, size: int, segment: Segment, file_position: int,
        data: bytes | None,
    ) -> None:
        """Index one batch written at `file_position` of `segment` with `base_offset` (the
        header's own field may still be the client's 0); cache `data` if given (the cache is a
        suffix: only the newest batches may be added cached)."""
        position = self._end_position
        if not self._segments or self._segments[-1] is not segment:
            self._segments.append(segment)
            self._segment_starts.append(position - file_position)
        if data is not None:
            if not self._cache:
                self._cache_start = len(self._base)
            self._cache.append(data)
            self.cached_bytes += size
        elif self._cache:
            raise ValueError("an uncached batch cannot follow cached ones")
        else:
            self._cache_start = len(self._base) + 1
        self._base.append(base_offset)
        self._position.append(position)
        self._max_ts.append(header.max_timestamp)
        self._count.append(header.records_count)
        self._end_position += size
        self.size_bytes += size
        self.log_end_offset = base_offset + header.last_offset_delta + 1
        if self._max_timestamp is not None and header.max_timestamp > self._max_timestamp[0]:
            self._max_timestamp = None

    def _oldest_cached_offset(self) -> int | None:
        return self._base[self._cache_start] if self._cache else None

    def _evict_oldest_cached(self) -> int:
        """Drop the oldest cached batch's bytes from memory (they stay on disk); its size."""
        size = self._size(self._cache_start)
        self._cache.popleft()
        self._cache_start += 1
        self.cached_bytes -= size
        return size

    def _head_view(self) -> StoredBatch | None:
        return self._view(self._head) if self._head < len(self._base) else None

    def _drop_head(self) -> tuple[int, bool]:
        """Remove the oldest batch: (its size, whether it was cached)."""
        i = self._head
        size = self._size(i)
        last_offset = self._last_offset(i)
        cached = bool(self._cache) and self._cache_start == i
        if cached:
            self._cache.popleft()
            self.cached_bytes -= size
        if self._cache_start <= i:
            self._cache_start = i + 1
        self._head = i + 1
        self.size_bytes -= size
        self.log_start_offset = self._base[self._head] if self._head < len(self._base) else self.log_end_offset
        if self._max_timestamp is not None and self._max_timestamp[1] <= last_offset:
            self._max_timestamp = None
        if self._head >= 1024 and self._head * 2 >= len(self._base):
            self._compact()
        return size, cached

    def _compact(self) -> None:
        head = self._head
        del self._base[:head]
        del self._position[:head]
        del self._max_ts[:head]
        del self._count[:head]
        self._cache_start -= head
        self._head = 0

    def _forget_segments_before(self, first: Segment) -> None:
        """Segments before `first` were deleted from disk."""
        while self._segments and self._segments[0] is not first:
            self._segments.pop(0)
            del self._segment_starts[0]

    def _clear_cache(self) -> int:
        freed = self.cached_bytes
        self._cache.clear()
        self._cache_start = len(self._base)
        self.cached_bytes = 0
        return freed


def _offset_of_max_timestamp(batch: StoredBatch) -> int:
    data = batch.bytes()
    records = record_timestamps(data, parse_header(data))
    if records is None:
        return batch.last_offset
    for timestamp, offset in records:
        if timestamp == batch.max_timestamp:
            return offset
    return batch.last_offset
