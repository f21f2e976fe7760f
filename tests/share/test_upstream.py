"""Sidecar mode's record source: share partitions read `read_committed` from the upstream's leaders
over the sidecar's upstream client. Against a real Apache Kafka 4.0 (`kafka_broker`): committed and
aborted transactions, the cache shared by concurrent readers; against a real coordinator in embedded
mode as the upstream, stopped and started again: a lost leader is a clear retriable error, and the
next read finds it again."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import pytest_asyncio
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from coordinator.core.share.acquisition import AcquiredRange
from coordinator.core.share.config import AutoOffsetReset
from coordinator.core.share.records import RecordState
from coordinator.share.acquire import acquire_read, read_for
from coordinator.share.cache import BatchCache
from coordinator.share.source import (
    OffsetOutOfRange,
    PartitionRead,
    PartitionRef,
    SourceUnavailable,
)
from coordinator.share.starts import UpstreamStartOffsets
from coordinator.share.upstream import UpstreamSource
from coordinator.sidecar.cluster import UpstreamCluster
from protocol.errors import ErrorCode
from tests.core.share.twin import Twin
from tests.support.kafka import KafkaBroker
from tests.support.polling import eventually
from tests.support.server import ServerProcess

pytestmark = pytest.mark.asyncio


@pytest_asyncio.fixture
async def kafka_cluster(kafka_broker: KafkaBroker) -> AsyncIterator[UpstreamCluster]:
    async with sidecar_view(kafka_broker.port) as cluster:
        yield cluster


@asynccontextmanager
async def sidecar_view(port: int) -> AsyncIterator[UpstreamCluster]:
    """The sidecar's view of an upstream on 127.0.0.1:`port`, started and ready."""
    cluster = UpstreamCluster([("127.0.0.1", port)], 300000, lambda brokers: None)
    cluster.start()
    try:
        await asyncio.wait_for(cluster.ready.wait(), 30)
        yield cluster
    finally:
        await cluster.stop()


def create_topic(bootstrap: str, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=1)])[name].result(30)


def produce_plain(bootstrap: str, topic: str, values: list[bytes], compression: str = "none") -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "compression.type": compression})
    for value in values:
        producer.produce(topic, value, partition=0)
    assert producer.flush(30) == 0


def produce_transaction(bootstrap: str, topic: str, values: list[bytes], commit: bool) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"tx-{uuid.uuid4().hex[:8]}",
                         "linger.ms": 50})
    producer.init_transactions(30)
    producer.begin_transaction()
    for value in values:
        producer.produce(topic, value, partition=0)
    assert producer.flush(30) == 0
    if commit:
        producer.commit_transaction(30)
    else:
        producer.abort_transaction(30)


async def read_all(source: UpstreamSource | BatchCache, ref: PartitionRef, end: int) -> PartitionRead:
    """A read from 0 once the last stable offset reached `end` (a transaction's marker is written
    after EndTxn answers)."""
    async def done() -> PartitionRead | None:
        read = await source.read(ref, 0, 1 << 20)
        return read if read.last_stable_offset >= end and read.end_offset >= end else None

    result: PartitionRead = await eventually(done, timeout=30, message=f"the log read up to {end}")
    return result


async def test_a_committed_read_marks_the_batches_of_an_aborted_transaction(
        kafka_cluster: UpstreamCluster, kafka_broker: KafkaBroker) -> None:
    topic = f"queue-{uuid.uuid4().hex[:8]}"
    create_topic(kafka_broker.bootstrap, topic)
    await asyncio.wait_for(kafka_cluster.refreshed(), 30)
    layout = kafka_cluster.catalog.get(topic)
    assert layout is not None
    ref = PartitionRef(layout.topic_id, topic, 0)
    source = UpstreamSource(kafka_cluster)
    # Each transaction's marker is written after EndTxn answers: wait for it, so offsets are as written.
    produce_plain(kafka_broker.bootstrap, topic, [b"p0", b"p1", b"p2"])                    # 0-2
    produce_transaction(kafka_broker.bootstrap, topic, [b"a3", b"a4"], commit=False)       # 3-4, ABORT at 5
    await read_all(source, ref, 6)
    produce_transaction(kafka_broker.bootstrap, topic, [b"c6", b"c7"], commit=True)        # 6-7, COMMIT at 8
    await read_all(source, ref, 9)
    produce_plain(kafka_broker.bootstrap, topic, [b"p9"])                                  # 9

    read = await read_all(source, ref, 10)
    assert read.offsets() == [(0, 2), (3, 4), (5, 5), (6, 7), (8, 8), (9, 9)]
    assert read.aborted_ranges() == [(3, 4)], "the aborted transaction's batch, and only it"
    assert [b.base_offset for b in read.batches if b.control] == [5, 8]
    assert (read.log_start_offset, read.high_watermark, read.last_stable_offset) == (0, 10, 10)

    twin = Twin()
    got = acquire_read(twin.p, "member-a", read, 100, 0, twin.config)
    twin.log_records(got.records)
    assert got.acquired == [AcquiredRange(0, 2, 1), AcquiredRange(5, 9, 1)], "markers stay, acked as GAP"
    assert got.archived_aborted == 2
    assert [twin.p.offsets[o].state for o in (3, 4)] == [RecordState.ARCHIVED] * 2
    assert [b.base_offset for b in got.batches] == [0, 5, 6, 8, 9], "the aborted batch is not sent"

    kafka_cluster.api_ranges[1] = (0, 4)  # an upstream whose newest Fetch is v4 (read_committed's first)
    old = await source.read(ref, 0, 1 << 20)
    assert old.batches == read.batches and old.last_stable_offset == 10
    assert old.log_start_offset == -1, "v4 answers no log start offset"
    kafka_cluster.api_ranges[1] = (0, 3)
    with pytest.raises(SourceUnavailable) as unsupported:
        await source.read(ref, 0, 1 << 20)
    assert unsupported.value.code == ErrorCode.UNSUPPORTED_VERSION


async def test_concurrent_readers_of_one_partition_share_one_upstream_fetch(
        kafka_cluster: UpstreamCluster, kafka_broker: KafkaBroker) -> None:
    topic = f"queue-{uuid.uuid4().hex[:8]}"
    create_topic(kafka_broker.bootstrap, topic)
    produce_plain(kafka_broker.bootstrap, topic, [b"v%d" % i for i in range(20)], compression="zstd")
    ref = PartitionRef(uuid.uuid4(), topic, 0)
    await read_all(UpstreamSource(kafka_cluster), ref, 20)
    cache = BatchCache(UpstreamSource(kafka_cluster), 1 << 20)
    reads = await asyncio.gather(*(cache.read(ref, 0, 1 << 20) for _ in range(5)))
    assert cache.misses == 1 and cache.hits == 4
    assert all(r.batches == reads[0].batches for r in reads) and reads[0].end_offset == 20
    codecs = {int.from_bytes(b.data[21:23], "big") & 0x07 for b in reads[0].batches}  # attributes, bits 0-2
    assert codecs == {4}, "zstd batches, passed on as they are"


async def test_unknown_topics_and_offsets_past_the_log_are_refused_with_kafkas_answers(
        kafka_cluster: UpstreamCluster, kafka_broker: KafkaBroker) -> None:
    source = UpstreamSource(kafka_cluster)
    with pytest.raises(SourceUnavailable) as unknown:
        await source.read(PartitionRef(uuid.uuid4(), f"absent-{uuid.uuid4().hex[:8]}", 0), 0, 1024)
    assert unknown.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and "\n" not in str(unknown.value)
    topic = f"queue-{uuid.uuid4().hex[:8]}"
    create_topic(kafka_broker.bootstrap, topic)
    produce_plain(kafka_broker.bootstrap, topic, [b"only"])
    ref = PartitionRef(uuid.uuid4(), topic, 0)
    await read_all(source, ref, 1)
    with pytest.raises(OffsetOutOfRange) as out:
        await source.read(ref, 50, 1024)
    assert out.value.log_start_offset == 0


async def test_a_stopped_upstream_is_a_retriable_error_and_its_return_is_found(tmp_path: Path) -> None:
    upstream = ServerProcess(tmp_path / "upstream", overrides={"topics": "orders:1"})
    try:
        upstream.start()
        produce_plain(upstream.bootstrap, "orders", [b"o%d" % i for i in range(5)])
        async with sidecar_view(upstream.port) as cluster:
            source = UpstreamSource(cluster)
            ref = PartitionRef(uuid.uuid4(), "orders", 0)
            assert (await read_all(source, ref, 5)).end_offset == 5

            upstream.kill()
            twin = Twin()
            with pytest.raises(SourceUnavailable) as lost:
                await read_for(source, twin.p, ref, 1 << 20)
            assert lost.value.code == ErrorCode.LEADER_NOT_AVAILABLE
            assert "orders-0" in str(lost.value) and "\n" not in str(lost.value)
            with pytest.raises(SourceUnavailable):  # the leader was forgotten: looked up again, still down
                await source.read(ref, 0, 1 << 20)

            upstream.start()
            read = await eventually(lambda: _read_or_none(source, ref), timeout=30, message="the upstream back")
            assert read.end_offset == 5
    finally:
        upstream.stop()


async def _read_or_none(source: UpstreamSource, ref: PartitionRef) -> PartitionRead | None:
    try:
        return await source.read(ref, 0, 1 << 20)
    except SourceUnavailable:
        return None


async def test_the_wait_for_an_append_ends_when_a_record_arrives_and_start_offsets_come_from_list_offsets(
        kafka_cluster: UpstreamCluster, kafka_broker: KafkaBroker) -> None:
    topic = f"queue-{uuid.uuid4().hex[:8]}"
    create_topic(kafka_broker.bootstrap, topic)
    await asyncio.wait_for(kafka_cluster.refreshed(), 30)
    layout = kafka_cluster.catalog.get(topic)
    assert layout is not None
    ref = PartitionRef(layout.topic_id, topic, 0)
    source = UpstreamSource(kafka_cluster)
    hour_ago = int(time.time() * 1000) - 3_600_000
    producer = Producer({"bootstrap.servers": kafka_broker.bootstrap, "linger.ms": 5})
    for i in range(3):  # 0-2 written two hours ago, 3-4 now
        producer.produce(topic, b"old", partition=0, timestamp=hour_ago - 3_600_000 + i)
    assert producer.flush(30) == 0
    produce_plain(kafka_broker.bootstrap, topic, [b"new-3", b"new-4"])
    await read_all(source, ref, 5)

    def starts(reset: str) -> UpstreamStartOffsets:
        return UpstreamStartOffsets(kafka_cluster.catalog, source, AutoOffsetReset.parse(reset))

    assert starts("earliest")(ref.topic_id, 0) is None, "only the upstream knows: looked up after the answer"
    assert await starts("earliest").lookup(ref.topic_id, 0) == 0
    assert await starts("latest").lookup(ref.topic_id, 0) == 5
    assert await starts("by_duration:PT1H").lookup(ref.topic_id, 0) == 3, "the first record of the last hour"
    assert await starts("by_duration:PT1M").lookup(ref.topic_id, 0) == 3
    assert await starts("earliest").lookup(uuid.uuid4(), 0) is None, "a topic the upstream does not have"

    # Nothing past what was read: the whole wait, for each of five waiting requests, which share one
    # poll of the partition (a one-byte read per 50 ms), not one each.
    reads = 0
    read = source.read

    async def counted(*args: object) -> PartitionRead:
        nonlocal reads
        reads += 1
        return await read(*args)  # type: ignore[arg-type]

    source.read = counted  # type: ignore[method-assign]
    started = time.monotonic()
    await asyncio.gather(*(source.wait_for_append([ref], 0.5) for _ in range(5)))
    assert time.monotonic() - started >= 0.5
    assert 1 <= reads <= 12, reads
    source.read = read  # type: ignore[method-assign]
    waiting = asyncio.create_task(source.wait_for_append([ref], 20))
    await asyncio.sleep(0)  # the wait has begun: what comes now is an append it must see
    started = time.monotonic()
    await asyncio.to_thread(produce_plain, kafka_broker.bootstrap, topic, [b"new-5"])
    await asyncio.wait_for(waiting, 20)
    assert time.monotonic() - started < 10, "ended by the append, not by the 20 s bound"
