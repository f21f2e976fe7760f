"""Partition logs: offsets, stored bytes, retention and memory caps, catalog deletion."""

from __future__ import annotations

from kio.records.readers import read_batch

from coordinator.dataplane import DataPlaneConfig
from coordinator.dataplane.batch import validate_produce

from .harness import Harness
from .records import NOW_MS, make_batch


def append(h: Harness, topic: str, partition: int, values: list[bytes], **kwargs: object) -> int:
    batch, header = validate_produce(
        make_batch(values, **kwargs),  # type: ignore[arg-type]
        api_version=11,
        max_message_bytes=1_000_000,
    )
    t = h.catalog.get(topic)
    assert t is not None
    return h.store.append(t, partition, batch, header).base_offset


def test_offsets_are_assigned_consecutively_and_stored_batches_stay_valid() -> None:
    h = Harness()
    h.create("t")
    assert append(h, "t", 0, [b"a", b"b", b"c"]) == 0
    assert append(h, "t", 0, [b"d"]) == 3
    assert append(h, "t", 0, [b"e", b"f"]) == 4
    log = h.store.log(h.catalog.get("t"), 0)  # type: ignore[arg-type]
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (0, 6, 6)
    offsets = []
    for stored in log.batches():
        parsed, size = read_batch(stored.data, 0)  # verifies the CRC
        assert size == len(stored.data)
        assert parsed.partition_leader_epoch == 0
        offsets.extend(r.offset for r in parsed.records)
    assert offsets == [0, 1, 2, 3, 4, 5]


def test_read_starts_at_the_batch_holding_the_offset() -> None:
    h = Harness()
    h.create("t")
    append(h, "t", 0, [b"a", b"b", b"c"])
    append(h, "t", 0, [b"d", b"e"])
    log = h.store.log(h.catalog.get("t"), 0)  # type: ignore[arg-type]
    assert [b.base_offset for b in log.read(1, 10**6, True)] == [0, 3]
    assert [b.base_offset for b in log.read(3, 10**6, True)] == [3]
    assert [b.base_offset for b in log.read(4, 10**6, True)] == [3]
    assert log.read(5, 10**6, True) == []
    first = next(log.batches())
    assert [b.base_offset for b in log.read(0, 1, True)] == [0]  # min one batch
    assert log.read(0, 1, False) == []
    assert log.bytes_from(0) == log.size_bytes
    assert log.bytes_from(3) == log.size_bytes - first.size


def test_retention_bytes_drops_oldest_batches_and_advances_log_start() -> None:
    h = Harness()
    size = len(make_batch([b"x" * 100]))
    h.create("t", retention_bytes=str(2 * size))
    for _ in range(5):
        append(h, "t", 0, [b"x" * 100])
    log = h.store.log(h.catalog.get("t"), 0)  # type: ignore[arg-type]
    # Kafka's rule: drop the head while the rest still holds >= retention.bytes.
    assert log.size_bytes == 2 * size
    assert (log.log_start_offset, log.log_end_offset) == (3, 5)
    assert h.store.total_bytes == 2 * size


def test_partition_cap_bounds_the_memory_of_one_log_and_evicted_batches_read_from_disk() -> None:
    size = len(make_batch([b"x" * 100]))
    h = Harness(DataPlaneConfig(partition_max_bytes=3 * size + 10))
    h.create("t")
    for i in range(10):
        append(h, "t", 0, [b"x%03d" % i * 25])
    log = h.store.log(h.catalog.get("t"), 0)  # type: ignore[arg-type]
    assert log.cached_bytes == 3 * size
    assert (log.log_start_offset, log.log_end_offset, log.size_bytes) == (0, 10, 10 * size)
    batches = list(log.batches())
    assert [b.data is None for b in batches] == [True] * 7 + [False] * 3
    for i, stored in enumerate(batches):
        parsed, _ = read_batch(stored.bytes(), 0)  # from the segment file when evicted; CRC checked
        assert parsed.base_offset == i
        assert parsed.records[0].value == b"x%03d" % i * 25


def test_total_cap_evicts_the_globally_oldest_batches_first() -> None:
    size = len(make_batch([b"x" * 100]))
    h = Harness(DataPlaneConfig(total_max_bytes=4 * size))
    h.create("a")
    h.create("b")
    append(h, "a", 0, [b"x" * 100])  # oldest overall
    append(h, "a", 0, [b"x" * 100])
    append(h, "b", 0, [b"x" * 100])
    append(h, "b", 0, [b"x" * 100])
    append(h, "b", 0, [b"x" * 100])  # pushes a@0 out of memory
    a = h.store.log(h.catalog.get("a"), 0)  # type: ignore[arg-type]
    b = h.store.log(h.catalog.get("b"), 0)  # type: ignore[arg-type]
    assert h.store.cached_bytes == 4 * size
    assert h.store.total_bytes == 5 * size  # nothing is dropped: memory is only a cache
    assert [s.data is None for s in a.batches()] == [True, False]
    assert [s.data is None for s in b.batches()] == [False, False, False]
    assert (a.log_start_offset, a.log_end_offset) == (0, 2)
    assert read_batch(next(a.batches()).bytes(), 0)[0].base_offset == 0


def test_cache_fifo_stays_bounded_when_retention_drops_batches() -> None:
    size = len(make_batch([b"x"]))
    h = Harness()
    h.create("t", retention_bytes=str(size))
    for _ in range(10000):
        append(h, "t", 0, [b"x"])
    assert len(h.store._cache_fifo) <= 4096
    assert h.store.cached_bytes == h.store.total_bytes == size


def test_time_retention_uses_batch_max_timestamp() -> None:
    h = Harness()
    h.create("t", retention_ms="1000")
    append(h, "t", 0, [b"old"], timestamps=[NOW_MS - 5000])
    append(h, "t", 0, [b"new"], timestamps=[NOW_MS])
    log = h.store.log(h.catalog.get("t"), 0)  # type: ignore[arg-type]
    assert log.log_start_offset == 0  # retention runs at check intervals, not on every append
    dropped = h.store.enforce_retention()
    assert dropped > 0
    assert (log.log_start_offset, log.log_end_offset) == (1, 2)
    h.clock.advance(2000)
    h.store.enforce_retention()
    assert (log.log_start_offset, log.log_end_offset, log.size_bytes) == (2, 2, 0)


def test_time_retention_is_checked_lazily_on_append_after_the_interval() -> None:
    h = Harness(retention_check_interval_ms=100)
    h.create("t", retention_ms="1000")
    append(h, "t", 0, [b"old"], timestamps=[NOW_MS - 5000])
    h.clock.advance(100)
    append(h, "t", 0, [b"new"])
    log = h.store.log(h.catalog.get("t"), 0)  # type: ignore[arg-type]
    assert log.log_start_offset == 1


def test_deleting_a_topic_drops_its_logs_and_a_recreated_topic_starts_empty() -> None:
    h = Harness()
    h.create("t")
    append(h, "t", 0, [b"a"])
    old = h.store.log(h.catalog.get("t"), 0)  # type: ignore[arg-type]
    assert h.store.total_bytes > 0
    h.catalog.delete("t")
    assert h.store.total_bytes == 0
    assert old.deleted
    h.create("t")
    assert h.store.log(h.catalog.get("t"), 0).log_end_offset == 0  # type: ignore[arg-type]
    assert append(h, "t", 0, [b"b"]) == 0


def test_log_append_time_topic_stamps_max_timestamp_and_keeps_crc_valid() -> None:
    h = Harness()
    h.create("t", message_timestamp_type="LogAppendTime")
    h.clock.advance(12345)
    append(h, "t", 0, [b"a", b"b"], timestamps=[1000, 2000])
    log = h.store.log(h.catalog.get("t"), 0)  # type: ignore[arg-type]
    stored = next(log.batches())
    parsed, _ = read_batch(stored.data, 0)
    assert parsed.max_timestamp == NOW_MS + 12345
    assert parsed.attributes & 0x08
    assert log.max_timestamp() == (NOW_MS + 12345, 0)


def test_the_index_costs_a_few_dozen_bytes_a_batch_whatever_the_batches_hold() -> None:
    import tracemalloc

    h = Harness(DataPlaneConfig(partition_max_bytes=1024, total_max_bytes=1024))
    h.create("t")
    for _ in range(1000):
        append(h, "t", 0, [b"x"])
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        for _ in range(5_000):
            append(h, "t", 0, [b"x"])
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    grown = sum(
        stat.size_diff for stat in after.compare_to(before, "filename")
        if "memfs" not in stat.traceback[0].filename  # the segment bytes themselves (the "disk")
    )
    assert grown / 5_000 < 64, f"{grown / 5_000:.0f} bytes of memory per batch"
    assert h.store.cached_bytes <= 1024


def test_read_records_is_the_bytes_of_read_across_segments_and_the_cache_edge() -> None:
    h = Harness(DataPlaneConfig(partition_max_bytes=1500))
    h.create("t", segment_bytes="700")
    for i in range(30):
        append(h, "t", 0, [b"v" * (10 + 37 * (i % 5))] * (1 + i % 3))
    log = h.store.log(h.catalog.get("t"), 0)  # type: ignore[arg-type]
    assert len(log.files.segments) > 3 and 0 < log.cached_bytes < log.size_bytes  # type: ignore[union-attr]
    for offset in range(log.log_end_offset + 1):
        for max_bytes in (0, 1, 150, 400, 1000, 10**6):
            for min_one in (True, False):
                batches = log.read(offset, max_bytes, min_one)
                expected = b"".join(b.bytes() for b in batches), sum(b.records_count for b in batches)
                assert log.read_records(offset, max_bytes, min_one) == expected, (offset, max_bytes, min_one)
