"""The bounded batch cache in front of a real source (the embedded data plane on disk): hits come
from memory, the bytes held never pass the bound whatever a reader asks, the oldest batches go
first and are read again on demand."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest

from coordinator.config import ConfigError, resolve
from coordinator.share.cache import BatchCache
from coordinator.share.embedded import DataPlaneSource
from coordinator.share.settings import ShareFetchConfig
from coordinator.share.source import OffsetOutOfRange, PartitionRead, PartitionRef

from .embedded import data_plane, produce, ref_of

RECORD = b"r" * 200


@pytest.mark.asyncio
async def test_a_second_read_of_cached_batches_is_served_from_memory(tmp_path: Path) -> None:
    async with data_plane(tmp_path) as h:
        h.create("orders")
        await produce(h, "orders", [[RECORD] * 2] * 3)
        cache = BatchCache(DataPlaneSource(h.catalog, h.store), 1 << 20)
        first = await cache.read(ref_of(h, "orders"), 0, 1 << 20)
        again = await cache.read(ref_of(h, "orders"), 3, 1 << 20)
        assert (cache.misses, cache.hits) == (1, 1)
        assert again.batches == first.batches[1:], "from the batch holding offset 3, as the log has them"
        assert (again.log_start_offset, again.high_watermark) == (0, 6)


@pytest.mark.asyncio
async def test_memory_stays_under_the_bound_however_much_a_reader_asks(tmp_path: Path) -> None:
    async with data_plane(tmp_path) as h:
        h.create("orders")
        await produce(h, "orders", [[RECORD] * 2] * 10)
        source = DataPlaneSource(h.catalog, h.store)
        batch_size = (await source.read(ref_of(h, "orders"), 0, 1)).batches[0].size
        cache = BatchCache(source, 3 * batch_size + batch_size // 2)
        everything = await cache.read(ref_of(h, "orders"), 0, 1 << 30)
        assert len(everything.batches) == 10, "the reader gets what it asked for"
        assert cache.cached_bytes <= cache.max_bytes and len(cache) == 3, "but only the bound is kept"
        head = await cache.read(ref_of(h, "orders"), 2, 1 << 30)
        assert [b.base_offset for b in head.batches] == [2, 4] and cache.misses == 1, "the head is kept: redeliveries"
        tail = await cache.read(ref_of(h, "orders"), 14, 1 << 30)
        assert [b.base_offset for b in tail.batches] == [14, 16, 18] and cache.misses == 2
        assert cache.cached_bytes <= cache.max_bytes and cache.evictions == 3, "the oldest made room"


@pytest.mark.asyncio
async def test_an_evicted_batch_is_read_again_on_demand_with_the_same_bytes(tmp_path: Path) -> None:
    async with data_plane(tmp_path) as h:
        h.create("orders")
        await produce(h, "orders", [[RECORD] * 2] * 6)
        source = DataPlaneSource(h.catalog, h.store)
        batch_size = (await source.read(ref_of(h, "orders"), 0, 1)).batches[0].size
        cache = BatchCache(source, 2 * batch_size)
        original = None
        for offset in range(0, 12, 2):  # one consumer after another, one batch each
            read = await cache.read(ref_of(h, "orders"), offset, batch_size)
            original = original or read.batches[0]
            assert cache.cached_bytes <= cache.max_bytes
        assert cache.misses == 6 and cache.evictions == 4
        back = await cache.read(ref_of(h, "orders"), 1, batch_size)  # a released record of batch 0
        assert cache.misses == 7 and back.batches == [original]


@pytest.mark.asyncio
async def test_a_batch_larger_than_the_bound_is_passed_through_and_not_kept(tmp_path: Path) -> None:
    async with data_plane(tmp_path) as h:
        h.create("orders")
        await produce(h, "orders", [[b"small"], [RECORD] * 20, [b"after"]])
        cache = BatchCache(DataPlaneSource(h.catalog, h.store), 1000)
        read = await cache.read(ref_of(h, "orders"), 0, 1 << 20)
        assert [b.base_offset for b in read.batches] == [0, 1, 21]
        assert len(cache) == 1 and cache.cached_bytes == read.batches[0].size, "only what precedes it is kept"


@pytest.mark.asyncio
async def test_batches_gone_from_the_log_leave_the_cache(tmp_path: Path) -> None:
    async with data_plane(tmp_path) as h:
        h.create("orders", retention_bytes="1")
        await produce(h, "orders", [[RECORD] * 2])
        cache = BatchCache(DataPlaneSource(h.catalog, h.store), 1 << 20)
        await cache.read(ref_of(h, "orders"), 0, 1 << 20)
        await produce(h, "orders", [[RECORD] * 2])  # retention drops the first batch
        with pytest.raises(OffsetOutOfRange):
            await cache.read(ref_of(h, "orders"), 5, 1 << 20)
        assert len(cache) == 0, "the batch below the log start offset was dropped"


def test_the_bound_is_a_setting_with_a_sensible_default_and_kafkas_refusal_of_nonsense() -> None:
    assert resolve(environ={}).build(ShareFetchConfig).share_fetch_cache_max_bytes == 64 << 20
    overridden = resolve(environ={}, overrides=["group.share.fetch.cache.max.bytes=1048576"])
    assert overridden.build(ShareFetchConfig).share_fetch_cache_max_bytes == 1 << 20
    with pytest.raises(ConfigError):
        resolve(environ={}, overrides=["group.share.fetch.cache.max.bytes=0"])


@pytest.mark.asyncio
async def test_a_partition_whose_own_older_batches_make_room_for_its_new_ones_stays_consistent(
        tmp_path: Path) -> None:
    async with data_plane(tmp_path) as h:
        h.create("orders")
        await produce(h, "orders", [[RECORD] * 2] * 6)
        source = DataPlaneSource(h.catalog, h.store)
        batch_size = (await source.read(ref_of(h, "orders"), 0, 1)).batches[0].size
        cache = BatchCache(source, batch_size)
        await cache.read(ref_of(h, "orders"), 0, batch_size)  # cached: [0]
        await cache.read(ref_of(h, "orders"), 2, 1 << 20)  # [0] evicted for [2], the rest passed through
        assert len(cache) == 1 and cache.cached_bytes == batch_size
        again = await cache.read(ref_of(h, "orders"), 2, 1 << 20)
        assert [b.base_offset for b in again.batches] == [2] and cache.hits == 1
        later = await cache.read(ref_of(h, "orders"), 8, 1 << 20)  # evicts 2
        assert [b.base_offset for b in later.batches] == [8, 10] and cache.cached_bytes == batch_size
        assert [b.base_offset for b in (await cache.read(ref_of(h, "orders"), 8, 1)).batches] == [8]


@pytest.mark.asyncio
async def test_any_sequence_of_reads_answers_what_the_log_holds_within_the_bound(tmp_path: Path) -> None:
    rng = random.Random(7)
    async with data_plane(tmp_path) as h:
        for name in ("a", "b"):
            h.create(name)
            await produce(h, name, [[RECORD] * rng.randint(1, 4) for _ in range(40)])
        source = DataPlaneSource(h.catalog, h.store)
        refs = [ref_of(h, "a"), ref_of(h, "b")]
        ends = [(await source.read(ref, 0, 1 << 30)).end_offset for ref in refs]
        cache = BatchCache(source, rng.randint(500, 8000))
        for _ in range(500):
            i = rng.randrange(2)
            offset, max_bytes = rng.randrange(ends[i]), rng.choice([1, 700, 3000, 1 << 20])
            got = await cache.read(refs[i], offset, max_bytes)
            direct = await source.read(refs[i], offset, max_bytes)
            assert got.batches == direct.batches[:len(got.batches)] and got.batches, "a prefix of the log's answer"
            assert cache.cached_bytes == sum(cache._order.values()) <= cache.max_bytes
        assert cache.hits and cache.misses and cache.evictions


class _AwaitedOnly:
    """The data plane read only by awaiting, as sidecar mode's upstream is (every read a round trip)."""

    def __init__(self, source: DataPlaneSource) -> None:
        self.source = source
        self.reading = asyncio.Event()
        self.go = asyncio.Event()
        self.go.set()

    async def read(self, ref: PartitionRef, offset: int, max_bytes: int) -> PartitionRead:
        self.reading.set()
        await self.go.wait()
        return await self.source.read(ref, offset, max_bytes)

    def read_now(self, ref: PartitionRef, offset: int, max_bytes: int) -> None:
        return None


@pytest.mark.asyncio
async def test_a_read_at_once_is_the_same_read_and_is_kept_as_any_other(tmp_path: Path) -> None:
    async with data_plane(tmp_path) as h:
        h.create("orders")
        await produce(h, "orders", [[RECORD] * 2] * 3)
        source = DataPlaneSource(h.catalog, h.store)
        cache = BatchCache(source, 1 << 20)
        ref = ref_of(h, "orders")
        first = cache.read_now(ref, 0, 1 << 20)
        assert first is not None and first.batches == (await source.read(ref, 0, 1 << 20)).batches
        assert (cache.misses, len(cache)) == (1, 3), "a miss the data plane answers at once is kept"
        again = cache.read_now(ref, 3, 1 << 20)
        assert again is not None and again.batches == first.batches[1:] and cache.hits == 1
        with pytest.raises(OffsetOutOfRange):
            cache.read_now(ref, 7, 1 << 20)


@pytest.mark.asyncio
async def test_a_source_that_must_be_awaited_is_never_read_at_once_but_its_cached_batches_are(
        tmp_path: Path) -> None:
    async with data_plane(tmp_path) as h:
        h.create("orders")
        await produce(h, "orders", [[RECORD] * 2] * 3)
        source = _AwaitedOnly(DataPlaneSource(h.catalog, h.store))
        cache = BatchCache(source, 1 << 20)
        ref = ref_of(h, "orders")
        assert cache.read_now(ref, 0, 1 << 20) is None and cache.misses == 0
        source.go.clear()
        reading = asyncio.ensure_future(cache.read(ref, 0, 1 << 20))
        await asyncio.wait_for(source.reading.wait(), 5)
        assert cache.read_now(ref, 0, 1 << 20) is None, "a read of the partition is in flight: wait for it"
        source.go.set()
        assert len((await reading).batches) == 3
        hit = cache.read_now(ref, 2, 1 << 20)
        assert hit is not None and [b.base_offset for b in hit.batches] == [2, 4] and cache.hits == 1
