"""The shard's sink over real partition writers on Apache Kafka 4.0: entries of several groups go to
their partitions' transactions and become durable together once every transaction committed; a
round whose partition was claimed by another owner is refused (nothing of it acknowledged), the
fenced partition is reported, and what committed stays readable (issue 27, points 2 and 3)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from coordinator.clusterlog.cluster import LogCluster
from coordinator.clusterlog.reader import PartitionReader
from coordinator.clusterlog.sink import WIDE_PARTITION, UpstreamSink
from coordinator.clusterlog.topic import ensure_log_topic
from coordinator.clusterlog.writer import PartitionWriter, transactional_id
from coordinator.core.offsets import offset_commit_record
from coordinator.core.records import (
    CoordinatorEpochKey,
    CoordinatorEpochValue,
    OffsetCommitValue,
    Record,
    encode_record,
)
from coordinator.shards.placement import partition_for
from protocol.errors import ErrorCode
from tests.support.kafka import KafkaBroker

PARTITIONS = 3


@pytest_asyncio.fixture
async def cluster(kafka_broker: KafkaBroker) -> AsyncIterator[LogCluster]:
    log_cluster = LogCluster([("127.0.0.1", kafka_broker.port)])
    try:
        yield log_cluster
    finally:
        log_cluster.close()


def group_on(partition: int) -> str:
    return next(f"g{i}" for i in range(10_000) if partition_for(f"g{i}", PARTITIONS) == partition)


def commit(group: str, offset: int) -> list[tuple[int, bytes, bytes | None]]:
    return [encode_record(offset_commit_record(group, "t", 0, OffsetCommitValue(offset)))]


class Watcher:
    def __init__(self) -> None:
        self.durable: list[int] = []
        self.refused: list[tuple[int, ErrorCode]] = []
        self.fenced: list[int] = []


async def committed_count(cluster: LogCluster, topic: str, partition: int) -> int:
    records, _ = await PartitionReader(cluster, topic, partition).read_to_high_watermark(0)
    return len(records)


@pytest.mark.asyncio
async def test_a_round_is_durable_once_every_partition_committed_and_a_fenced_one_is_refused(
        cluster: LogCluster) -> None:
    topic, instances = f"sink-{uuid.uuid4().hex[:8]}", f"sink-{uuid.uuid4().hex[:8]}"
    await ensure_log_topic(cluster, topic, PARTITIONS)
    writers = {p: PartitionWriter(cluster, topic, p, transactional_id(instances, p), retry_for_s=5)
               for p in range(PARTITIONS)}
    for writer in writers.values():
        await writer.claim()
    watcher = Watcher()
    sink = UpstreamSink(writers.get, lambda g: partition_for(g, PARTITIONS),
                        lambda p, why: watcher.fenced.append(p), retry_for_s=1)
    sink.watch(watcher.durable.append, lambda first, code: watcher.refused.append((first, code)))
    sink.start()
    try:
        # Three entries of three partitions, and a record of no group (partition 0): one round.
        offsets = [sink.append(commit(group_on(p), 10 + p), 0) for p in range(PARTITIONS)]
        offsets.append(sink.append([encode_record(Record(CoordinatorEpochKey(), CoordinatorEpochValue(1, "w")))], 0))
        assert offsets == [0, 1, 2, 3] and sink.durable_end == 0
        await sink.settled()
        assert sink.durable_end == 4 and watcher.durable[-1] == 4 and not watcher.refused
        counts = [await committed_count(cluster, topic, p) for p in range(PARTITIONS)]
        assert counts == [2 if p == WIDE_PARTITION else 1 for p in range(PARTITIONS)]

        # Another owner claims partition 1: the next round touching it is refused whole.
        usurper = PartitionWriter(cluster, topic, 1, transactional_id(instances, 1), retry_for_s=5)
        await usurper.claim()
        first = sink.append(commit(group_on(0), 20), 0)
        sink.append(commit(group_on(1), 21), 0)
        await sink.settled()
        assert watcher.fenced == [1]
        assert watcher.refused == [(first, ErrorCode.NOT_COORDINATOR)]
        assert sink.durable_end == first + 2 and watcher.durable[-1] == 4  # nothing of it released
        # Partition 0's part committed (a refused reply may have committed); partition 1's did not.
        assert await committed_count(cluster, topic, 0) == 3
        assert await committed_count(cluster, topic, 1) == 1
    finally:
        await sink.close()

