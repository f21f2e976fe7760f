"""Real client libraries bootstrap against the real server process."""

from __future__ import annotations

import asyncio

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.server import ServerProcess

pytestmark = pytest.mark.interop


def test_confluent_admin_create_list_describe(server: ServerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    assert admin.list_topics(timeout=10).topics == {}
    futures = admin.create_topics([NewTopic("payments", num_partitions=6, replication_factor=1)])
    assert futures["payments"].result(10) is None
    metadata = admin.list_topics(timeout=10)
    assert set(metadata.topics) == {"payments"}
    assert sorted(metadata.topics["payments"].partitions) == list(range(6))
    assert all(p.leader == 1 for p in metadata.topics["payments"].partitions.values())
    cluster = admin.describe_cluster().result(10)
    assert [(n.id, n.host, n.port) for n in cluster.nodes] == [(1, "127.0.0.1", server.port)]
    assert cluster.controller.id == 1
    duplicate = admin.create_topics([NewTopic("payments", num_partitions=1, replication_factor=1)])
    with pytest.raises(Exception, match=r"TOPIC_ALREADY_EXISTS|already exists"):
        duplicate["payments"].result(10)


def test_aiokafka_client_bootstraps(server: ServerProcess) -> None:
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.admin import NewTopic as AioNewTopic

    async def scenario() -> tuple[list[str], set[int]]:
        admin = AIOKafkaAdminClient(bootstrap_servers=server.bootstrap)
        await admin.start()
        try:
            await admin.create_topics([AioNewTopic("clicks", num_partitions=2, replication_factor=1)])
            topics = await admin.list_topics()
            description = await admin.describe_cluster()
            return topics, {b["node_id"] for b in description["brokers"]}
        finally:
            await admin.close()

    topics, brokers = asyncio.run(scenario())
    assert "clicks" in topics
    assert brokers == {1}
