"""Streams groups (KIP-1071) over a real socket: raw StreamsGroupHeartbeat v0/v1 and
StreamsGroupDescribe v0 requests (kio entities) against the in-process embedded server, which
creates the internal topics the heartbeat asks for in its catalog."""

from __future__ import annotations

from typing import Any

import pytest

from coordinator.core.streams.status import Status
from coordinator.node.server import CoordinatorServer
from tests.support.polling import eventually
from tests.support.wire import WireClient, request

SGH, SGD = 88, 89

TOPOLOGY = {"epoch": 0, "subtopologies": [{
    "subtopology_id": "0", "source_topics": ["words"], "source_topic_regex": [], "repartition_sink_topics": [],
    "state_changelog_topics": [{"name": "app-counts-changelog", "partitions": 0, "replication_factor": 0,
                                "topic_configs": [{"key": "cleanup.policy", "value": "compact"}]}],
    "repartition_source_topics": [], "copartition_groups": []}]}


async def create_topic(client: WireClient, name: str, partitions: int) -> None:
    topic = {"name": name, "num_partitions": partitions, "replication_factor": -1, "assignments": [], "configs": []}
    response = await client.request(request(19, 7, topics=[topic], timeout=5000))
    assert response.topics[0].error_code == 0


async def heartbeat(client: WireClient, member_id: str, epoch: int, version: int = 1, **fields: Any) -> Any:
    joining = epoch == 0
    base: dict[str, Any] = {
        "group_id": "app", "member_id": member_id, "member_epoch": epoch, "endpoint_information_epoch": 0,
        "rebalance_timeout": 30_000 if joining else -1, "topology": TOPOLOGY if joining else None,
        "active_tasks": [] if joining else None, "standby_tasks": [] if joining else None,
        "warmup_tasks": [] if joining else None, "process_id": f"p-{member_id}" if joining else None,
        "user_endpoint": None, "client_tags": None, "task_offsets": None, "task_end_offsets": None,
        "shutdown_application": False}
    return await client.request(request(SGH, version, **{**base, **fields}))


def tasks(items: Any) -> set[tuple[str, int]]:
    return {(t.subtopology_id, p) for t in items or () for p in t.partitions}


@pytest.mark.asyncio
async def test_api_versions_advertise_the_streams_apis(client: WireClient) -> None:
    response = await client.request(request(18, 3, client_software_name="t", client_software_version="1"))
    ranges = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert ranges[SGH] == (0, 1)
    assert ranges[SGD] == (0, 0)


@pytest.mark.asyncio
async def test_a_member_joins_its_internal_topic_is_created_and_it_gets_every_task(
        server: CoordinatorServer, client: WireClient) -> None:
    await create_topic(client, "words", 4)
    first = await heartbeat(client, "m1", 0)
    assert first.error_code == 0 and first.member_epoch >= 1
    assert Status.MISSING_INTERNAL_TOPICS in {s.status_code for s in first.status}
    assert first.acceptable_recovery_lag == 10_000  # v1 carries the setting
    # The edge created the changelog with the source topic's partition count and its configs.
    changelog = server.catalog.get("app-counts-changelog")
    assert changelog is not None and changelog.num_partitions == 4
    assert changelog.configs == {"cleanup.policy": "compact"}

    async def assigned() -> Any:
        response = await heartbeat(client, "m1", first.member_epoch, active_tasks=[], standby_tasks=[],
                                   warmup_tasks=[])
        assert response.error_code == 0
        return response if response.active_tasks else None

    ready = await eventually(assigned)
    assert tasks(ready.active_tasks) == {("0", p) for p in range(4)}
    assert ready.status == ()


@pytest.mark.asyncio
async def test_v0_heartbeats_and_describe_show_the_member_and_its_tasks(client: WireClient) -> None:
    await create_topic(client, "words", 2)
    await create_topic(client, "app-counts-changelog", 2)
    joined = await heartbeat(client, "m1", 0, version=0)
    assert joined.error_code == 0 and tasks(joined.active_tasks) == {("0", 0), ("0", 1)}
    assert joined.acceptable_recovery_lag == 0  # v0's field: never set, as in Kafka

    described = await client.request(request(SGD, 0, group_ids=["app", "missing"], include_authorized_operations=False))
    app, missing = described.groups
    assert (app.error_code, app.group_state) == (0, "Stable")
    assert [m.member_id for m in app.members] == ["m1"]
    assert tasks(app.members[0].assignment.active_tasks) == {("0", 0), ("0", 1)}
    assert app.topology.subtopologies[0].source_topics == ("words",)
    assert missing.error_code == 69  # GROUP_ID_NOT_FOUND

    listed = await client.request(request(16, 5, states_filter=[], types_filter=["streams"]))
    assert [(g.group_id, g.group_type) for g in listed.groups] == [("app", "streams")]


@pytest.mark.asyncio
async def test_bad_heartbeats_get_kafkas_errors(client: WireClient) -> None:
    no_topology = await heartbeat(client, "m1", 0, topology=None)
    assert no_topology.error_code == 42  # INVALID_REQUEST
    assert no_topology.error_message == "Topology must be non-null when (re-)joining."
    unknown = await heartbeat(client, "ghost", 3, active_tasks=[], standby_tasks=[], warmup_tasks=[])
    assert unknown.error_code == 69  # GROUP_ID_NOT_FOUND: no such group yet
    bad_name = await heartbeat(client, "m1", 0, topology={**TOPOLOGY, "subtopologies": [
        {**TOPOLOGY["subtopologies"][0], "source_topics": ["bad topic!"]}]})
    assert bad_name.error_code == 130  # STREAMS_INVALID_TOPOLOGY
