"""What the sidecar serves, forwards, rewrites and refuses, seen on the wire (raw kio requests) in
front of librdkafka's 3-broker mock cluster."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Iterator
from typing import Any

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.find_coordinator.v3.request import FindCoordinatorRequest
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.txn_offset_commit.v3.request import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)
from kio.static.primitive import i8, i16, i32, i64

from protocol.build import build
from protocol.errors import ErrorCode
from protocol.private import DESCRIBE_GROUP_GENERATIONS
from protocol.schemas import request_schema
from tests.support.server import ServerProcess, wait_until
from tests.support.wire import WireClient

from .conftest import Upstream, free_base_port, sidecar_process, start_mock_cluster, stop_process

pytestmark = pytest.mark.interop

COORDINATOR_NODE_ID = 1_000_000


@pytest.fixture(scope="module")
def sidecar(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, Upstream, int]]:
    proc, bootstrap = start_mock_cluster(3)
    base = free_base_port()
    server = sidecar_process(tmp_path_factory.mktemp("routing") / "data", bootstrap, base)
    try:
        server.start()
        yield server, Upstream(bootstrap, set(bootstrap.split(",")), proc), base
    finally:
        server.stop()
        stop_process(proc)


def call(port: int, request: Any) -> Any:
    async def run() -> Any:
        client = await WireClient.connect(port)
        try:
            return await client.request(request)
        finally:
            await client.close()

    return asyncio.run(run())


def api_ranges(port: int) -> dict[int, tuple[int, int]]:
    response = call(port, ApiVersionsRequest(client_software_name="test", client_software_version="1"))
    assert response.error_code == 0
    return {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in response.api_keys}


def test_api_versions_are_the_upstreams_with_our_group_apis(sidecar) -> None:
    server, _, _ = sidecar
    ours = api_ranges(server.port)
    # The mock cluster serves JoinGroup 0-6 and ConsumerGroupHeartbeat 1-1: the group APIs are ours.
    assert ours[11] == (0, 9) and ours[68] == (0, 1) and ours[69] == (0, 1)
    assert ours[15] == (0, 6) and ours[16] == (0, 5)  # DescribeGroups, ListGroups: the mock has neither
    # Forwarded APIs: the mock's ranges (Produce 0-10, Fetch 0-16, Metadata 0-13), never wider.
    assert ours[0] == (3, 10)  # below 3 there is no schema to rewrite leader hints with
    assert ours[1][1] == 16 and ours[3] == (0, 13)
    assert ours[22] == (0, 4)  # InitProducerId, forwarded untouched
    assert ours[28] == (0, 3)  # TxnOffsetCommit: served here, capped at what the mock's coordinator speaks


def test_metadata_names_only_our_listeners(sidecar) -> None:
    server, _, base = sidecar
    response = call(server.port, MetadataRequest(
        topics=(MetadataRequestTopic(topic_id=None, name="routing-topic"),), allow_auto_topic_creation=True,
        include_topic_authorized_operations=False))
    brokers = {int(b.node_id): (b.host, int(b.port)) for b in response.brokers}
    assert brokers == {1: ("127.0.0.1", base + 1), 2: ("127.0.0.1", base + 2), 3: ("127.0.0.1", base + 3),
                       COORDINATOR_NODE_ID: ("127.0.0.1", server.port)}
    (topic,) = response.topics
    assert topic.error_code == 0 and len(topic.partitions) == 4  # created upstream (the mock's default)
    assert {int(p.leader_id) for p in topic.partitions} <= {1, 2, 3}


def test_every_listener_forwards_and_rewrites(sidecar) -> None:
    server, _, base = sidecar
    for port in (server.port, base + 1, base + 2, base + 3):
        response = call(port, MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                              include_topic_authorized_operations=False))
        addresses = {f"{b.host}:{b.port}" for b in response.brokers}
        assert addresses == {f"127.0.0.1:{base + n}" for n in (1, 2, 3)} | {server.bootstrap}


def test_transaction_coordinator_is_an_upstream_broker_behind_our_listener(sidecar) -> None:
    server, _, base = sidecar
    response = call(server.port, FindCoordinatorRequest(key="tx-1", key_type=i8(1)))
    assert response.error_code == 0
    assert int(response.node_id) in (1, 2, 3)
    assert (response.host, int(response.port)) == ("127.0.0.1", base + int(response.node_id))
    group = call(server.port, FindCoordinatorRequest(key="some-group", key_type=i8(0)))
    assert (int(group.node_id), int(group.port)) == (COORDINATOR_NODE_ID, server.port)


def txn_offset_commit(port: int, topic: str, generation: int, member_id: str) -> list[int]:
    response = call(port, TxnOffsetCommitRequest(
        transactional_id="tx-1", group_id="g", producer_id=i64(1), producer_epoch=i16(0),
        generation_id=i32(generation), member_id=member_id, group_instance_id=None,
        topics=(TxnOffsetCommitRequestTopic(name=topic, partitions=(
            TxnOffsetCommitRequestPartition(partition_index=i32(0), committed_offset=i64(5),
                                            committed_leader_epoch=i32(-1), committed_metadata=None),)),)))
    return [int(p.error_code) for t in response.topics for p in t.partitions]


def test_transactional_offset_commit_of_an_unknown_member_is_refused_here(sidecar) -> None:
    """Validated here as Kafka's group coordinator does (KIP-447): a generation for a group that
    has none is ILLEGAL_GENERATION, never forwarded; a topic the upstream does not have is
    UNKNOWN_TOPIC_OR_PARTITION before the group is looked at, as Kafka's KafkaApis answers."""
    server, _, _ = sidecar
    call(server.port, MetadataRequest(topics=(MetadataRequestTopic(topic_id=None, name="txn-topic"),),
                                      allow_auto_topic_creation=True, include_topic_authorized_operations=False))
    wait_until(lambda: txn_offset_commit(server.port, "txn-topic", 1, "m") == [22],  # ILLEGAL_GENERATION
               message="the topic in the sidecar's catalog")
    assert txn_offset_commit(server.port, "no-such-topic", 1, "m") == [3]  # UNKNOWN_TOPIC_OR_PARTITION
    assert "offsets_home_upstream" not in server.log()


def test_garbage_on_a_forwarding_listener_closes_only_that_connection(sidecar) -> None:
    server, _, base = sidecar

    async def run() -> bool:
        client = await WireClient.connect(base + 2)
        try:
            # An unknown api key with a body the upstream cannot parse: forwarded, the upstream
            # closes, so the sidecar closes this client's connection.
            body = struct.pack(">hhih", 9999, 0, 1, -1) + b"\xff" * 16
            await client.send_raw(struct.pack(">i", len(body)) + body)
            return await client.closed_by_peer(10)
        finally:
            await client.close()

    assert asyncio.run(run())
    assert api_ranges(base + 2)  # the listener and the process are fine
    assert server.ready()


def test_the_private_generations_api_is_served_here_and_never_advertised(sidecar) -> None:
    server, _, base = sidecar

    async def run(port: int) -> tuple[Any, Any]:
        client = await WireClient.connect(port)
        try:
            joined = await client.request(build(request_schema(11, 3), {
                "group_id": f"gens-{port}", "session_timeout": 30000, "rebalance_timeout": 30000, "member_id": "",
                "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}]}))
            answer = await client.request(build(request_schema(DESCRIBE_GROUP_GENERATIONS, 0),
                                                {"groups": [f"gens-{port}", "never-joined"]}))
            return joined, answer
        finally:
            await client.close()

    for port in (server.port, base + 1):  # the coordinator's listener and one standing for a broker
        assert DESCRIBE_GROUP_GENERATIONS not in api_ranges(port)
        # Answered here: forwarded, the mock cluster would close the connection on the unknown key.
        joined, answer = asyncio.run(run(port))
        assert (joined.error_code, joined.generation_id) == (0, 1)
        assert [(g.group_id, g.error_code, g.generation_id) for g in answer.groups] == [
            (f"gens-{port}", 0, 1), ("never-joined", ErrorCode.GROUP_ID_NOT_FOUND, -1)]


def test_broker_listeners_are_advertised_on_their_own_host_when_set(tmp_path) -> None:
    """`sidecar.listener.advertised.host`: the per-broker listeners are named by it (a load balancer
    over every instance), the coordinator node keeps `advertised.listeners`."""
    proc, bootstrap = start_mock_cluster(2)
    base = free_base_port()
    server = sidecar_process(tmp_path / "data", bootstrap, base, **{"sidecar.listener.advertised.host": "localhost"})
    try:
        server.start()
        response = call(server.port, MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                                     include_topic_authorized_operations=False))
        brokers = {int(b.node_id): (b.host, int(b.port)) for b in response.brokers}
        assert brokers == {1: ("localhost", base + 1), 2: ("localhost", base + 2),
                           COORDINATOR_NODE_ID: ("127.0.0.1", server.port)}
        # The listener is bound where `listeners` binds (127.0.0.1) and reached by that name.
        assert call(base + 1, MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                              include_topic_authorized_operations=False)).brokers
    finally:
        server.stop()
        stop_process(proc)
