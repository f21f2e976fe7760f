"""Metadata, FindCoordinator, CreateTopics, DeleteTopics and DescribeCluster over a real socket."""

from __future__ import annotations

import uuid

import pytest

from coordinator.node.server import CoordinatorServer
from tests.support.wire import WireClient, request


async def create(client: WireClient, name: str, partitions: int, version: int = 7, **extra):
    topic = {"name": name, "num_partitions": partitions, "replication_factor": -1, "assignments": [], "configs": [], **extra}
    return await client.request(request(19, version, topics=[topic], timeout=5000))


@pytest.mark.asyncio
@pytest.mark.parametrize("version", range(0, 14))
async def test_metadata_every_version_reports_this_node_and_topics(server: CoordinatorServer, client: WireClient, version: int) -> None:
    await create(client, "orders", 3)
    topics = [{"name": "orders", "topic_id": uuid.UUID(int=0)}]
    response = await client.request(request(3, version, topics=topics, allow_auto_topic_creation=False))
    assert [(b.node_id, b.host, b.port) for b in response.brokers] == [(1, "127.0.0.1", server.port)]
    (topic,) = response.topics
    assert topic.error_code == 0
    assert sorted(p.partition_index for p in topic.partitions) == [0, 1, 2]
    assert all(p.leader_id == 1 for p in topic.partitions)
    if version >= 10:
        assert topic.topic_id == server.catalog.get("orders").topic_id
    if version >= 2:
        assert response.cluster_id == "coordinator-embedded"


@pytest.mark.asyncio
async def test_metadata_by_topic_id_and_unknown_id(server: CoordinatorServer, client: WireClient) -> None:
    await create(client, "by-id", 2)
    known = server.catalog.get("by-id").topic_id
    unknown = uuid.uuid4()
    response = await client.request(request(3, 12, topics=[{"name": None, "topic_id": known}, {"name": None, "topic_id": unknown}]))
    first, second = response.topics
    assert (first.error_code, first.name, len(first.partitions)) == (0, "by-id", 2)
    assert (second.error_code, second.topic_id) == (100, unknown)


@pytest.mark.asyncio
async def test_metadata_auto_creation_rules(server: CoordinatorServer, client: WireClient) -> None:
    response = await client.request(request(3, 12, topics=[{"name": "auto"}], allow_auto_topic_creation=False))
    assert response.topics[0].error_code == 3
    assert server.catalog.get("auto") is None
    response = await client.request(request(3, 12, topics=[{"name": "auto"}], allow_auto_topic_creation=True))
    assert response.topics[0].error_code == 0
    assert server.catalog.get("auto").num_partitions == 1
    response = await client.request(request(3, 12, topics=[{"name": "bad name!"}], allow_auto_topic_creation=True))
    assert response.topics[0].error_code == 17
    # v1+: null topics = all; empty = none
    assert {t.name for t in (await client.request(request(3, 5, topics=None))).topics} == {"auto"}
    assert (await client.request(request(3, 5, topics=[]))).topics == ()


@pytest.mark.asyncio
@pytest.mark.parametrize("version", range(0, 7))
async def test_find_coordinator_points_groups_at_this_node(server: CoordinatorServer, client: WireClient, version: int) -> None:
    if version >= 4:
        response = await client.request(request(10, version, key_type=0, coordinator_keys=["g1", "g2"]))
        assert [(c.key, c.node_id, c.host, c.port, c.error_code) for c in response.coordinators] == [
            ("g1", 1, "127.0.0.1", server.port, 0), ("g2", 1, "127.0.0.1", server.port, 0)]
    else:
        response = await client.request(request(10, version, key="g1", key_type=0))
        assert (response.error_code, response.node_id, response.host, response.port) == (0, 1, "127.0.0.1", server.port)


@pytest.mark.asyncio
async def test_find_coordinator_transaction_and_bad_key_types(server: CoordinatorServer, client: WireClient) -> None:
    # Transaction keys lead to this node, whose InitProducerId refuses transactional ids (fatal
    # for clients) rather than COORDINATOR_NOT_AVAILABLE, which they retry until they time out.
    response = await client.request(request(10, 3, key="txn", key_type=1))
    assert (response.error_code, response.node_id, response.port) == (0, 1, server.port)
    response = await client.request(request(10, 5, key_type=2, coordinator_keys=["s"]))
    assert response.coordinators[0].error_code == 42
    response = await client.request(request(10, 5, key_type=7, coordinator_keys=["s"]))
    assert response.coordinators[0].error_code == 42


@pytest.mark.asyncio
async def test_create_topics_errors_match_kafka(server: CoordinatorServer, client: WireClient) -> None:
    response = await create(client, "fine", 4)
    (result,) = response.topics
    assert (result.error_code, result.num_partitions, result.replication_factor) == (0, 4, 1)
    assert result.topic_id == server.catalog.get("fine").topic_id
    assert (await create(client, "fine", 4)).topics[0].error_code == 36
    assert (await create(client, "x" * 250, 1)).topics[0].error_code == 17
    assert (await create(client, "zero", 0)).topics[0].error_code == 37
    assert (await create(client, "rf3", 1, replication_factor=3)).topics[0].error_code == 38
    default = await create(client, "defaulted", -1)
    assert default.topics[0].num_partitions == 1
    dup_topic = {"name": "dup", "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}
    dup = await client.request(request(19, 7, topics=[dup_topic, dup_topic], timeout=5000))
    assert [t.error_code for t in dup.topics] == [42]
    assert server.catalog.get("dup") is None
    validate = await client.request(request(19, 7, topics=[{**dup_topic, "name": "dry"}], timeout=5000, validate_only=True))
    assert validate.topics[0].error_code == 0 and server.catalog.get("dry") is None


@pytest.mark.asyncio
async def test_delete_topics_by_name_and_id(server: CoordinatorServer, client: WireClient) -> None:
    await create(client, "gone", 1)
    await create(client, "gone-by-id", 1)
    by_id = server.catalog.get("gone-by-id").topic_id
    response = await client.request(request(20, 5, topic_names=["gone", "never"], timeout=1000))
    assert [(r.name, r.error_code) for r in response.responses] == [("gone", 0), ("never", 3)]
    response = await client.request(request(20, 6, topics=[{"name": None, "topic_id": by_id}, {"name": None, "topic_id": uuid.uuid4()}], timeout=1000))
    assert [r.error_code for r in response.responses] == [0, 100]
    assert len(server.catalog) == 0


@pytest.mark.asyncio
@pytest.mark.parametrize("version", [0, 1, 2])
async def test_describe_cluster(server: CoordinatorServer, client: WireClient, version: int) -> None:
    response = await client.request(request(60, version, include_cluster_authorized_operations=False))
    assert response.error_code == 0
    assert [(b.broker_id, b.host, b.port) for b in response.brokers] == [(1, "127.0.0.1", server.port)]
    assert response.controller_id == 1


@pytest.mark.asyncio
async def test_describe_cluster_refuses_the_controllers_endpoint_with_kafkas_code(client: WireClient) -> None:
    """EndpointType 2 (controllers) asked of a broker: UNSUPPORTED_ENDPOINT_TYPE, which is 115 in
    Kafka's Errors (it was once answered as 120, TRANSACTION_ABORTABLE)."""
    from kio.schema.errors import ErrorCode as KioErrorCode

    response = await client.request(request(60, 1, include_cluster_authorized_operations=False, endpoint_type=2))
    assert response.error_code == KioErrorCode.unsupported_endpoint_type == 115
    assert response.brokers == ()


@pytest.mark.asyncio
async def test_topics_survive_a_restart_with_their_ids(tmp_path) -> None:
    from tests.runtime.conftest import make_config

    first = CoordinatorServer(make_config(tmp_path))
    await first.start()
    client = await WireClient.connect(first.port)
    await create(client, "durable", 2)
    topic_id = first.catalog.get("durable").topic_id
    await client.close()
    await first.stop()
    second = CoordinatorServer(make_config(tmp_path))
    await second.start()
    try:
        assert second.catalog.get("durable").topic_id == topic_id
    finally:
        await second.stop()
