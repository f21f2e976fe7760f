"""The private DescribeGroupGenerations (key 32767) over the wire: served with the generation each
member of a classic group holds, through a rebalance, and never advertised in ApiVersions."""

from __future__ import annotations

import asyncio
import struct
from typing import Any

import pytest

from coordinator.node.server import CoordinatorServer
from protocol.build import build
from protocol.client import encode_request
from protocol.errors import ErrorCode
from protocol.private import DESCRIBE_GROUP_GENERATIONS
from protocol.schemas import request_schema
from tests.runtime.test_consumer_group_wire import Members, create_topic
from tests.support.polling import eventually
from tests.support.wire import WireClient


def req(api_key: int, version: int, **fields: Any) -> Any:
    return build(request_schema(api_key, version), fields)


def generations(*groups: str) -> Any:
    return req(DESCRIBE_GROUP_GENERATIONS, 0, groups=list(groups))


async def join(client: WireClient, group: str, member_id: str = "") -> Any:
    fields = {"group_id": group, "session_timeout": 30000, "rebalance_timeout": 30000, "member_id": member_id,
              "group_instance_id": None, "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}]}
    response = await client.request(req(11, 9, **fields), timeout=20)
    if response.error_code == ErrorCode.MEMBER_ID_REQUIRED:
        response = await client.request(req(11, 9, **{**fields, "member_id": response.member_id}), timeout=20)
    return response


async def sync(client: WireClient, group: str, member_id: str, generation: int) -> Any:
    return await client.request(req(14, 5, group_id=group, generation_id=generation, member_id=member_id,
                                    group_instance_id=None, protocol_type="consumer", protocol_name="range",
                                    assignments=[]))


def held(answer: Any) -> tuple[int, str, int, dict[str, int]]:
    [group] = answer.groups
    return group.error_code, group.group_state, group.generation_id, {m.member_id: m.generation_id
                                                                      for m in group.members}


@pytest.mark.asyncio
async def test_each_member_holds_the_generation_through_a_rebalance(server: CoordinatorServer) -> None:
    a, b, admin = [await WireClient.connect(server.port) for _ in range(3)]
    try:
        first = await join(a, "gens")
        assert first.error_code == 0 and first.generation_id == 1
        assert (await sync(a, "gens", first.member_id, 1)).error_code == 0
        assert held(await admin.request(generations("gens"))) == (0, "Stable", 1, {first.member_id: 1})

        # B's join parks the group in PreparingRebalance until A rejoins: A still holds generation
        # 1, B holds none yet.
        b_joining = asyncio.ensure_future(join(b, "gens"))

        async def both_members() -> Any:
            answer = held(await admin.request(generations("gens")))
            return answer if len(answer[3]) == 2 else None

        code, state, generation, members = await eventually(both_members, message="B's join to arrive")
        assert (code, state, generation) == (0, "PreparingRebalance", 1)
        [b_id] = set(members) - {first.member_id}
        assert members == {first.member_id: 1, b_id: -1}

        a_rejoined, b_joined = await asyncio.gather(join(a, "gens", first.member_id), b_joining)
        assert a_rejoined.generation_id == b_joined.generation_id == 2
        assert held(await admin.request(generations("gens"))) == (
            0, "CompletingRebalance", 2, {first.member_id: 2, b_id: 2})
        synced = await asyncio.gather(sync(a, "gens", first.member_id, 2), sync(b, "gens", b_id, 2))
        assert [s.error_code for s in synced] == [0, 0]
        assert held(await admin.request(generations("gens"))) == (0, "Stable", 2, {first.member_id: 2, b_id: 2})
    finally:
        for client in (a, b, admin):
            await client.close()


@pytest.mark.asyncio
async def test_groups_that_are_not_classic_are_not_found(server: CoordinatorServer, client: WireClient) -> None:
    await create_topic(client, "modern-topic", 1)
    assert (await Members(client, "modern").join("M", ["modern-topic"])).error_code == 0
    answer = await client.request(generations("modern", "never-existed"))
    assert [(g.group_id, g.error_code, g.group_state, g.generation_id, g.members) for g in answer.groups] == [
        ("modern", ErrorCode.GROUP_ID_NOT_FOUND, "Dead", -1, ()),
        ("never-existed", ErrorCode.GROUP_ID_NOT_FOUND, "Dead", -1, ())]


@pytest.mark.asyncio
@pytest.mark.parametrize("version", [0, 3])
async def test_api_versions_never_lists_the_private_key(client: WireClient, version: int) -> None:
    fields = {"client_software_name": "t", "client_software_version": "1"} if version >= 3 else {}
    response = await client.request(req(18, version, **fields))
    keys = {k.api_key for k in response.api_keys}
    assert 15 in keys and DESCRIBE_GROUP_GENERATIONS not in keys
    # Served all the same, on the same connection.
    assert (await client.request(generations("nobody"))).groups[0].error_code == ErrorCode.GROUP_ID_NOT_FOUND


@pytest.mark.asyncio
async def test_a_version_it_does_not_serve_closes_the_connection(client: WireClient) -> None:
    # The v0 request with version 1 in its header: a version outside the range, as Kafka closes.
    data = bytearray(encode_request(DESCRIBE_GROUP_GENERATIONS, 1, "t", generations("g")))
    data[6:8] = (1).to_bytes(2, "big")
    await client.send_raw(bytes(data))
    assert await client.closed_by_peer()


@pytest.mark.asyncio
async def test_a_request_claiming_more_groups_than_it_holds_is_refused(server: CoordinatorServer,
                                                                      client: WireClient) -> None:
    header = struct.pack(">hhih", DESCRIBE_GROUP_GENERATIONS, 0, 1, 1) + b"t"
    frame = header + struct.pack(">i", 2**31 - 1)  # two billion group ids in four bytes
    await client.send_raw(struct.pack(">i", len(frame)) + frame)
    assert await client.closed_by_peer()
    other = await WireClient.connect(server.port)
    try:
        assert (await other.request(generations("nobody"))).groups[0].error_code == ErrorCode.GROUP_ID_NOT_FOUND
    finally:
        await other.close()
