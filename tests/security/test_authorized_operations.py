"""Authorized-operations fields (KIP-430; issue 17, point 3) over a real socket, raw kio requests:
Metadata (IncludeClusterAuthorizedOperations v8–10, IncludeTopicAuthorizedOperations), DescribeCluster,
DescribeGroups and ConsumerGroupDescribe (IncludeAuthorizedOperations). Kafka's bitfields: bit n for
the AclOperation whose code is n, over the operations Kafka supports for the resource type;
-2147483648 when not asked for."""

from __future__ import annotations

import pytest

from tests.security.conftest import connect
from tests.security.test_authorization import (
    ALTER,
    CLUSTER,
    CREATE,
    DELETE,
    DESCRIBE,
    GROUP,
    READ,
    TOPIC,
    TOPIC_DENIED,
    WRITE,
    binding,
    commit,
    req,
    secured,  # noqa: F401 - the fixture
)

NOT_REQUESTED = -2147483648
CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = 9, 10, 11, 12
EVERY_TOPIC_OPERATION = sum(1 << op for op in (READ, WRITE, CREATE, DESCRIBE, DELETE, ALTER, DESCRIBE_CONFIGS,
                                               ALTER_CONFIGS))
EVERY_CLUSTER_OPERATION = sum(1 << op for op in (CREATE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS,
                                                 IDEMPOTENT_WRITE, ALTER, DESCRIBE))
EVERY_GROUP_OPERATION = sum(1 << op for op in (READ, DESCRIBE, DELETE, DESCRIBE_CONFIGS, ALTER_CONFIGS))


def metadata(version: int, topics, cluster: bool, topic_ops: bool):
    fields = {"topics": topics, "allow_auto_topic_creation": False, "include_topic_authorized_operations": topic_ops}
    if version <= 10:
        fields["include_cluster_authorized_operations"] = cluster
    return req(3, version, **fields)


async def create_topics(client, *names: str) -> None:
    response = await client.request(req(19, 7, topics=[{"name": n, "num_partitions": 1, "replication_factor": 1,
                                                        "assignments": [], "configs": []} for n in names],
                                        timeout=5000, validate_only=False))
    assert [t.error_code for t in response.topics] == [0] * len(names)


@pytest.mark.asyncio
async def test_without_an_authorizer_every_supported_operation(start_server) -> None:
    assert (EVERY_TOPIC_OPERATION, EVERY_CLUSTER_OPERATION, EVERY_GROUP_OPERATION) == (3576, 8096, 3400)
    server = await start_server("PLAINTEXT://127.0.0.1:0")
    client = await connect(server.port)
    try:
        await create_topics(client, "orders")
        answer = await client.request(metadata(10, [{"name": "orders", "topic_id": None}], True, True))
        assert (answer.cluster_authorized_operations, answer.topics[0].topic_authorized_operations) == (
            EVERY_CLUSTER_OPERATION, EVERY_TOPIC_OPERATION)
        answer = await client.request(metadata(12, None, False, False))
        assert [t.topic_authorized_operations for t in answer.topics] == [NOT_REQUESTED]
        answer = await client.request(metadata(9, None, False, True))
        assert answer.cluster_authorized_operations == NOT_REQUESTED
        assert [t.topic_authorized_operations for t in answer.topics] == [EVERY_TOPIC_OPERATION]
        described = await client.request(req(60, 1, include_cluster_authorized_operations=True, endpoint_type=1))
        assert described.cluster_authorized_operations == EVERY_CLUSTER_OPERATION
        described = await client.request(req(60, 1, include_cluster_authorized_operations=False, endpoint_type=1))
        assert described.cluster_authorized_operations == NOT_REQUESTED
        await client.request(commit("simple", "orders"))
        groups = await client.request(req(15, 5, groups=["simple", "unknown"], include_authorized_operations=True))
        assert [g.authorized_operations for g in groups.groups] == [EVERY_GROUP_OPERATION, EVERY_GROUP_OPERATION]
    finally:
        await client.close()


@pytest.mark.asyncio
async def test_with_an_authorizer_the_principals_operations(secured) -> None:  # noqa: F811
    await create_topics(secured.admin, "orders", "secret")
    assert await secured.create(binding(TOPIC, "orders", READ), binding(TOPIC, "orders", ALTER_CONFIGS),
                                binding(CLUSTER, "kafka-cluster", IDEMPOTENT_WRITE)) == [0, 0, 0]
    alice = await secured.login("alice")
    answer = await alice.request(metadata(10, [{"name": "orders", "topic_id": None},
                                               {"name": "secret", "topic_id": None}], True, True))
    # READ implies DESCRIBE, ALTER_CONFIGS implies DESCRIBE_CONFIGS (Kafka's implications).
    orders, secret = answer.topics
    assert orders.topic_authorized_operations == sum(1 << op for op in (READ, DESCRIBE, ALTER_CONFIGS, DESCRIBE_CONFIGS))
    assert (secret.error_code, secret.topic_authorized_operations) == (TOPIC_DENIED, NOT_REQUESTED)
    assert answer.cluster_authorized_operations == 0  # no DESCRIBE on the cluster: nothing shown
    described = await alice.request(req(60, 1, include_cluster_authorized_operations=True, endpoint_type=1))
    assert described.cluster_authorized_operations == 0
    assert await secured.create(binding(CLUSTER, "kafka-cluster", DESCRIBE)) == [0]
    described = await alice.request(req(60, 1, include_cluster_authorized_operations=True, endpoint_type=1))
    assert described.cluster_authorized_operations == (1 << IDEMPOTENT_WRITE) | (1 << DESCRIBE)
    answer = await alice.request(metadata(8, None, True, False))
    assert answer.cluster_authorized_operations == (1 << IDEMPOTENT_WRITE) | (1 << DESCRIBE)
    assert [(t.name, t.topic_authorized_operations) for t in answer.topics] == [("orders", NOT_REQUESTED)]
    # Groups: DescribeGroups and ConsumerGroupDescribe show the principal's group operations.
    await secured.admin.request(commit("app", "orders"))
    joined = await secured.admin.request(req(68, 1, group_id="kip848", member_id="m-1", member_epoch=0,
                                             instance_id=None, rack_id=None, rebalance_timeout=60000,
                                             subscribed_topic_names=["orders"], subscribed_topic_regex=None,
                                             server_assignor=None, topic_partitions=[]))
    assert joined.error_code == 0
    assert await secured.create(binding(GROUP, "app", READ), binding(GROUP, "kip848", DELETE)) == [0, 0]
    groups = await alice.request(req(15, 5, groups=["app"], include_authorized_operations=True))
    assert [(g.error_code, g.authorized_operations) for g in groups.groups] == [(0, (1 << READ) | (1 << DESCRIBE))]
    groups = await alice.request(req(15, 5, groups=["app"], include_authorized_operations=False))
    assert [g.authorized_operations for g in groups.groups] == [NOT_REQUESTED]
    described = await alice.request(req(69, 1, group_ids=["kip848"], include_authorized_operations=True))
    assert [(g.error_code, g.authorized_operations) for g in described.groups] == [(0, (1 << DELETE) | (1 << DESCRIBE))]
