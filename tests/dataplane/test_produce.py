"""Produce: appends, responses per version, and Kafka's validation errors."""

from __future__ import annotations

import struct

import pytest
from prometheus_client import REGISTRY

from protocol.errors import ErrorCode

from .harness import Harness
from .records import make_batch

pytestmark = pytest.mark.asyncio


def _sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


@pytest.mark.parametrize("version", [3, 5, 7, 8, 9, 11])
async def test_produce_appends_and_reports_base_offsets(harness: Harness, version: int) -> None:
    harness.create("t", 2)
    first = await harness.produce("t", 1, make_batch([b"a", b"b"]), version=version)
    second = await harness.produce("t", 1, make_batch([b"c"]), version=version)
    assert first.error_code == 0 and second.error_code == 0
    assert (first.base_offset, second.base_offset) == (0, 2)
    assert first.log_append_time is None  # -1 on the wire: CreateTime
    if version >= 5:
        assert second.log_start_offset == 0
    log = harness.store.log(harness.catalog.get("t"), 1)  # type: ignore[arg-type]
    assert log.log_end_offset == 3


async def test_log_append_time_is_reported(harness: Harness) -> None:
    harness.create("t", message_timestamp_type="LogAppendTime")
    response = await harness.produce("t", 0, make_batch([b"a"]))
    assert response.error_code == 0
    assert response.log_append_time is not None
    assert round(response.log_append_time.timestamp() * 1000) == harness.clock.now_ms


async def test_acks_zero_sends_no_response_but_appends(harness: Harness) -> None:
    harness.create("t")
    assert await harness.produce("t", 0, make_batch([b"a"]), acks=0) is None
    assert harness.store.log(harness.catalog.get("t"), 0).log_end_offset == 1  # type: ignore[arg-type]


async def test_invalid_acks_are_refused(harness: Harness) -> None:
    harness.create("t")
    response = await harness.produce("t", 0, make_batch([b"a"]), acks=2)
    assert response.error_code == 21
    assert harness.store.log(harness.catalog.get("t"), 0).log_end_offset == 0  # type: ignore[arg-type]


async def test_unknown_topic_and_partition(harness: Harness) -> None:
    harness.create("t", 2)
    missing = await harness.produce("nope", 0, make_batch([b"a"]))
    assert (missing.error_code, missing.base_offset, missing.log_start_offset) == (3, -1, -1)
    assert harness.catalog.get("nope") is None  # Produce never creates topics
    assert (await harness.produce("t", 2, make_batch([b"a"]))).error_code == 3
    assert (await harness.produce("t", -1, make_batch([b"a"]))).error_code == 3


def _corrupt_crc(batch: bytes) -> bytes:
    return batch[:-1] + bytes([batch[-1] ^ 0xFF])


def _short_length(batch: bytes) -> bytes:
    return batch[:8] + struct.pack(">i", 10) + batch[12:]


@pytest.mark.parametrize(
    ("records", "code"),
    [
        pytest.param(b"", 87, id="empty"),
        pytest.param(None, 87, id="null"),
        pytest.param(make_batch([b"a"])[:40], 87, id="only-a-partial-batch"),
        pytest.param(make_batch([b"a"], magic=1), 87, id="magic-1"),
        pytest.param(make_batch([b"a"]) + make_batch([b"b"]), 87, id="two-batches"),
        pytest.param(make_batch([b"a"], base_offset=5), 87, id="base-offset-not-zero"),
        pytest.param(_corrupt_crc(make_batch([b"a"])), 2, id="bad-crc"),
        pytest.param(_short_length(make_batch([b"a"])), 2, id="length-below-minimum"),
        pytest.param(make_batch([b"a"], codec=5), 2, id="unknown-codec"),
        pytest.param(make_batch([b"a"], attributes=0x20), 87, id="control-batch"),
        pytest.param(make_batch([b"a", b"b"], records_count=3), 87, id="count-mismatch"),
        pytest.param(make_batch([b"a"], records_count=0, last_offset_delta=-1), 87, id="zero-count"),
        pytest.param(make_batch([b"a"], producer_id=7, base_sequence=-1), 87, id="pid-no-sequence"),
        pytest.param(
            make_batch([b"a"], attributes=0x10, producer_id=7, base_sequence=0), 48, id="transactional"
        ),
    ],
)
async def test_invalid_batches_are_refused(harness: Harness, records: bytes | None, code: int) -> None:
    harness.create("t")
    name = ErrorCode(code).name
    before = _sample("coordinator_dataplane_produce_errors_total", error=name)
    response = await harness.produce("t", 0, records)
    assert response.error_code == code
    assert (response.base_offset, response.log_start_offset) == (-1, -1)
    assert response.error_message  # v8+ carries Kafka's message
    assert harness.store.log(harness.catalog.get("t"), 0).log_end_offset == 0  # type: ignore[arg-type]
    assert _sample("coordinator_dataplane_produce_errors_total", error=name) == before + 1


async def test_trailing_partial_batch_is_trimmed(harness: Harness) -> None:
    harness.create("t")
    batch = make_batch([b"a"])
    response = await harness.produce("t", 0, batch + make_batch([b"b"])[:30])
    assert response.error_code == 0
    log = harness.store.log(harness.catalog.get("t"), 0)  # type: ignore[arg-type]
    assert log.size_bytes == len(batch)


async def test_producer_fields_are_stored_as_given(harness: Harness) -> None:
    harness.create("t")
    response = await harness.produce("t", 0, make_batch([b"a"], producer_id=42, producer_epoch=3, base_sequence=0))
    assert response.error_code == 0
    stored = next(harness.store.log(harness.catalog.get("t"), 0).batches())  # type: ignore[arg-type]
    header = stored.header()
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (42, 3, 0)


async def test_zstd_needs_produce_v7(harness: Harness) -> None:
    harness.create("t")
    assert (await harness.produce("t", 0, make_batch([b"a"], codec=4), version=6)).error_code == 76
    assert (await harness.produce("t", 0, make_batch([b"a"], codec=4), version=7)).error_code == 0


async def test_message_too_large_uses_the_topic_limit(harness: Harness) -> None:
    batch = make_batch([b"x" * 200])
    harness.create("small", max_message_bytes=str(len(batch) - 1))
    harness.create("fits", max_message_bytes=str(len(batch)))
    too_large = await harness.produce("small", 0, batch)
    assert too_large.error_code == 10
    assert "exceeds the maximum" in too_large.error_message
    assert (await harness.produce("fits", 0, batch)).error_code == 0


async def test_broker_default_message_max_bytes() -> None:
    from coordinator.dataplane import DataPlaneConfig

    h = Harness(DataPlaneConfig(message_max_bytes=100))
    h.create("t")
    assert (await h.produce("t", 0, make_batch([b"x" * 100]))).error_code == 10


async def test_compressed_batches_are_stored_as_received(harness: Harness) -> None:
    harness.create("t")
    for codec in (1, 2, 3, 4):
        batch = make_batch([b"a", b"b"], codec=codec)
        response = await harness.produce("t", 0, batch)
        assert response.error_code == 0
        stored = list(harness.store.log(harness.catalog.get("t"), 0).batches())[-1]  # type: ignore[arg-type]
        assert stored.data[8:12] == batch[8:12] and stored.data[16:] == batch[16:]


async def test_bytes_and_messages_in_are_counted_per_topic(harness: Harness) -> None:
    harness.create("metered")
    batch = make_batch([b"a", b"b", b"c"])
    before_bytes = _sample("coordinator_dataplane_bytes_in_total", topic="metered")
    before_msgs = _sample("coordinator_dataplane_messages_in_total", topic="metered")
    await harness.produce("metered", 0, batch)
    assert _sample("coordinator_dataplane_bytes_in_total", topic="metered") == before_bytes + len(batch)
    assert _sample("coordinator_dataplane_messages_in_total", topic="metered") == before_msgs + 3
    assert _sample("coordinator_dataplane_log_bytes", topic="metered") == len(batch)
    harness.catalog.delete("metered")
    assert REGISTRY.get_sample_value("coordinator_dataplane_log_bytes", {"topic": "metered"}) is None


async def test_kafka_internal_topics_refuse_produce(harness: Harness) -> None:
    harness.create("__consumer_offsets")
    assert (await harness.produce("__consumer_offsets", 0, make_batch([b"a"]))).error_code == 17
