"""Real client libraries produce and consume through the real server process."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.server import ServerProcess, running_server

pytestmark = pytest.mark.interop

N = 60


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    with running_server(tmp_path) as process:
        yield process


def _create(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])[topic].result(10)


def test_confluent_kafka_round_trip(server: ServerProcess) -> None:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

    _create(server.bootstrap, "orders", 3)
    producer = Producer(
        {
            "bootstrap.servers": server.bootstrap,
            "enable.idempotence": False,
            "acks": "all",
            "linger.ms": 5,
            "compression.type": "lz4",
        }
    )
    delivered: list[tuple[int, int]] = []

    def on_delivery(err: object, msg: object) -> None:
        assert err is None, err
        delivered.append((msg.partition(), msg.offset()))  # type: ignore[attr-defined]

    for i in range(N):
        producer.produce("orders", key=b"k%d" % i, value=b"v%d" % i, partition=i % 3, on_delivery=on_delivery)
    assert producer.flush(10) == 0
    assert sorted(delivered) == sorted((p, o) for p in range(3) for o in range(N // 3))

    consumer = Consumer(
        {
            "bootstrap.servers": server.bootstrap,
            "group.id": "dataplane-interop",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
        }
    )
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition("orders", 1), timeout=10)
        assert (low, high) == (0, N // 3)
        consumer.assign([TopicPartition("orders", p, OFFSET_BEGINNING) for p in range(3)])
        seen: dict[int, list[bytes]] = {0: [], 1: [], 2: []}
        deadline = 200
        while sum(map(len, seen.values())) < N and deadline:
            deadline -= 1
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            seen[msg.partition()].append(msg.value())
        for p in range(3):
            assert seen[p] == [b"v%d" % i for i in range(p, N, 3)]
    finally:
        consumer.close()


def test_aiokafka_round_trip_and_offsets_for_times(server: ServerProcess) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    _create(server.bootstrap, "clicks", 1)

    async def scenario() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=server.bootstrap, compression_type="gzip")
        await producer.start()
        try:
            for i in range(N):
                await producer.send_and_wait("clicks", b"c%d" % i, partition=0, timestamp_ms=1_000_000 + i)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=server.bootstrap, fetch_max_wait_ms=100)
        await consumer.start()
        try:
            tp = TopicPartition("clicks", 0)
            consumer.assign([tp])
            found = await consumer.offsets_for_times({tp: 1_000_000 + 10})
            assert found[tp] is not None and found[tp].offset == 10
            assert (await consumer.end_offsets([tp]))[tp] == N
            await consumer.seek_to_beginning(tp)
            values: list[bytes] = []
            while len(values) < N:
                batches = await asyncio.wait_for(consumer.getmany(timeout_ms=1000), timeout=10)
                values.extend(m.value for m in batches.get(tp, []))
            assert values == [b"c%d" % i for i in range(N)]
        finally:
            await consumer.stop()

    asyncio.run(scenario())


def test_aiokafka_idempotent_producer_gets_a_producer_id_and_its_batches_are_stored(server: ServerProcess) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    _create(server.bootstrap, "idempotent", 1)

    async def scenario() -> list[bytes]:
        producer = AIOKafkaProducer(bootstrap_servers=server.bootstrap, enable_idempotence=True)
        await producer.start()
        try:
            offsets = [(await producer.send_and_wait("idempotent", b"i%d" % i, partition=0)).offset for i in range(N)]
        finally:
            await producer.stop()
        assert offsets == list(range(N))
        consumer = AIOKafkaConsumer(bootstrap_servers=server.bootstrap, fetch_max_wait_ms=100, auto_offset_reset="earliest")
        await consumer.start()
        try:
            consumer.assign([TopicPartition("idempotent", 0)])
            values: list[bytes] = []
            async with asyncio.timeout(20):
                while len(values) < N:
                    for records in (await consumer.getmany(timeout_ms=500)).values():
                        values.extend(r.value for r in records)
            return values
        finally:
            await consumer.stop()

    assert asyncio.run(scenario()) == [b"i%d" % i for i in range(N)]
