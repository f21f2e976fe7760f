"""What the sidecar tests share: producing and reading back, a committing consumer that records
what it committed, and the addresses clients were handed in Metadata."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

Committed = list[tuple[int, int, bytes]]  # (partition, offset, value) of messages whose commit succeeded


def produce_keyed(bootstrap: str, topic: str, count: int, idempotent: bool = True) -> set[str]:
    """`count` keyed messages; returns the addresses the producer got in Metadata. (The embedded
    upstream has no InitProducerId, so it gets a plain producer.)"""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": idempotent})
    failures: list[Any] = []
    for i in range(count):
        producer.produce(topic, key=f"key-{i % 997}", value=str(i).encode(),
                         on_delivery=lambda err, msg: failures.append(err) if err else None)
        if i % 1000 == 999:
            producer.poll(0)
    assert producer.flush(60) == 0, "messages left unsent"
    assert not failures, failures[:3]
    return metadata_addresses(producer)


def metadata_addresses(client: Producer | Consumer | AdminClient) -> set[str]:
    """host:port of every broker in the Metadata the client received."""
    metadata = client.list_topics(timeout=10)
    return {f"{b.host}:{b.port}" for b in metadata.brokers.values()}


def read_directly(bootstrap: str, topic: str, expected: int, timeout: float = 60.0) -> list[bytes]:
    """Every message of `topic`, read from the given cluster by assignment (no group)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "direct-reader-unused",
                         "enable.auto.commit": False, "enable.partition.eof": False})
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, -2) for p in partitions])  # -2: beginning
        values: list[bytes] = []
        deadline = time.monotonic() + timeout
        while len(values) < expected and time.monotonic() < deadline:
            for msg in consumer.consume(1000, 0.5):
                if not msg.error():
                    values.append(msg.value())
        return values
    finally:
        consumer.close()


def high_watermarks(bootstrap: str, topic: str) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "watermarks-unused"})
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in partitions}
    finally:
        consumer.close()


def group_offsets(admin: AdminClient, group: str, topic: str, partitions: int) -> dict[int, int]:
    """The group's committed offsets for `topic` as the admin's cluster reports them (OffsetFetch
    naming the partitions: librdkafka's mock cluster does not answer an all-topics fetch)."""
    from confluent_kafka import ConsumerGroupTopicPartitions

    asked = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(partitions)])
    future = admin.list_consumer_group_offsets([asked])[group]
    return {tp.partition: tp.offset for tp in future.result(timeout=10).topic_partitions if tp.offset >= 0}


def consume_committing(consumer: Consumer, committed: Committed, stop: Callable[[], bool],
                       timeout: float = 60.0) -> None:
    """Consume and commit after every batch; a batch counts as committed only when its commit
    succeeded (a batch whose commit failed is read again by whoever owns the partition next)."""
    deadline = time.monotonic() + timeout
    while not stop():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out with {len(committed)} committed; assignment "
                                 f"{[tp.partition for tp in consumer.assignment()]}")
        batch = [m for m in consumer.consume(500, 0.2) if not m.error()]
        if not batch:
            continue
        try:
            consumer.commit(asynchronous=False)
        except KafkaException:
            continue
        committed.extend((m.partition(), m.offset(), m.value()) for m in batch)


def wait_for(predicate: Callable[[], Any], timeout: float = 30.0, message: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {message}")
        time.sleep(0.05)
