"""One frame must not kill the server: collection sizes a request claims are checked before kio
decodes it (kio reserves 8 bytes an element up front, and a failed reservation aborts the process;
this 30-byte OffsetFetch did). Kafka's message; the server process survives it. And no string
over 32,767 bytes gets in through a flexible version's compact strings, as Kafka's parsers refuse
it, so no stored name is too long for the older versions' responses."""

from __future__ import annotations

import asyncio
import struct

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest

from protocol import guard
from protocol.build import build
from protocol.client import encode_request
from protocol.errors import MalformedRequest
from protocol.schemas import request_schema
from tests.support.server import ServerProcess
from tests.support.wire import WireClient, request


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | 0x80 if n else b)
        if not n:
            return bytes(out)


def offset_fetch_claiming(count: int) -> bytes:
    """OffsetFetch v8 whose partition index array claims `count` elements (body, no size prefix)."""
    frame = encode_request(9, 1, "c", build(request_schema(9, 8), {
        "groups": [{"group_id": "g", "topics": [{"name": "t", "partition_indexes": [7]}]}], "require_stable": False}))
    body = frame[4:]
    return body[:18] + _uvarint(count + 1) + body[19:]


def legacy_join_claiming(count: int) -> bytes:
    """JoinGroup v0 whose protocols array (INT32 count) claims `count` elements."""
    body = encode_request(11, 1, "c", build(request_schema(11, 0), {
        "group_id": "g", "session_timeout": 1000, "member_id": "", "protocol_type": "c", "protocols": []}))[4:]
    return body[:23] + struct.pack(">i", count)


@pytest.mark.parametrize(("api_key", "version", "body", "count"), [
    (9, 8, offset_fetch_claiming(33_000_000_000), 33_000_000_000),
    (9, 8, offset_fetch_claiming(100), 100),
    (11, 0, legacy_join_claiming(2**31 - 1), 2**31 - 1),
])
def test_a_count_larger_than_the_frame_is_refused_with_kafkas_message(api_key, version, body, count) -> None:
    with pytest.raises(MalformedRequest, match=f"Tried to allocate a collection of size {count}, but there are only"):
        guard.check(api_key, version, body)


def test_honest_requests_pass_and_requests_without_arrays_are_not_walked() -> None:
    guard.check(9, 8, offset_fetch_claiming(1))
    assert guard.walker(12, 3) is None  # Heartbeat v3: no array, INT16 strings: nothing to walk
    for api_key, version in ((8, 2), (8, 9), (68, 1), (11, 9), (1, 17), (0, 11)):
        assert guard.walker(api_key, version) is not None


def test_the_server_survives_the_frame_that_killed_it(tmp_path) -> None:
    server = ServerProcess(tmp_path / "data").start()

    async def attack() -> None:
        for body in (offset_fetch_claiming(33_000_000_000), legacy_join_claiming(2**31 - 1)):
            client = await WireClient.connect(server.port)
            await client.send_raw(struct.pack(">i", len(body)) + body)
            assert await client.closed_by_peer()
            await client.close()
        client = await WireClient.connect(server.port)
        request = ApiVersionsRequest(client_software_name="t", client_software_version="1")
        assert (await client.request(request)).error_code == 0
        await client.close()

    try:
        asyncio.run(attack())
        assert server.proc is not None and server.proc.poll() is None
        assert "Tried to allocate a collection of size 33000000000" in server.log()
    finally:
        server.stop()


def test_a_null_where_the_schema_has_a_non_nullable_array_is_refused() -> None:
    body = encode_request(19, 1, "c", build(request_schema(19, 7), {"topics": [], "timeout": 1000,
                                                                    "validate_only": False}))[4:]
    topics_count = 12  # header v2: key, version, correlation id, client id "c", no tags
    assert body[topics_count] == 1  # compact array of zero topics
    nulled = body[:topics_count] + b"\x00" + body[topics_count + 1:]
    with pytest.raises(MalformedRequest, match="non-nullable field topics was serialized as null"):
        guard.check(19, 7, nulled)
    guard.check(19, 7, body)


def offset_commit_v8(group_id: str, topic: str) -> bytes:
    """A simple-group OffsetCommit v8 (flexible: compact strings), framed."""
    return encode_request(8, 1, "c", build(request_schema(8, 8), {
        "group_id": group_id, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
        "topics": [{"name": topic, "partitions": [{"partition_index": 0, "committed_offset": 5,
                                                   "committed_leader_epoch": -1, "committed_metadata": ""}]}]}))


@pytest.mark.parametrize(("group_id", "topic", "message"), [
    ("g" * 40_000, "t", "string field groupId had invalid length 40000"),
    ("g", "t" * 32_768, "string field name had invalid length 32768"),
])
def test_a_compact_string_over_32767_bytes_is_refused_as_kafkas_parsers_refuse_it(group_id, topic, message) -> None:
    with pytest.raises(MalformedRequest, match=message):
        guard.check(8, 8, offset_commit_v8(group_id, topic)[4:])


def test_strings_up_to_32767_bytes_pass_and_small_string_only_frames_are_not_walked() -> None:
    guard.check(8, 8, offset_commit_v8("g" * 32_767, "t" * 32_767)[4:])
    heartbeat = encode_request(12, 1, "c", build(request_schema(12, 4), {
        "group_id": "g" * 40_000, "generation_id": 1, "member_id": "m", "group_instance_id": None}))[4:]
    with pytest.raises(MalformedRequest, match="string field groupId had invalid length 40000"):
        guard.check(12, 4, heartbeat)
    assert not guard.walks_every_frame(12, 4)  # a Heartbeat under 32 KiB cannot hold such a string
    assert guard.walks_every_frame(8, 8)
    assert guard.walker(12, 0) is None  # INT16 lengths cannot say more than 32,767


def test_no_name_over_32767_bytes_is_stored_so_older_versions_answer_everyone(tmp_path) -> None:
    """A 40,000-byte group id or committed topic name closes the sender's connection (as Kafka's
    request parsing does); ListGroups v0 and OffsetFetch v2, whose INT16 strings could not carry
    them, keep answering other clients. 32,767 bytes is still a legal group id."""
    server = ServerProcess(tmp_path / "data", overrides={"topics": "t:1"}).start()

    async def scenario() -> None:
        for frame in (offset_commit_v8("g" * 40_000, "t"), offset_commit_v8("victim", "t" * 40_000)):
            client = await WireClient.connect(server.port)
            await client.send_raw(frame)
            assert await client.closed_by_peer()
            await client.close()
        longest = "L" * 32_767
        client = await WireClient.connect(server.port)
        await client.send_raw(offset_commit_v8(longest, "t"))
        _, committed = await client.receive(8, 8)
        assert [p.error_code for t in committed.topics for p in t.partitions] == [0]
        listed = await client.request(request(16, 0))
        assert listed.error_code == 0
        assert [g.group_id for g in listed.groups] == [longest]
        fetched = await client.request(request(9, 2, group_id="victim", topics=None))
        assert (fetched.error_code, fetched.topics) == (0, ())
        await client.close()

    try:
        asyncio.run(scenario())
        assert "string field groupId had invalid length 40000" in server.log()
    finally:
        server.stop()
