"""The log on the cluster, against a real Apache Kafka 4.0: the log topic's shape, committed entries
read back `read_committed`, and a new owner fencing the old one (issue 27, points 1 and 3).

Each test uses a topic of its own on the session's broker.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from coordinator.clusterlog.batch import LogRecord
from coordinator.clusterlog.cluster import LogCluster
from coordinator.clusterlog.reader import PartitionReader
from coordinator.clusterlog.topic import LogTopicError, ensure_log_topic, replication_for
from coordinator.clusterlog.writer import Fenced, PartitionWriter, transactional_id
from tests.support.kafka import KafkaBroker
from tests.support.polling import eventually


async def committed(cluster: LogCluster, topic: str, partition: int, count: int) -> list[LogRecord]:
    """The partition's committed records once there are `count` of them: EndTxn answers when the
    commit is decided, and its markers (which make the records readable) follow soon after."""
    reader = PartitionReader(cluster, topic, partition)

    async def read() -> list[LogRecord] | None:
        records, _ = await reader.read_to_end(0)
        return records if len(records) >= count else None

    records: list[LogRecord] = await eventually(read, message=f"{count} committed records in {topic}-{partition}")
    return records


def fresh(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def address(broker: KafkaBroker) -> tuple[str, int]:
    return ("127.0.0.1", broker.port)


@pytest_asyncio.fixture
async def cluster(kafka_broker: KafkaBroker) -> AsyncIterator[LogCluster]:
    log_cluster = LogCluster([address(kafka_broker)])
    try:
        yield log_cluster
    finally:
        log_cluster.close()


def create_directly(broker: KafkaBroker, name: str, partitions: int, config: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1, config=config)])[name].result(30)


def topic_config(broker: KafkaBroker, name: str) -> dict[str, str]:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, name)
    entries = admin.describe_configs([resource])[resource].result(30)
    return {key: entry.value for key, entry in entries.items()}


def test_replication_follows_the_cluster_size() -> None:
    assert [replication_for(n) for n in (1, 2, 3, 5)] == [(1, 1), (2, 2), (3, 2), (3, 2)]


@pytest.mark.asyncio
async def test_the_log_topic_is_created_compacted_with_one_partition_per_log_partition(
        cluster: LogCluster, kafka_broker: KafkaBroker) -> None:
    name = fresh("coordinator-log")
    layout = await ensure_log_topic(cluster, name, 5)
    assert layout.partitions == 5 and all(leader == 1 for leader in layout.leaders.values())
    config = topic_config(kafka_broker, name)
    assert (config["cleanup.policy"], config["min.insync.replicas"]) == ("compact", "1")
    # A second instance starting against the same topic accepts it as it is.
    assert (await ensure_log_topic(cluster, name, 5)).partitions == 5


@pytest.mark.asyncio
async def test_a_topic_with_another_partition_count_is_refused_in_one_line(
        cluster: LogCluster, kafka_broker: KafkaBroker) -> None:
    name = fresh("coordinator-log")
    create_directly(kafka_broker, name, 3, {"cleanup.policy": "compact"})
    with pytest.raises(LogTopicError) as refused:
        await ensure_log_topic(cluster, name, 5)
    message = str(refused.value)
    assert "\n" not in message and f"{name} has 3 partitions" in message and "is 5" in message


@pytest.mark.asyncio
async def test_a_topic_that_is_not_only_compacted_is_refused_in_one_line(
        cluster: LogCluster, kafka_broker: KafkaBroker) -> None:
    name = fresh("coordinator-log")
    create_directly(kafka_broker, name, 5, {"cleanup.policy": "compact,delete"})
    with pytest.raises(LogTopicError, match=r"cleanup\.policy=compact,delete; it must be exactly 'compact'"):
        await ensure_log_topic(cluster, name, 5)


@pytest.mark.asyncio
async def test_committed_entries_read_back_in_order_with_their_tombstones(cluster: LogCluster) -> None:
    name = fresh("coordinator-log")
    await ensure_log_topic(cluster, name, 2)
    writer = PartitionWriter(cluster, name, 1, transactional_id(name, 1))
    await writer.claim()
    first = await writer.append([(b"group:a", b"v1"), (b"group:b", b"v1")])
    # Group commit: two requests' entries, one transaction.
    await writer.write([(b"group:a", b"v2")])
    await writer.write([(b"group:b", None)])
    await writer.commit()
    records = await committed(cluster, name, 1, 4)
    _, end = await PartitionReader(cluster, name, 1).read_to_end(0)
    assert [(r.key, r.value) for r in records] == [
        (b"group:a", b"v1"), (b"group:b", b"v1"), (b"group:a", b"v2"), (b"group:b", None)]
    assert records[0].offset == first == 0
    assert end > records[-1].offset  # past the commit marker


@pytest.mark.asyncio
async def test_an_aborted_transaction_is_never_read_and_the_writer_goes_on(cluster: LogCluster) -> None:
    name = fresh("coordinator-log")
    await ensure_log_topic(cluster, name, 1)
    writer = PartitionWriter(cluster, name, 0, transactional_id(name, 0))
    await writer.claim()
    await writer.write([(b"k", b"aborted")])
    await writer.abort()
    await writer.append([(b"k", b"kept")])
    records = await committed(cluster, name, 0, 1)
    assert [r.value for r in records] == [b"kept"]


@pytest.mark.asyncio
async def test_a_new_owner_fences_the_old_one_whose_open_transaction_never_becomes_visible(
        kafka_broker: KafkaBroker, cluster: LogCluster) -> None:
    name = fresh("coordinator-log")
    await ensure_log_topic(cluster, name, 1)
    old_cluster = LogCluster([address(kafka_broker)])  # the old owner: another instance, its own connections
    try:
        old = PartitionWriter(old_cluster, name, 0, transactional_id(name, 0))
        await old.claim()
        await old.append([(b"g", b"acknowledged by the old owner")])
        await old.write([(b"g", b"written, never committed")])

        new = PartitionWriter(cluster, name, 0, transactional_id(name, 0))
        await new.claim()  # fences the old owner and aborts its open transaction
        assert new.producer_id == old.producer_id and new.producer_epoch > old.producer_epoch

        with pytest.raises(Fenced, match=r"PRODUCER_FENCED|INVALID_PRODUCER_EPOCH"):
            await old.commit()
        assert not old.claimed
        await new.append([(b"g", b"acknowledged by the new owner")])

        records = await committed(cluster, name, 0, 2)
        assert [r.value for r in records] == [b"acknowledged by the old owner", b"acknowledged by the new owner"]
    finally:
        old_cluster.close()


@pytest.mark.asyncio
async def test_a_fenced_owner_cannot_write_at_all(kafka_broker: KafkaBroker, cluster: LogCluster) -> None:
    name = fresh("coordinator-log")
    await ensure_log_topic(cluster, name, 1)
    old_cluster = LogCluster([address(kafka_broker)])
    try:
        old = PartitionWriter(old_cluster, name, 0, transactional_id(name, 0))
        await old.claim()
        new = PartitionWriter(cluster, name, 0, transactional_id(name, 0))
        await new.claim()
        with pytest.raises(Fenced):
            await old.append([(b"g", b"from a zombie")])  # its AddPartitionsToTxn carries the old epoch
        await new.append([(b"g", b"from the owner")])
        records = await committed(cluster, name, 0, 1)
        assert [r.value for r in records] == [b"from the owner"]
    finally:
        old_cluster.close()
