"""The group APIs over a real socket at every served version: a one-member group joins, syncs,
heartbeats, commits, fetches and leaves, and the admin APIs see it."""

from __future__ import annotations

import pytest
from kio.index import load_request_schema

from coordinator.node.server import CoordinatorServer
from protocol.build import build
from protocol.schemas import request_schema
from tests.support.wire import WireClient


@pytest.fixture
def server(server_with_topic: CoordinatorServer) -> CoordinatorServer:
    """These commits name topic "t", which must exist (Kafka refuses unknown topics)."""
    return server_with_topic


def req(api_key: int, version: int, **fields):
    return build(request_schema(api_key, version), fields)


async def join_and_sync(client: WireClient, group: str, join_version: int, sync_version: int,
                        instance: str | None = None) -> tuple[str, int]:
    fields = {"group_id": group, "session_timeout": 10000, "rebalance_timeout": 10000, "member_id": "",
              "group_instance_id": instance, "protocol_type": "consumer",
              "protocols": [{"name": "range", "metadata": b"meta"}]}
    response = await client.request(req(11, join_version, **fields))
    if response.error_code == 79:  # MEMBER_ID_REQUIRED (v4+, dynamic members)
        assert join_version >= 4 and instance is None
        response = await client.request(req(11, join_version, **{**fields, "member_id": response.member_id}))
    assert response.error_code == 0
    member_id, generation = response.member_id, response.generation_id
    assert response.leader == member_id
    assert [m.member_id for m in response.members] == [member_id]
    if join_version >= 7:
        assert (response.protocol_type, response.protocol_name) == ("consumer", "range")
    else:
        assert response.protocol_name == "range"
    sync = await client.request(req(14, sync_version, group_id=group, generation_id=generation, member_id=member_id,
                                    group_instance_id=instance, protocol_type="consumer", protocol_name="range",
                                    assignments=[{"member_id": member_id, "assignment": b"assigned"}]))
    assert sync.error_code == 0 and sync.assignment == b"assigned"
    return member_id, generation


@pytest.mark.asyncio
@pytest.mark.parametrize("join_version", range(0, 10))
async def test_group_lifecycle_at_every_join_version(server: CoordinatorServer, client: WireClient, join_version: int) -> None:
    group = f"g{join_version}"
    sync_version = min(join_version, 5)
    member_id, generation = await join_and_sync(client, group, join_version, sync_version)
    heartbeat_version = min(join_version, 4)
    hb = await client.request(req(12, heartbeat_version, group_id=group, generation_id=generation, member_id=member_id))
    assert hb.error_code == 0
    stale = await client.request(req(12, heartbeat_version, group_id=group, generation_id=generation + 1, member_id=member_id))
    assert stale.error_code == 22  # ILLEGAL_GENERATION
    leave_version = min(join_version, 5)
    if leave_version >= 3:
        leave = await client.request(req(13, leave_version, group_id=group, members=[{"member_id": member_id}]))
        assert leave.error_code == 0 and [m.error_code for m in leave.members] == [0]
    else:
        leave = await client.request(req(13, leave_version, group_id=group, member_id=member_id))
        assert leave.error_code == 0
    described = await client.request(req(15, 5, groups=[group], include_authorized_operations=False))
    assert described.groups[0].group_state == "Empty"


@pytest.mark.asyncio
@pytest.mark.parametrize("version", range(0, 10))
async def test_offset_commit_and_fetch_at_every_version(server: CoordinatorServer, client: WireClient, version: int) -> None:
    group = f"offsets-{version}"
    partition = {"partition_index": 0, "committed_offset": 40 + version, "committed_leader_epoch": -1,
                 "committed_metadata": "meta", "commit_timestamp": -1}
    commit = await client.request(req(8, version, group_id=group, generation_id_or_member_epoch=-1, member_id="",
                                      retention_time=-1, topics=[{"name": "t", "partitions": [partition]}]))
    assert [(p.partition_index, p.error_code) for t in commit.topics for p in t.partitions] == [(0, 0)]
    if version >= 8:
        fetched = await client.request(req(9, version, groups=[{"group_id": group, "member_id": None, "member_epoch": -1,
                                                               "topics": [{"name": "t", "partition_indexes": [0, 1]}]}],
                                           require_stable=False))
        (group_result,) = fetched.groups
        partitions = group_result.topics[0].partitions
    else:
        fetched = await client.request(req(9, version, group_id=group, topics=[{"name": "t", "partition_indexes": [0, 1]}],
                                           require_stable=False))
        partitions = fetched.topics[0].partitions
    assert [(p.partition_index, p.committed_offset) for p in partitions] == [(0, 40 + version), (1, -1)]
    assert partitions[0].metadata == "meta"


@pytest.mark.asyncio
async def test_commit_with_generation_to_unknown_group_is_illegal_generation_before_v9(client: WireClient) -> None:
    partition = {"partition_index": 0, "committed_offset": 1, "committed_metadata": None}
    old = await client.request(req(8, 8, group_id="nobody", generation_id_or_member_epoch=3, member_id="m",
                                   topics=[{"name": "t", "partitions": [partition]}]))
    assert old.topics[0].partitions[0].error_code == 22
    new = await client.request(req(8, 9, group_id="nobody", generation_id_or_member_epoch=3, member_id="m",
                                   topics=[{"name": "t", "partitions": [partition]}]))
    assert new.topics[0].partitions[0].error_code == 69


@pytest.mark.asyncio
async def test_sync_v5_without_protocol_is_inconsistent(client: WireClient) -> None:
    response = await client.request(req(14, 5, group_id="g", generation_id=1, member_id="m", protocol_type=None,
                                        protocol_name=None, assignments=[]))
    assert response.error_code == 23


@pytest.mark.asyncio
@pytest.mark.parametrize("version", range(0, 7))
async def test_describe_unknown_group(client: WireClient, version: int) -> None:
    response = await client.request(req(15, version, groups=["ghost"], include_authorized_operations=False))
    (group,) = response.groups
    if version >= 6:
        assert group.error_code == 69 and group.error_message == "Group ghost not found."
    else:
        assert (group.error_code, group.group_state) == (0, "Dead")


@pytest.mark.asyncio
@pytest.mark.parametrize("version", range(0, 6))
async def test_list_and_delete_groups(client: WireClient, version: int) -> None:
    _member_id, _generation = await join_and_sync(client, "live", 5, 3)
    partition = {"partition_index": 0, "committed_offset": 5, "committed_metadata": None}
    await client.request(req(8, 7, group_id="simple", generation_id_or_member_epoch=-1, member_id="",
                             topics=[{"name": "t", "partitions": [partition]}]))
    listed = await client.request(req(16, version, states_filter=[], types_filter=[]))
    groups = {g.group_id: g for g in listed.groups}
    assert set(groups) == {"live", "simple"}
    assert groups["live"].protocol_type == "consumer" and groups["simple"].protocol_type == ""
    if version >= 4:
        assert groups["live"].group_state == "Stable"
        only_empty = await client.request(req(16, version, states_filter=["empty"], types_filter=[]))
        assert [g.group_id for g in only_empty.groups] == ["simple"]
    if version >= 5:
        assert groups["live"].group_type == "classic"
    deleted = await client.request(req(42, min(version, 2), groups_names=["live", "simple", "ghost"]))
    assert [(r.group_id, r.error_code) for r in deleted.results] == [("live", 68), ("simple", 0), ("ghost", 69)]


@pytest.mark.asyncio
async def test_group_apis_answer_load_in_progress_before_the_shard_is_loaded_and_heartbeats_none(tmp_path) -> None:
    from tests.runtime.conftest import make_config

    server = CoordinatorServer(make_config(tmp_path))
    await server.start()
    try:
        server.shard.loaded = False  # as during log replay
        client = await WireClient.connect(server.port)
        sync = await client.request(build(load_request_schema(14, 5), {
            "group_id": "g", "generation_id": 1, "member_id": "m", "protocol_type": "consumer",
            "protocol_name": "range", "assignments": []}))
        assert sync.error_code == 14
        # Kafka answers a classic heartbeat NONE while the group loads (the session goes on).
        hb = await client.request(build(load_request_schema(12, 4), {"group_id": "g", "generation_id": 1, "member_id": "m"}))
        assert hb.error_code == 0
        await client.close()
    finally:
        server.shard.loaded = True
        await server.stop()
