"""Fetch sessions (KIP-227) through the Fetch handler, and the cache's eviction rules."""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client import REGISTRY

from coordinator.dataplane import DataPlaneConfig
from coordinator.dataplane.session import MAX_EPOCH, next_epoch

from .harness import Harness
from .records import make_batch

pytestmark = pytest.mark.asyncio


async def _produce(h: Harness, topic: str, partition: int, value: bytes = b"v") -> int:
    response = await h.produce(topic, partition, make_batch([value]))
    assert response.error_code == 0
    return int(response.base_offset)


async def _open(h: Harness, partitions: list[tuple[str, int, int]], version: int = 12) -> int:
    response = await h.fetch(partitions, version=version, session_id=0, session_epoch=0)
    assert response.error_code == 0
    assert response.session_id != 0
    return int(response.session_id)


async def test_epochs_wrap_to_one() -> None:
    assert next_epoch(0) == 1
    assert next_epoch(41) == 42
    assert next_epoch(MAX_EPOCH) == 1
    assert next_epoch(-1) == -1


async def test_full_fetch_with_epoch_zero_creates_a_session(harness: Harness) -> None:
    harness.create("t", 2)
    await _produce(harness, "t", 0)
    response = await harness.fetch([("t", 0, 0), ("t", 1, 0)], session_id=0, session_epoch=0)
    assert response.session_id == 1001
    assert set(harness.partitions(response)) == {("t", 0), ("t", 1)}  # full: every partition
    assert len(harness.sessions) == 1
    assert REGISTRY.get_sample_value("coordinator_dataplane_fetch_sessions") == 1


async def test_epoch_minus_one_is_sessionless_and_closes_a_named_session(harness: Harness) -> None:
    harness.create("t")
    session = await _open(harness, [("t", 0, 0)])
    response = await harness.fetch([("t", 0, 0)], session_id=session, session_epoch=-1)
    assert response.session_id == 0 and response.error_code == 0
    assert harness.sessions.get(session) is None


async def test_incremental_fetch_returns_only_partitions_with_changes(harness: Harness) -> None:
    harness.create("t", 3)
    session = await _open(harness, [("t", 0, 0), ("t", 1, 0), ("t", 2, 0)])
    nothing = await harness.fetch([], session_id=session, session_epoch=1)
    assert (nothing.error_code, nothing.session_id) == (0, session)
    assert harness.partitions(nothing) == {}
    await _produce(harness, "t", 1)
    changed = await harness.fetch([], session_id=session, session_epoch=2)
    parts = harness.partitions(changed)
    assert set(parts) == {("t", 1)}
    assert parts[("t", 1)].records and parts[("t", 1)].high_watermark == 1
    # The client advances its offset; the new HW was already sent: nothing to report.
    after = await harness.fetch([("t", 1, 1)], session_id=session, session_epoch=3)
    assert harness.partitions(after) == {}


async def test_incremental_fetch_uses_the_cached_fetch_offset(harness: Harness) -> None:
    harness.create("t")
    session = await _open(harness, [("t", 0, 0)])
    await _produce(harness, "t", 0, b"first")
    first = harness.partitions(await harness.fetch([], session_id=session, session_epoch=1))
    assert first[("t", 0)].records
    await _produce(harness, "t", 0, b"second")
    # The client did not send a new offset: the session still fetches from 0.
    again = harness.partitions(await harness.fetch([], session_id=session, session_epoch=2))
    assert b"first" in again[("t", 0)].records and b"second" in again[("t", 0)].records
    moved = harness.partitions(await harness.fetch([("t", 0, 2)], session_id=session, session_epoch=3))
    assert moved == {}  # caught up: no records and the HW already sent
    await _produce(harness, "t", 0, b"third")
    latest = harness.partitions(await harness.fetch([], session_id=session, session_epoch=4))
    assert b"first" not in latest[("t", 0)].records and b"third" in latest[("t", 0)].records


async def test_hw_change_without_records_is_reported(harness: Harness) -> None:
    harness.create("t", 2)
    session = await _open(harness, [("t", 0, 0), ("t", 1, 0)])
    size = len(make_batch([b"x" * 100]))
    await harness.produce("t", 0, make_batch([b"x" * 100]))
    await harness.produce("t", 1, make_batch([b"x" * 100]))
    response = await harness.fetch([], session_id=session, session_epoch=1, max_bytes=size)
    parts = harness.partitions(response)
    assert parts[("t", 0)].records  # the first partition with data fills the budget
    assert parts[("t", 1)].records == b"" and parts[("t", 1)].high_watermark == 1


async def test_partitions_that_returned_records_rotate_to_the_end(harness: Harness) -> None:
    harness.create("t", 2)
    session = await _open(harness, [("t", 0, 0), ("t", 1, 0)])
    size = len(make_batch([b"x" * 100]))
    await harness.produce("t", 0, make_batch([b"x" * 100]))
    await harness.produce("t", 1, make_batch([b"x" * 100]))
    first = await harness.fetch([], session_id=session, session_epoch=1, max_bytes=size)
    assert harness.partitions(first)[("t", 0)].records
    second = await harness.fetch([("t", 0, 1)], session_id=session, session_epoch=2, max_bytes=size)
    parts = harness.partitions(second)
    assert parts[("t", 1)].records  # partition 1 comes first now and gets the budget


async def test_adds_and_forgotten_partitions(harness: Harness) -> None:
    harness.create("t", 3)
    session = await _open(harness, [("t", 0, 0)])
    added = await harness.fetch([("t", 1, 0)], session_id=session, session_epoch=1)
    assert set(harness.partitions(added)) == {("t", 1)}  # new partitions are always reported once
    await _produce(harness, "t", 0)
    await _produce(harness, "t", 1)
    response = await harness.fetch([], session_id=session, session_epoch=2, forgotten=[("t", 0)])
    assert set(harness.partitions(response)) == {("t", 1)}
    cached = harness.sessions.get(session)
    assert cached is not None and [key for key in cached.partitions] == [("t", 1)]


async def test_forgetting_every_partition_closes_the_session(harness: Harness) -> None:
    harness.create("t")
    session = await _open(harness, [("t", 0, 0)])
    response = await harness.fetch([], session_id=session, session_epoch=1, forgotten=[("t", 0)])
    assert (response.error_code, response.session_id) == (0, 0)
    assert harness.sessions.get(session) is None


async def test_stale_epoch_is_rejected(harness: Harness) -> None:
    harness.create("t")
    session = await _open(harness, [("t", 0, 0)])
    assert (await harness.fetch([], session_id=session, session_epoch=1)).error_code == 0
    stale = await harness.fetch([], session_id=session, session_epoch=1)
    assert (stale.error_code, stale.session_id, stale.responses) == (71, 0, ())
    ahead = await harness.fetch([], session_id=session, session_epoch=5)
    assert ahead.error_code == 71
    assert (await harness.fetch([], session_id=session, session_epoch=2)).error_code == 0


async def test_unknown_session_id(harness: Harness) -> None:
    harness.create("t")
    response = await harness.fetch([("t", 0, 0)], session_id=12345, session_epoch=1)
    assert (response.error_code, response.session_id, response.responses) == (70, 0, ())


async def test_topic_id_usage_must_match_the_session(harness: Harness) -> None:
    harness.create("t")
    session = await _open(harness, [("t", 0, 0)], version=13)
    response = await harness.fetch([], version=12, session_id=session, session_epoch=1)
    assert response.error_code == 106
    by_id = await harness.fetch([], version=13, session_id=session, session_epoch=1)
    assert by_id.error_code == 0


async def test_errors_are_reported_on_every_incremental_fetch(harness: Harness) -> None:
    harness.create("t")
    session = await _open(harness, [("t", 0, 0)], version=13)
    harness.catalog.delete("t")
    for epoch in (1, 2):
        response = await harness.fetch([], version=13, session_id=session, session_epoch=epoch)
        assert [p.error_code for t in response.responses for p in t.partitions] == [100]


async def test_session_epoch_is_rechecked_when_a_parked_fetch_answers(harness: Harness) -> None:
    harness.create("t")
    session = await _open(harness, [("t", 0, 0)])
    parked = asyncio.create_task(
        harness.fetch([], session_id=session, session_epoch=1, max_wait_ms=5000)
    )
    log = harness.store.log(harness.catalog.get("t"), 0)  # type: ignore[arg-type]
    for _ in range(1000):
        if log._waiters:
            break
        await asyncio.sleep(0)
    assert log._waiters
    # A second request at the next epoch overtakes the parked one (a duplicate in flight).
    assert (await harness.fetch([], session_id=session, session_epoch=2)).error_code == 0
    await _produce(harness, "t", 0)
    response = await asyncio.wait_for(parked, timeout=2)
    assert response.error_code == 71


async def test_full_cache_creates_no_session_until_one_is_stale() -> None:
    h = Harness(DataPlaneConfig(max_incremental_fetch_session_cache_slots=1, fetch_session_eviction_ms=1000))
    h.create("t", 2)
    first = await _open(h, [("t", 0, 0)])
    no_room = await h.fetch([("t", 1, 0)], session_id=0, session_epoch=0)
    assert (no_room.error_code, no_room.session_id) == (0, 0)  # answered, but sessionless
    before = REGISTRY.get_sample_value("coordinator_dataplane_fetch_session_evictions_total") or 0.0
    h.clock.advance(1001)
    second = await _open(h, [("t", 1, 0)])
    assert second != first
    assert h.sessions.evictions == 1
    assert REGISTRY.get_sample_value("coordinator_dataplane_fetch_session_evictions_total") == before + 1
    evicted = await h.fetch([], session_id=first, session_epoch=1)
    assert evicted.error_code == 70  # the evicted session is reported; the client starts over


async def test_a_larger_session_evicts_an_old_smaller_one_in_use() -> None:
    h = Harness(DataPlaneConfig(max_incremental_fetch_session_cache_slots=1, fetch_session_eviction_ms=1000))
    h.create("t", 3)
    small = await _open(h, [("t", 0, 0)])
    h.clock.advance(1001)
    assert (await h.fetch([], session_id=small, session_epoch=1)).error_code == 0  # not stale
    same_size = await h.fetch([("t", 1, 0)], session_id=0, session_epoch=0)
    assert same_size.session_id == 0  # equal size does not evict
    larger = await h.fetch([("t", 1, 0), ("t", 2, 0)], session_id=0, session_epoch=0)
    assert larger.session_id not in (0, small)
    assert (await h.fetch([], session_id=small, session_epoch=2)).error_code == 70


async def test_recently_created_sessions_are_not_evicted_for_size() -> None:
    h = Harness(DataPlaneConfig(max_incremental_fetch_session_cache_slots=1, fetch_session_eviction_ms=1000))
    h.create("t", 3)
    small = await _open(h, [("t", 0, 0)])
    larger = await h.fetch([("t", 1, 0), ("t", 2, 0)], session_id=0, session_epoch=0)
    assert larger.session_id == 0
    assert h.sessions.get(small) is not None


async def test_fetch_v4_to_v6_have_no_sessions(harness: Harness) -> None:
    harness.create("t")
    for version in (4, 5, 6):
        await harness.fetch([("t", 0, 0)], version=version, session_epoch=0)
    assert len(harness.sessions) == 0
