"""Fetch: data, offsets, errors, version layouts, byte limits and long polling."""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client import REGISTRY

from .harness import Harness
from .records import make_batch

pytestmark = pytest.mark.asyncio


async def _produce(h: Harness, topic: str, partition: int, *values: bytes) -> bytes:
    batch = make_batch(list(values))
    assert (await h.produce(topic, partition, batch)).error_code == 0
    return batch


def _base_offsets(records: bytes) -> list[int]:
    out, pos = [], 0
    while pos < len(records):
        out.append(int.from_bytes(records[pos : pos + 8], "big", signed=True))
        pos += 12 + int.from_bytes(records[pos + 8 : pos + 12], "big", signed=True)
    return out


@pytest.mark.parametrize("version", [4, 5, 7, 11, 12, 13, 15, 17])
async def test_fetch_returns_batches_from_the_fetch_offset(harness: Harness, version: int) -> None:
    harness.create("t", 2)
    await _produce(harness, "t", 0, b"a", b"b")
    await _produce(harness, "t", 0, b"c")
    response = await harness.fetch([("t", 0, 1), ("t", 1, 0)], version=version)
    parts = harness.partitions(response)
    p0, p1 = parts[("t", 0)], parts[("t", 1)]
    assert p0.error_code == 0 and p0.high_watermark == 3 and p0.last_stable_offset == 3
    assert _base_offsets(p0.records) == [0, 2]  # the batch holding offset 1, then the rest
    assert p1.error_code == 0 and p1.high_watermark == 0 and p1.records == b""
    if version >= 5:
        assert p0.log_start_offset == 0
    assert p0.aborted_transactions is None
    if version >= 11:
        assert p0.preferred_read_replica == -1
    if version >= 7:
        assert response.error_code == 0 and response.session_id == 0  # epoch -1: sessionless


async def test_read_committed_gets_an_empty_aborted_list(harness: Harness) -> None:
    harness.create("t")
    await _produce(harness, "t", 0, b"a")
    response = await harness.fetch([("t", 0, 0)], isolation_level=1)
    assert harness.partitions(response)[("t", 0)].aborted_transactions == ()


async def test_fetched_bytes_are_what_was_stored(harness: Harness) -> None:
    harness.create("t")
    sent = await _produce(harness, "t", 0, b"a")
    await _produce(harness, "t", 0, b"b")
    records = harness.partitions(await harness.fetch([("t", 0, 0)]))[("t", 0)].records
    stored = list(harness.store.log(harness.catalog.get("t"), 0).batches())  # type: ignore[arg-type]
    assert records == stored[0].data + stored[1].data
    assert records[16:len(sent)] == sent[16:]  # only offset and leader epoch were rewritten


async def test_offset_out_of_range(harness: Harness) -> None:
    size = len(make_batch([b"x"]))
    harness.create("t", retention_bytes=str(size))
    for _ in range(3):
        await _produce(harness, "t", 0, b"x")
    for offset in (0, 4):
        part = harness.partitions(await harness.fetch([("t", 0, offset)]))[("t", 0)]
        assert (part.error_code, part.high_watermark, part.log_start_offset, part.records) == (1, -1, -1, b"")
    at_end = harness.partitions(await harness.fetch([("t", 0, 3)]))[("t", 0)]
    assert (at_end.error_code, at_end.high_watermark, at_end.log_start_offset) == (0, 3, 2)


async def test_unknown_topics_partitions_and_ids(harness: Harness) -> None:
    harness.create("t", 1)
    by_name = harness.partitions(await harness.fetch([("nope", 0, 0), ("t", 5, 0)], version=12))
    assert by_name[("nope", 0)].error_code == 3
    assert by_name[("t", 5)].error_code == 3
    by_id = await harness.fetch([("nope", 0, 0)], version=13)
    assert by_id.responses[0].partitions[0].error_code == 100


async def test_leader_epoch_is_checked(harness: Harness) -> None:
    harness.create("t")
    assert harness.partitions(await harness.fetch([("t", 0, 0)], leader_epoch=1))[("t", 0)].error_code == 75
    assert harness.partitions(await harness.fetch([("t", 0, 0)], leader_epoch=0))[("t", 0)].error_code == 0


async def test_partition_max_bytes_limits_whole_batches(harness: Harness) -> None:
    harness.create("t")
    size = len(await _produce(harness, "t", 0, b"x" * 100))
    for _ in range(4):
        await _produce(harness, "t", 0, b"x" * 100)
    part = harness.partitions(await harness.fetch([("t", 0, 0)], partition_max_bytes=2 * size + 10))
    assert _base_offsets(part[("t", 0)].records) == [0, 1]


async def test_first_partition_gets_one_batch_even_if_larger_than_limits(harness: Harness) -> None:
    harness.create("t", 2)
    big = await _produce(harness, "t", 0, b"x" * 1000)
    await _produce(harness, "t", 1, b"y")
    response = await harness.fetch([("t", 0, 0), ("t", 1, 0)], max_bytes=100, partition_max_bytes=100)
    parts = harness.partitions(response)
    assert len(parts[("t", 0)].records) == len(big)  # KIP-74: one whole batch to make progress
    assert parts[("t", 1)].records == b""  # the response budget is spent
    assert parts[("t", 1)].high_watermark == 1


async def test_response_max_bytes_spans_partitions(harness: Harness) -> None:
    harness.create("t", 3)
    size = len(await _produce(harness, "t", 0, b"x" * 100))
    await _produce(harness, "t", 1, b"x" * 100)
    await _produce(harness, "t", 2, b"x" * 100)
    response = await harness.fetch([("t", 0, 0), ("t", 1, 0), ("t", 2, 0)], max_bytes=2 * size)
    parts = harness.partitions(response)
    assert [len(parts[("t", p)].records) for p in range(3)] == [size, size, 0]


async def test_bytes_out_is_counted(harness: Harness) -> None:
    harness.create("out")
    batch = await _produce(harness, "out", 0, b"a", b"b")
    before = REGISTRY.get_sample_value("coordinator_dataplane_bytes_out_total", {"topic": "out"}) or 0.0
    await harness.fetch([("out", 0, 0)])
    after = REGISTRY.get_sample_value("coordinator_dataplane_bytes_out_total", {"topic": "out"})
    assert after == before + len(batch)


async def _parked(h: Harness, topic: str, partition: int, task: asyncio.Task[object]) -> None:
    """Yield to the loop until the fetch task has registered its waiter on the log."""
    log = h.store.log(h.catalog.get(topic), partition)  # type: ignore[arg-type]
    for _ in range(1000):
        if log._waiters:
            return
        assert not task.done(), "fetch returned instead of waiting"
        await asyncio.sleep(0)
    raise AssertionError("fetch never parked")


async def test_long_poll_returns_as_soon_as_a_produce_arrives(harness: Harness) -> None:
    harness.create("t")
    task = asyncio.create_task(harness.fetch([("t", 0, 0)], max_wait_ms=5000, min_bytes=1))
    await _parked(harness, "t", 0, task)
    await _produce(harness, "t", 0, b"hello")
    response = await asyncio.wait_for(task, timeout=2)
    part = harness.partitions(response)[("t", 0)]
    assert part.high_watermark == 1 and _base_offsets(part.records) == [0]
    assert not harness.store.log(harness.catalog.get("t"), 0)._waiters  # type: ignore[arg-type]


async def test_long_poll_waits_for_min_bytes(harness: Harness) -> None:
    harness.create("t", 2)
    size = len(make_batch([b"x" * 50]))
    task = asyncio.create_task(
        harness.fetch([("t", 0, 0), ("t", 1, 0)], max_wait_ms=5000, min_bytes=2 * size)
    )
    await _parked(harness, "t", 0, task)
    await _produce(harness, "t", 0, b"x" * 50)
    await _parked(harness, "t", 1, task)  # woken, not enough bytes: parked again
    await _produce(harness, "t", 1, b"x" * 50)
    parts = harness.partitions(await asyncio.wait_for(task, timeout=2))
    assert parts[("t", 0)].records and parts[("t", 1)].records


async def test_long_poll_times_out_with_an_empty_answer(harness: Harness) -> None:
    harness.create("t")
    response = await asyncio.wait_for(harness.fetch([("t", 0, 0)], max_wait_ms=20), timeout=2)
    part = harness.partitions(response)[("t", 0)]
    assert (part.error_code, part.records) == (0, b"")
    assert not harness.store.log(harness.catalog.get("t"), 0)._waiters  # type: ignore[arg-type]


async def test_topic_deletion_ends_a_parked_fetch(harness: Harness) -> None:
    harness.create("t")
    task = asyncio.create_task(harness.fetch([("t", 0, 0)], max_wait_ms=5000))
    await _parked(harness, "t", 0, task)
    harness.catalog.delete("t")
    response = await asyncio.wait_for(task, timeout=2)
    assert harness.partitions(response)[("t", 0)].error_code == 3


async def test_errors_answer_at_once(harness: Harness) -> None:
    harness.create("t")
    response = await asyncio.wait_for(
        harness.fetch([("t", 0, 0), ("nope", 0, 0)], max_wait_ms=60000), timeout=2
    )
    assert harness.partitions(response)[("nope", 0)].error_code == 3


async def test_a_fetch_of_evicted_batches_reads_them_from_disk_in_one_read() -> None:
    from coordinator.dataplane import DataPlaneConfig

    size = len(make_batch([b"x" * 100]))
    h = Harness(DataPlaneConfig(partition_max_bytes=2 * size))
    topic = h.create("t")
    for i in range(6):
        assert (await h.produce("t", 0, make_batch([b"%d" % i * 100]))).error_code == 0
    fs = h.store.fs
    segment = f"{h.store.directory}/{topic.topic_id}-0/{0:020d}.log"
    reads = fs.op_counts.get("read", 0)  # type: ignore[attr-defined]
    response = await h.fetch([("t", 0, 0)], partition_max_bytes=10 * size)
    records = h.partitions(response)[("t", 0)].records
    assert records == fs.content(segment)  # type: ignore[attr-defined]  # four from disk, two cached
    assert fs.op_counts.get("read", 0) == reads + 1  # type: ignore[attr-defined]
