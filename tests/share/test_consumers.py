"""Several members share one partition of a real embedded data plane through a small batch cache:
they fetch in turns, accept most records and release some, until the log is drained. In the end
every record is acknowledged exactly once, no offset was held by two members at once, every
acquired offset reached its member inside a batch sent with it, the cache never held more than its
bound and evicted batches were read again; the share partition replayed from its log equals the
live one after every step (the `Twin`)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from coordinator.core.share.acknowledgement import AckBatch, AckType, acknowledge
from coordinator.core.share.records import RecordState
from coordinator.share.acquire import acquire_read, read_for
from coordinator.share.cache import BatchCache
from coordinator.share.embedded import DataPlaneSource
from tests.core.share.twin import Twin

from .embedded import data_plane, produce, ref_of

pytestmark = pytest.mark.asyncio

MEMBERS = ["m0", "m1", "m2", "m3", "m4"]


async def test_members_sharing_a_partition_through_a_bounded_cache_acknowledge_every_record_once(
        tmp_path: Path) -> None:
    rng = random.Random(30)
    async with data_plane(tmp_path) as h:
        h.create("orders")
        await produce(h, "orders", [[b"v" * 100] * rng.randint(1, 6) for _ in range(60)])
        end = h.store.log(h.catalog.get("orders"), 0).high_watermark  # type: ignore[arg-type]
        source = DataPlaneSource(h.catalog, h.store)
        batch_size = (await source.read(ref_of(h, "orders"), 0, 1)).batches[0].size
        cache = BatchCache(source, 8 * batch_size)
        ref, twin = ref_of(h, "orders"), Twin()
        accepted: list[int] = []
        read_up_to, refetched, now = 0, 0, 0
        for _ in range(2000):
            if twin.p.start_offset >= end:
                break
            member = rng.choice(MEMBERS)
            misses = cache.misses
            read = await read_for(cache, twin.p, ref, rng.choice([batch_size, 4 * batch_size, 1 << 20]))
            assert cache.cached_bytes <= cache.max_bytes
            if cache.misses > misses and twin.p.next_fetch_offset() < read_up_to:
                refetched += 1  # a redelivery whose batch had been evicted: read from the log again
            read_up_to = max(read_up_to, read.end_offset)
            got = acquire_read(twin.p, member, read, rng.randint(1, 12), now, twin.config)
            twin.log_records(got.records)
            sent = [(b.base_offset, b.last_offset) for b in got.batches]
            for r in got.acquired:
                for offset in range(r.first_offset, r.last_offset + 1):
                    assert any(first <= offset <= last for first, last in sent), f"{offset} sent without its batch"
                    held = twin.p.offsets[offset]
                    assert held.state is RecordState.ACQUIRED and held.member_id == member
            acks = []
            for r in got.acquired:  # most are accepted, some released (they come back to someone)
                release = rng.random() < 0.2 and r.delivery_count < twin.config.delivery_count_limit - 1
                kind = AckType.RELEASE if release else AckType.ACCEPT
                acks.append(AckBatch(r.first_offset, r.last_offset, (int(kind),)))
                if kind is AckType.ACCEPT:
                    accepted.extend(range(r.first_offset, r.last_offset + 1))
            if acks:
                result = acknowledge(twin.p, member, acks, now, twin.config)
                assert result.error == 0, result
                twin.log_records(result.records)
            now += 10
        assert twin.p.start_offset == end, "drained"
        assert sorted(accepted) == list(range(end)), "every record acknowledged exactly once"
        assert cache.evictions > 0 and refetched > 0, "the bound was reached and evicted batches were read again"
        assert cache.hits > 0, "and re-reads of batches still cached came from memory"
