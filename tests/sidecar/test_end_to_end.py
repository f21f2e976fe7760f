"""Real clients through the sidecar in front of real upstreams: 10,000 keyed messages produced,
consumed exactly once in the committed view by a committing group across a member restart, read
back directly from the upstream, offsets mirrored there, and no upstream address ever handed out.

Upstreams: librdkafka's 3-broker mock cluster, this project's own embedded server, and Apache Kafka
4.0 (when `KAFKA_HOME` names it; skipped with the reason otherwise).
"""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient

from tests.support.server import ServerProcess

from .conftest import Upstream, free_base_port, sidecar_process
from .support import (
    Committed,
    consume_committing,
    group_offsets,
    high_watermarks,
    metadata_addresses,
    produce_keyed,
    read_directly,
    wait_for,
)

pytestmark = pytest.mark.interop

MESSAGES = 10_000


def sidecar_addresses(server: ServerProcess, base: int, upstream_ids: range) -> set[str]:
    return {server.bootstrap} | {f"127.0.0.1:{base + n}" for n in upstream_ids}


def run_confluent_group(bootstrap: str, topic: str, group: str, protocol: str) -> tuple[Committed, set[str]]:
    """One member consumes about half, closes (a member restart), a new instance finishes."""
    watermarks = high_watermarks(bootstrap, topic)
    total = sum(watermarks.values())
    config = {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
              "enable.auto.commit": False, "group.protocol": protocol}
    if protocol == "classic":
        config.update({"session.timeout.ms": 10000, "heartbeat.interval.ms": 500})
    committed: Committed = []
    seen: set[str] = set()
    for share in (total // 2, total):
        consumer = Consumer(config)
        consumer.subscribe([topic])
        try:
            consume_committing(consumer, committed, lambda share=share: len(committed) >= share)
            seen |= metadata_addresses(consumer)
        finally:
            consumer.close()
    return committed, seen


def assert_exactly_once(committed: Committed) -> None:
    positions = Counter((p, o) for p, o, _ in committed)
    assert [k for k, n in positions.items() if n > 1] == [], "a message was committed twice"
    values = sorted(int(v) for _, _, v in committed)
    assert values == list(range(MESSAGES)), "the committed view is not every message exactly once"


def check_run(server: ServerProcess, base: int, upstream: Upstream, upstream_ids: range, protocol: str) -> None:
    topic, group = f"orders-{protocol}", f"billing-{protocol}"
    ours = sidecar_addresses(server, base, upstream_ids)
    handed = produce_keyed(server.bootstrap, topic, MESSAGES, idempotent=not isinstance(upstream.process, ServerProcess))
    committed, handed_to_consumers = run_confluent_group(server.bootstrap, topic, group, protocol)
    handed |= handed_to_consumers | metadata_addresses(AdminClient({"bootstrap.servers": server.bootstrap}))

    assert_exactly_once(committed)
    assert handed <= ours and not handed & upstream.addresses, f"clients were handed {handed}"
    values = read_directly(upstream.bootstrap, topic, MESSAGES)
    assert sorted(int(v) for v in values) == list(range(MESSAGES)), "the upstream does not hold every message once"
    ends = high_watermarks(upstream.bootstrap, topic)
    assert group_offsets(AdminClient({"bootstrap.servers": server.bootstrap}), group, topic, len(ends)) == ends
    admin = AdminClient({"bootstrap.servers": upstream.bootstrap})
    wait_for(lambda: group_offsets(admin, group, topic, len(ends)) == ends, message="offsets mirrored upstream")


# The topic is created upstream (auto-created by the producer's forwarded Metadata) after the sidecar
# started, and upstream.metadata.max.age.ms is its default 5 minutes: a KIP-848 member gets its
# partitions only because its subscription to an unknown topic makes the sidecar read Metadata at once.
@pytest.mark.parametrize("protocol", ["consumer", pytest.param("classic", marks=pytest.mark.slow)])
def test_confluent_group_through_sidecar_on_mock_cluster(tmp_path, mock_upstream: Upstream, protocol: str) -> None:
    base = free_base_port()
    server = sidecar_process(tmp_path / "sidecar", mock_upstream.bootstrap, base).start()
    try:
        check_run(server, base, mock_upstream, range(1, 4), protocol)
    finally:
        server.stop()


@pytest.mark.slow
def test_confluent_group_through_sidecar_on_embedded_upstream(tmp_path, embedded_upstream: Upstream) -> None:
    base = free_base_port()
    server = sidecar_process(tmp_path / "sidecar", embedded_upstream.bootstrap, base).start()
    try:
        check_run(server, base, embedded_upstream, range(1, 2), "consumer")
        # The group lives on the sidecar only: upstream it is at most a member-less "simple" group
        # holding the mirrored offsets.
        admin = AdminClient({"bootstrap.servers": embedded_upstream.bootstrap})
        described = admin.describe_consumer_groups(["billing-consumer"])["billing-consumer"].result(timeout=10)
        assert not described.members
    finally:
        server.stop()


@pytest.mark.parametrize("protocol", ["consumer", pytest.param("classic", marks=pytest.mark.slow)])
def test_confluent_group_through_sidecar_on_apache_kafka(tmp_path, kafka_upstream: Upstream, protocol: str) -> None:
    """The upstream is the real thing: Apache Kafka 4.0 (KRaft, one broker, node id 1). The group
    lives on the sidecar; the data, and the mirrored offsets, on Kafka."""
    base = free_base_port()
    server = sidecar_process(tmp_path / "sidecar", kafka_upstream.bootstrap, base).start()
    try:
        check_run(server, base, kafka_upstream, range(1, 2), protocol)
    finally:
        server.stop()


def test_aiokafka_group_through_sidecar_on_mock_cluster(tmp_path, mock_upstream: Upstream) -> None:
    aiokafka = pytest.importorskip("aiokafka")
    base = free_base_port()
    server = sidecar_process(tmp_path / "sidecar", mock_upstream.bootstrap, base).start()
    topic, group = "orders-aiokafka", "billing-aiokafka"
    try:
        handed = produce_keyed(server.bootstrap, topic, MESSAGES)
        committed: Committed = []

        async def member(share: int) -> set[str]:
            consumer = aiokafka.AIOKafkaConsumer(topic, bootstrap_servers=server.bootstrap, group_id=group,
                                                 auto_offset_reset="earliest", enable_auto_commit=False)
            await consumer.start()
            try:
                while len(committed) < share:
                    batches = await consumer.getmany(timeout_ms=200, max_records=500)
                    batch = [m for records in batches.values() for m in records]
                    if batch:
                        await consumer.commit()
                        committed.extend((m.partition, m.offset, m.value) for m in batch)
                cluster = consumer._client.cluster
                return {f"{b.host}:{b.port}" for b in cluster.brokers()}
            finally:
                await consumer.stop()

        handed |= asyncio.run(member(MESSAGES // 2))
        handed |= asyncio.run(member(MESSAGES))
        assert_exactly_once(committed)
        ours = sidecar_addresses(server, base, range(1, 4))
        assert handed <= ours and not handed & mock_upstream.addresses, handed
        ends = high_watermarks(mock_upstream.bootstrap, topic)
        admin = AdminClient({"bootstrap.servers": mock_upstream.bootstrap})
        wait_for(lambda: group_offsets(admin, group, topic, len(ends)) == ends, message="offsets mirrored upstream")
    finally:
        server.stop()
