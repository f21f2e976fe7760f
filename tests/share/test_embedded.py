"""Embedded mode's record source: share partitions read in process from a real data plane on disk,
produced into through its Produce path, and acquired for members through the glue."""

from __future__ import annotations

from pathlib import Path

import pytest

from coordinator.core.share.acknowledgement import AckBatch, AckType, acknowledge
from coordinator.core.share.acquisition import AcquiredRange
from coordinator.share.acquire import acquire_read, bytes_per_offset, read_bound, read_for
from coordinator.share.embedded import DataPlaneSource
from coordinator.share.source import OffsetOutOfRange, PartitionRef, SourceUnavailable
from protocol.errors import ErrorCode
from tests.core.share.twin import Twin

from .embedded import data_plane, produce, ref_of

pytestmark = pytest.mark.asyncio


async def test_a_read_returns_the_batches_the_data_plane_serves_with_the_partition_offsets(tmp_path: Path) -> None:
    # A cache of 1 KiB per partition: the first batches are read back from their segment file.
    async with data_plane(tmp_path, partition_max_bytes=1024) as h:
        h.create("orders")
        await produce(h, "orders", [[b"a" * 300] * 3, [b"b" * 300] * 2, [b"c" * 300] * 4])
        source = DataPlaneSource(h.catalog, h.store)
        read = await source.read(ref_of(h, "orders"), 4, 1 << 20)
        assert read.offsets() == [(3, 4), (5, 8)], "from the batch holding offset 4, whole"
        assert (read.log_start_offset, read.high_watermark, read.last_stable_offset) == (0, 9, 9)
        assert read.aborted_ranges() == [] and not any(b.control or b.transactional for b in read.batches)
        fetched = h.partitions(await h.fetch([("orders", 0, 4)]))[("orders", 0)]
        assert b"".join(b.data for b in read.batches) == bytes(fetched.records), "the bytes a Fetch sends"


async def test_max_bytes_cuts_at_a_batch_boundary_and_the_first_batch_always_comes(tmp_path: Path) -> None:
    async with data_plane(tmp_path) as h:
        h.create("orders")
        await produce(h, "orders", [[b"x" * 100] * 2, [b"y" * 100] * 2])
        source = DataPlaneSource(h.catalog, h.store)
        assert (await source.read(ref_of(h, "orders"), 0, 1)).offsets() == [(0, 1)]
        assert (await source.read(ref_of(h, "orders"), 4, 1 << 20)).batches == [], "the log end: nothing yet"


async def test_no_ask_reads_more_than_the_data_planes_fetch_max_bytes(tmp_path: Path) -> None:
    async with data_plane(tmp_path, fetch_max_bytes=1024) as h:
        h.create("orders")
        await produce(h, "orders", [[b"x" * 300] * 2] * 4)
        read = await DataPlaneSource(h.catalog, h.store).read(ref_of(h, "orders"), 0, 0x7FFFFFFF)
        assert read.offsets() == [(0, 1)] and read.size() <= 1024


async def test_offsets_outside_the_log_and_unknown_partitions_are_refused_with_kafkas_codes(tmp_path: Path) -> None:
    async with data_plane(tmp_path) as h:
        h.create("orders")
        await produce(h, "orders", [[b"x"] * 3])
        source = DataPlaneSource(h.catalog, h.store)
        with pytest.raises(OffsetOutOfRange) as out:
            await source.read(ref_of(h, "orders"), 7, 1024)
        assert out.value.log_start_offset == 0
        ref = ref_of(h, "orders")
        with pytest.raises(SourceUnavailable) as unknown:
            await source.read(PartitionRef(ref.topic_id, "orders", 3), 0, 1024)
        assert unknown.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        h.catalog.delete("orders")
        with pytest.raises(SourceUnavailable) as deleted:
            await source.read(ref, 0, 1024)
        assert deleted.value.code == ErrorCode.UNKNOWN_TOPIC_ID


async def test_members_acquire_whole_batches_and_are_sent_only_the_batches_they_hold(tmp_path: Path) -> None:
    async with data_plane(tmp_path) as h:
        h.create("orders")
        await produce(h, "orders", [[b"a"] * 3, [b"b"] * 2, [b"c"] * 4])
        source, ref, twin = DataPlaneSource(h.catalog, h.store), ref_of(h, "orders"), Twin()

        a = acquire_read(twin.p, "a", await read_for(source, twin.p, ref, 1 << 20), 2, 0, twin.config)
        twin.log_records(a.records)
        assert a.acquired == [AcquiredRange(0, 2, 1)], "a budget of 2 takes the whole first batch"
        assert [b.base_offset for b in a.batches] == [0]

        b = acquire_read(twin.p, "b", await read_for(source, twin.p, ref, 1 << 20), 100, 0, twin.config)
        twin.log_records(b.records)
        assert b.acquired == [AcquiredRange(3, 8, 1)]
        assert [b.base_offset for b in b.batches] == [3, 5]

        released = acknowledge(twin.p, "a", [AckBatch(1, 1, (int(AckType.RELEASE),))], 0, twin.config)
        twin.log_records(released.records)
        c = acquire_read(twin.p, "c", await read_for(source, twin.p, ref, 1 << 20), 100, 0, twin.config)
        twin.log_records(c.records)
        assert c.acquired == [AcquiredRange(1, 1, 2)], "the released record comes back, delivered twice"
        assert [b.base_offset for b in c.batches] == [0], "sent with its whole batch"
        assert c.records_bytes() == a.records_bytes()


async def test_records_deleted_from_the_log_move_the_share_partition_start(tmp_path: Path) -> None:
    async with data_plane(tmp_path) as h:
        h.create("orders", retention_bytes="1")  # retention keeps only the newest batch
        await produce(h, "orders", [[b"a"] * 3, [b"b"] * 2])
        source, ref, twin = DataPlaneSource(h.catalog, h.store), ref_of(h, "orders"), Twin()
        read = await read_for(source, twin.p, ref, 1 << 20)
        assert read.batches == [] and read.log_start_offset == 3, "offset 0 is gone: read as nothing"
        moved = acquire_read(twin.p, "a", read, 10, 0, twin.config)
        twin.log_records(moved.records)
        assert twin.p.start_offset == 3 and moved.acquired == []
        got = acquire_read(twin.p, "a", await read_for(source, twin.p, ref, 1 << 20), 10, 0, twin.config)
        assert got.acquired == [AcquiredRange(3, 4, 1)]


async def test_concurrent_fetches_read_only_what_they_can_acquire_and_past_one_another(tmp_path: Path) -> None:
    async with data_plane(tmp_path) as h:
        h.create("orders")
        await produce(h, "orders", [[b"r%d" % i] * 10 for i in range(30)])  # 30 batches of 10 records
        source, ref, twin = DataPlaneSource(h.catalog, h.store), ref_of(h, "orders"), Twin()
        assert len((await read_for(source, twin.p, ref, 1 << 20)).batches) == 30  # unbounded: everything

        # Two members' fetches of 25 records read before either is answered: the first read stops
        # at the batch holding its bound, the second (two fetches between read and answer) reads
        # twice as far, so it still has records to acquire once the first took its share.
        first = await read_for(source, twin.p, ref, 1 << 20, read_bound(twin.p, 25, 1))
        size = bytes_per_offset(first)
        second = await read_for(source, twin.p, ref, 1 << 20, read_bound(twin.p, 25, 2), size)
        assert (first.batches[-1].last_offset, second.batches[-1].last_offset) == (49, 99)
        a = acquire_read(twin.p, "a", first, 25, 0, twin.config)
        twin.log_records(a.records)
        b = acquire_read(twin.p, "b", second, 25, 0, twin.config)
        twin.log_records(b.records)
        assert (a.acquired, b.acquired) == ([AcquiredRange(0, 29, 1)], [AcquiredRange(30, 59, 1)])
        assert [x.base_offset for x in b.batches] == [30, 40, 50]

        # A bound below the first batch still reads that batch: a read always has its first.
        tiny = await read_for(source, twin.p, ref, 1 << 20, twin.p.next_offset, 0.001)
        assert [x.base_offset for x in tiny.batches] == [60]
