"""The bounded cache of fetched batches that the consumers of share partitions share.

Many consumers read one share partition, and a record comes back (released, lock expired) to be
sent again; without a cache every ShareFetch would read the log again (a network round trip to the
upstream leader in sidecar mode). :class:`BatchCache` is a :class:`~.source.RecordSource` in front
of another one:

- a read is served from memory when the batch holding the asked offset is cached: that batch and
  the ones that followed it in the log, as far as they are cached and within the asked bytes (a
  batch remembers which base offset followed it in the read that brought it, so a run from the
  cache is exactly what the log holds, compaction gaps included). The offsets reported are the
  partition's last read ones.
- otherwise the source is read, and its batches are kept. Concurrent misses of one partition wait
  for one read (Kafka takes one fetch lock per share partition) and then look again.
- memory: the cached bytes of all partitions together never exceed ``max_bytes``
  (``group.share.fetch.cache.max.bytes``); the oldest batches read are evicted first. Of a read
  larger than the bound the head is kept (a share partition is read again from its lowest
  available offset: redeliveries), the rest is passed through uncached, as is a batch larger than
  the whole bound. Whatever clients ask, the cache holds
  at most the bound, and one read in flight per partition at most what its caller asked.
- a batch below a partition's log start offset (retention, or an OFFSET_OUT_OF_RANGE read) is
  dropped; :meth:`forget` drops a partition (its topic deleted, its share partitions gone).

Batches below the last stable offset never change in a log, so a cached batch is never stale;
only the partition offsets it reports with a hit can be (the next miss brings them up to date).
"""

from __future__ import annotations

import asyncio
from bisect import bisect_right, insort
from collections import OrderedDict
from dataclasses import dataclass, field

from .source import FetchedBatch, OffsetOutOfRange, PartitionRead, PartitionRef, RecordSource


@dataclass(slots=True)
class _Partition:
    batches: dict[int, FetchedBatch] = field(default_factory=dict)  # base offset -> batch
    starts: list[int] = field(default_factory=list)  # cached base offsets, ascending
    follower: dict[int, int] = field(default_factory=dict)  # base offset -> the next batch's base in the log
    offsets: tuple[int, int, int] = (-1, -1, -1)  # log start, high watermark, last stable offset
    reading: asyncio.Future[None] | None = None


class BatchCache:
    """A byte-bounded cache of record batches in front of a :class:`~.source.RecordSource`."""

    def __init__(self, source: RecordSource, max_bytes: int) -> None:
        self.source = source
        self.max_bytes = max_bytes
        self.cached_bytes = 0
        self.hits = 0
        self.misses = 0
        self.evictions = 0
        self._partitions: dict[PartitionRef, _Partition] = {}
        self._order: OrderedDict[tuple[PartitionRef, int], int] = OrderedDict()  # oldest first -> size

    def read_now(self, ref: PartitionRef, offset: int, max_bytes: int) -> PartitionRead | None:
        """A hit, or a miss the source reads at once (kept as any miss); None while another read of
        the partition is in flight or when the source must be awaited."""
        part = self._partitions.get(ref)
        if part is not None:
            hit = self._hit(part, offset, max_bytes)
            if hit is not None:
                return hit
            if part.reading is not None:
                return None
        try:
            result = self.source.read_now(ref, offset, max_bytes)
        except OffsetOutOfRange as exc:
            self.misses += 1
            self._drop_below(ref, exc.log_start_offset)
            raise
        if result is not None:
            self.misses += 1
            self._keep(ref, result)
        return result

    async def read(self, ref: PartitionRef, offset: int, max_bytes: int) -> PartitionRead:
        while True:
            part = self._partitions.get(ref)
            if part is not None:
                hit = self._hit(part, offset, max_bytes)
                if hit is not None:
                    return hit
                if part.reading is not None:  # another consumer is reading this partition: wait, look again
                    await asyncio.shield(part.reading)
                    continue
            return await self._miss(ref, offset, max_bytes)

    def _hit(self, part: _Partition, offset: int, max_bytes: int) -> PartitionRead | None:
        hit = self._cached_run(part, offset, max_bytes)
        if hit is not None:
            self.hits += 1
        return hit

    async def _miss(self, ref: PartitionRef, offset: int, max_bytes: int) -> PartitionRead:
        self.misses += 1
        part = self._partitions.setdefault(ref, _Partition())
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        part.reading = done
        try:
            result = await self.source.read(ref, offset, max_bytes)
        except OffsetOutOfRange as exc:
            self._drop_below(ref, exc.log_start_offset)
            raise
        finally:
            part.reading = None
            done.set_result(None)
        self._keep(ref, result)
        return result

    def forget(self, ref: PartitionRef) -> None:
        part = self._partitions.pop(ref, None)
        if part is None:
            return
        for base in part.starts:
            self.cached_bytes -= self._order.pop((ref, base))

    def __len__(self) -> int:
        return len(self._order)

    # -- internals ---------------------------------------------------------------------------
    def _cached_run(self, part: _Partition, offset: int, max_bytes: int) -> PartitionRead | None:
        i = bisect_right(part.starts, offset) - 1
        if i < 0:
            return None
        batch = part.batches[part.starts[i]]
        if batch.last_offset < offset:
            return None
        out = [batch]
        total = len(batch.data)
        follower, batches, base = part.follower, part.batches, batch.base_offset
        while (base := follower.get(base, -1)) >= 0:  # base offsets are never negative
            nxt = batches.get(base)
            if nxt is None or total + len(nxt.data) > max_bytes:
                break
            out.append(nxt)
            total += len(nxt.data)
        return PartitionRead(out, *part.offsets)

    def _keep(self, ref: PartitionRef, result: PartitionRead) -> None:
        part = self._partitions.get(ref)
        if part is None:
            part = self._partitions[ref] = _Partition()
        part.offsets = (result.log_start_offset, result.high_watermark, result.last_stable_offset)
        self._drop_below(ref, result.log_start_offset)
        part = self._partitions.setdefault(ref, part)
        fresh: set[int] = set()
        for batch, nxt in zip(result.batches, [*result.batches[1:], None] if result.batches else [], strict=True):
            if batch.size > self.max_bytes:
                break  # larger than the whole bound: passed through, and nothing after it is kept
            if batch.base_offset not in part.batches:
                if not self._make_room(batch.size, ref, fresh):
                    break  # the bound is full of this read: its head is kept, the rest passed through
                part = self._partitions.setdefault(ref, part)  # back in if room was made of all its batches
                part.batches[batch.base_offset] = batch
                insort(part.starts, batch.base_offset)
                self._order[(ref, batch.base_offset)] = batch.size
                self.cached_bytes += batch.size
                fresh.add(batch.base_offset)
            if nxt is not None:
                part.follower[batch.base_offset] = nxt.base_offset

    def _make_room(self, size: int, ref: PartitionRef, fresh: set[int]) -> bool:
        """Evict the oldest batches until ``size`` more bytes fit, but none of this read's: a
        share partition is read again from its lowest available offset (redeliveries), so the head
        of a read larger than the bound is what is worth keeping. False when it cannot fit."""
        while self.cached_bytes + size > self.max_bytes:
            oldest_ref, base = next(iter(self._order))
            if oldest_ref == ref and base in fresh:
                return False
            self._evict(oldest_ref, base)
            self.evictions += 1
        return True

    def _drop_below(self, ref: PartitionRef, log_start: int) -> None:
        part = self._partitions.get(ref)
        if part is None:
            return
        # The batches are ascending and apart, so those below the log start are a prefix: every
        # miss comes here, and walking the whole cache each time cost a share fetch per cached batch.
        starts = part.starts
        while starts and part.batches[starts[0]].last_offset < log_start:
            self._evict(ref, starts[0])

    def _evict(self, ref: PartitionRef, base: int) -> None:
        part = self._partitions[ref]
        del part.batches[base]
        part.starts.remove(base)
        part.follower.pop(base, None)
        self.cached_bytes -= self._order.pop((ref, base))
        if not part.batches and part.reading is None:
            del self._partitions[ref]
