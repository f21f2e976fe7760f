"""Describing a consumer (KIP-848) group through ConsumerGroupDescribe (API 69), which the server does
not advertise yet: a scripted broker answers with kio responses built from version-free mappings, so
the admin code's handling of API 69 (epochs, current and target assignments, lag) and its fallback
to DescribeGroups for classic groups are exercised without a server that serves it."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from coordinator.admin import groups
from coordinator.admin.client import (
    CONSUMER_GROUP_DESCRIBE,
    DESCRIBE_GROUPS,
    LIST_OFFSETS,
    OFFSET_FETCH,
    AdminError,
    Broker,
    ClusterMetadata,
    PartitionInfo,
)
from coordinator.admin.commands import _describe
from protocol.build import build
from protocol.private import DESCRIBE_GROUP_GENERATIONS
from protocol.schemas import response_schema


class ScriptedBroker:
    """Stands in for both the client and the coordinator connection; answers from `responses`."""

    label = "broker:9092"

    def __init__(self, versions: dict[int, int], responses: dict[int, dict[str, Any]]) -> None:
        self.versions = versions
        self.responses = responses
        self.asked: list[int] = []

    def supports(self, api_key: int) -> bool:
        return api_key in self.versions

    def version(self, api_key: int) -> int:
        return self.versions[api_key]

    async def request(self, api_key: int, data: Any, version: int | None = None) -> Any:
        self.asked.append(api_key)
        if api_key not in self.versions:  # a key the broker does not know: Kafka closes the connection
            raise AdminError(f"{self.label}: connection closed during {api_key}")
        return build(response_schema(api_key, self.versions[api_key]), self.responses[api_key])

    # AdminClient's routing
    async def coordinator(self, group_id: str) -> ScriptedBroker:
        return self

    async def broker(self, broker: Broker) -> ScriptedBroker:
        return self

    async def reconnect(self, connection: ScriptedBroker) -> ScriptedBroker:
        return self

    async def metadata(self, topics: list[str] | None) -> ClusterMetadata:
        return ClusterMetadata({1: Broker(1, "broker", 9092)},
                               {"orders": [PartitionInfo("orders", p, 1, 0) for p in range(3)]})


OFFSETS = {"groups": [{"group_id": "g", "error_code": 0, "topics": [
    {"name": "orders", "partitions": [{"partition_index": 0, "committed_offset": 5, "error_code": 0}]}]}]}
END_OFFSETS = {"topics": [{"name": "orders", "partitions": [
    {"partition_index": p, "error_code": 0, "offset": 12} for p in range(3)]}]}


def consumer_group() -> dict[str, Any]:
    topic_id = uuid.uuid4()

    def assignment(parts: list[int]) -> dict[str, Any]:
        return {"topic_partitions": [{"topic_id": topic_id, "topic_name": "orders", "partitions": parts}]}

    return {"groups": [{
        "error_code": 0, "group_id": "g", "group_state": "Reconciling", "group_epoch": 7,
        "assignment_epoch": 7, "assignor_name": "uniform",
        "members": [{"member_id": "m1", "instance_id": None, "member_epoch": 6, "client_id": "c1",
                     "client_host": "/10.0.0.1", "subscribed_topic_names": ["orders"],
                     "assignment": assignment([0, 1, 2]), "target_assignment": assignment([0, 1])}],
    }]}


def test_a_consumer_group_is_described_with_epochs_and_both_assignments() -> None:
    broker = ScriptedBroker(
        {CONSUMER_GROUP_DESCRIBE: 1, OFFSET_FETCH: 9, LIST_OFFSETS: 10},
        {CONSUMER_GROUP_DESCRIBE: consumer_group(), OFFSET_FETCH: OFFSETS, LIST_OFFSETS: END_OFFSETS},
    )
    description = asyncio.run(groups.describe_group(broker, "g"))  # type: ignore[arg-type]
    assert (description.group_type, description.state, description.protocol) == ("consumer", "Reconciling", "uniform")
    assert (description.group_epoch, description.assignment_epoch) == (7, 7)
    [member] = description.members
    assert (member.member_id, member.member_epoch) == ("m1", 6)
    assert member.assignment == {"orders": [0, 1, 2]}
    assert member.target_assignment == {"orders": [0, 1]}
    assert [(o.partition, o.committed_offset, o.end_offset, o.lag, o.member_id) for o in description.offsets] == [
        (0, 5, 12, 7, "m1"), (1, None, 12, None, "m1"), (2, None, 12, None, "m1")]
    assert DESCRIBE_GROUPS not in broker.asked

    class Args:
        group = "g"
        json = False

    table = asyncio.run(_describe(broker, Args()))  # type: ignore[arg-type]
    assert "GROUP-EPOCH 7  ASSIGNMENT-EPOCH 7  ASSIGNOR uniform" in table
    assert any(line.split() == ["m1", "-", "c1", "/10.0.0.1", "6", "orders:0,1,2", "orders:0,1"]
               for line in table.splitlines()), table


def test_a_classic_group_falls_back_to_describe_groups_when_api_69_says_not_found() -> None:
    not_consumer = {"groups": [{"error_code": 69, "error_message": "Group g is not a consumer group.", "group_id": "g"}]}
    classic = {"groups": [{"error_code": 0, "group_id": "g", "group_state": "Empty", "protocol_type": "consumer",
                           "protocol_data": "", "members": []}]}
    broker = ScriptedBroker(
        {CONSUMER_GROUP_DESCRIBE: 1, DESCRIBE_GROUPS: 5, OFFSET_FETCH: 9, LIST_OFFSETS: 10},
        {CONSUMER_GROUP_DESCRIBE: not_consumer, DESCRIBE_GROUPS: classic, OFFSET_FETCH: OFFSETS,
         LIST_OFFSETS: END_OFFSETS},
    )
    description = asyncio.run(groups.describe_group(broker, "g"))  # type: ignore[arg-type]
    # The private DescribeGroupGenerations is asked too; this broker does not know it and DescribeGroups
    # goes on (on a fresh connection, for a real one).
    assert broker.asked[:3] == [CONSUMER_GROUP_DESCRIBE, DESCRIBE_GROUP_GENERATIONS, DESCRIBE_GROUPS]
    assert (description.group_type, description.state, description.group_epoch) == ("classic", "Empty", None)
    assert description.generation_id is None
    assert [(o.partition, o.committed_offset, o.lag) for o in description.offsets] == [(0, 5, 7)]
