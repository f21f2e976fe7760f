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


# Bad input under a live group: Kafka's answer, and the group as it was.

async def describe(client: WireClient, group_id: str = "app") -> Any:
    response = await client.request(request(SGD, 0, group_ids=[group_id], include_authorized_operations=False))
    return response.groups[0]


def shape(group: Any) -> tuple[Any, ...]:
    """What a refused request must leave alone: epochs, topology, members and their tasks."""
    return (group.group_epoch, group.assignment_epoch, group.topology,
            [(m.member_id, m.member_epoch, tasks(m.assignment.active_tasks), tasks(m.assignment.standby_tasks),
              tasks(m.assignment.warmup_tasks)) for m in group.members])


async def one_member_group(client: WireClient, topology: dict[str, Any] = TOPOLOGY, group_id: str = "app") -> Any:
    await create_topic(client, "words", 2)
    await create_topic(client, "app-counts-changelog", 2)
    joined = await heartbeat(client, "m1", 0, topology=topology, group_id=group_id)
    assert joined.error_code == 0 and tasks(joined.active_tasks) == {("0", 0), ("0", 1)}
    return joined


def owning(*active: tuple[str, int]) -> dict[str, Any]:
    return {"active_tasks": [{"subtopology_id": s, "partitions": [p]} for s, p in active],
            "standby_tasks": [], "warmup_tasks": []}


@pytest.mark.asyncio
async def test_a_topology_that_changes_under_a_live_group_is_refused_and_the_group_stands(client: WireClient) -> None:
    joined = await one_member_group(client)
    before = shape(await describe(client))
    changed = {**TOPOLOGY["subtopologies"][0], "state_changelog_topics": []}  # the store dropped
    for epoch in (0, 1):  # the same epoch or a newer one: Kafka has no topology updates
        refused = await heartbeat(client, "m2", 0, topology={"epoch": epoch, "subtopologies": [changed]})
        assert (refused.error_code, refused.error_message) == (42, "Topology updates are not supported yet.")
        rejoin = await heartbeat(client, "m1", 0, topology={"epoch": epoch, "subtopologies": [changed]})
        assert rejoin.error_code == 42  # the live member itself cannot change it either
    assert shape(await describe(client)) == before
    steady = await heartbeat(client, "m1", joined.member_epoch, **owning(("0", 0), ("0", 1)))
    assert steady.error_code == 0 and steady.member_epoch == joined.member_epoch


@pytest.mark.asyncio
async def test_an_older_topology_joins_with_the_stale_topology_status(client: WireClient) -> None:
    await one_member_group(client, topology={**TOPOLOGY, "epoch": 1})
    old = {"epoch": 0, "subtopologies": [{**TOPOLOGY["subtopologies"][0], "state_changelog_topics": []}]}
    late = await heartbeat(client, "m2", 0, topology=old)
    assert late.error_code == 0
    assert [(s.status_code, s.status_detail) for s in late.status] == [
        (Status.STALE_TOPOLOGY, "The member's topology epoch 0 is behind the group's topology epoch 1.")]
    group = await describe(client)
    assert group.topology.epoch == 1 and group.topology.subtopologies[0].state_changelog_topics


@pytest.mark.asyncio
async def test_a_member_reporting_tasks_it_was_never_given_gets_kafkas_answer(client: WireClient) -> None:
    first = await one_member_group(client)
    m2 = await heartbeat(client, "m2", 0)
    assert m2.error_code == 0
    epochs = {"m1": first.member_epoch, "m2": m2.member_epoch}
    owned: dict[str, set[tuple[str, int]]] = {"m1": {("0", 0), ("0", 1)}, "m2": set()}

    async def split() -> bool | None:
        for member in ("m1", "m2"):
            response = await heartbeat(client, member, epochs[member], **owning(*sorted(owned[member])))
            assert response.error_code == 0, response.error_message
            epochs[member] = response.member_epoch
            if response.active_tasks is not None:
                owned[member] = tasks(response.active_tasks)
        group = await describe(client)
        return (group.group_state == "Stable" and len(owned["m1"]) == len(owned["m2"]) == 1) or None

    await eventually(split)
    before = shape(await describe(client))
    (theirs,) = owned["m2"]
    (mine,) = owned["m1"]

    out_of_range = await heartbeat(client, "m1", epochs["m1"], **owning(mine, ("0", 5)))
    assert (out_of_range.error_code, out_of_range.error_message) == (
        42, "Task 5 for subtopology 0 is invalid. Number of tasks for this subtopology: 2")
    unknown = await heartbeat(client, "m1", epochs["m1"], **owning(mine, ("9", 0)))
    assert (unknown.error_code, unknown.error_message) == (42, "Subtopology 9 does not exist in the topology.")
    for stale_epoch in (epochs["m1"] - 1, epochs["m1"] + 1):  # behind, claiming another's task; or ahead
        fenced = await heartbeat(client, "m1", stale_epoch, **owning(mine, theirs))
        assert fenced.error_code == 110  # FENCED_MEMBER_EPOCH
    assert shape(await describe(client)) == before

    # At its own epoch a valid task it was never given is not taken from its owner: the member is
    # told its own assignment again, and no task runs on two members.
    claims = await heartbeat(client, "m1", epochs["m1"], **owning(mine, theirs))
    assert claims.error_code == 0 and claims.member_epoch == epochs["m1"]
    group = await describe(client)
    assert {m.member_id: tasks(m.assignment.active_tasks) for m in group.members} == {"m1": {mine}, "m2": {theirs}}


@pytest.mark.asyncio
async def test_task_offsets_that_go_backwards_or_are_unknown_are_taken_and_duplicates_refused(
        client: WireClient) -> None:
    joined = await one_member_group(client)
    epoch = joined.member_epoch

    def offsets(*entries: tuple[int, int]) -> list[dict[str, Any]]:
        return [{"subtopology_id": "0", "partition": p, "offset": o} for p, o in entries]

    reports = [
        (offsets((0, 500)), offsets((0, 1_000))),
        (offsets((0, 10)), offsets((0, 1_000))),  # went backwards: the store was wiped
        (offsets((0, 0)), offsets((0, 2**63 - 1))),  # the trunk client's unknown end offset
        (offsets((0, -1)), offsets((0, -1))),  # Streams' own "unknown" offset
    ]
    for task_offsets, task_end_offsets in reports:
        response = await heartbeat(client, "m1", epoch, task_offsets=task_offsets, task_end_offsets=task_end_offsets,
                                   **owning(("0", 0), ("0", 1)))
        assert response.error_code == 0 and response.member_epoch == epoch
        member = (await describe(client)).members[0]
        assert [(t.partition, t.offset) for t in member.task_offsets] == [(0, task_offsets[0]["offset"])]
        assert [(t.partition, t.offset) for t in member.task_end_offsets] == [(0, task_end_offsets[0]["offset"])]
    before = shape(await describe(client))
    duplicate = await heartbeat(client, "m1", epoch, task_offsets=offsets((1, 5), (1, 6)), **owning(("0", 0), ("0", 1)))
    assert (duplicate.error_code, duplicate.error_message) == (
        42, "Task offsets contain a duplicate entry for subtopology 0 and partition 1.")
    group = await describe(client)
    assert shape(group) == before and [(t.partition, t.offset) for t in group.members[0].task_offsets] == [(0, -1)]


@pytest.mark.asyncio
async def test_an_invalid_topology_is_refused_and_creates_no_group(client: WireClient) -> None:
    sized = {**TOPOLOGY["subtopologies"][0], "state_changelog_topics": [
        {**TOPOLOGY["subtopologies"][0]["state_changelog_topics"][0], "partitions": 3}]}
    refused = await heartbeat(client, "m1", 0, topology={"epoch": 0, "subtopologies": [sized]})
    assert refused.error_code == 130  # STREAMS_INVALID_TOPOLOGY
    assert refused.error_message == ("Changelog topic app-counts-changelog must have an undefined partition count, "
                                     "but it is set to 3.")
    internal = {**TOPOLOGY["subtopologies"][0], "source_topics": ["__consumer_offsets"]}
    assert (await heartbeat(client, "m1", 0, topology={"epoch": 0, "subtopologies": [internal]})).error_code == 130
    assert (await describe(client)).error_code == 69  # GROUP_ID_NOT_FOUND: nothing was created
