"""Describe/Alter/DeleteShareGroupOffsets over a real socket (embedded mode), kio-encoded requests.

A member acquires records and acknowledges some: Describe gives each share partition's start
offset and lag (v1). Alter is refused while the member is in the group (NON_EMPTY_GROUP), then moves
the start offset and forgets what was in flight; Delete forgets whole topics; both survive a
restart (they are records in the log). Bad input gets Kafka's codes: an unknown group, a group of
another type, unknown topics and partitions.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from protocol.build import build
from protocol.schemas import request_schema
from tests.dataplane.records import make_batch
from tests.runtime.conftest import serving
from tests.support.wire import WireClient

pytestmark = pytest.mark.asyncio

PRODUCE, LIST_GROUPS, CONSUMER_GROUP_HEARTBEAT = 0, 16, 68
SHARE_GROUP_HEARTBEAT, SHARE_FETCH, SHARE_ACKNOWLEDGE = 76, 78, 79
DESCRIBE_OFFSETS, ALTER_OFFSETS, DELETE_OFFSETS = 90, 91, 92
UNKNOWN_TOPIC_OR_PARTITION, INVALID_GROUP_ID, NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND = 3, 24, 68, 69
MEMBER = "shareMember00000000001"
EARLIEST = {"share.auto.offset.reset": "earliest"}


def req(api_key: int, version: int, **fields: Any) -> Any:
    return build(request_schema(api_key, version), fields)


async def produce(client: WireClient, topic: str, partition: int, count: int) -> None:
    answer = await client.request(req(PRODUCE, 9, transactional_id=None, acks=-1, timeout=5000, topic_data=[
        {"name": topic, "partition_data": [{"index": partition, "records": make_batch([b"v"] * count)}]}]))
    assert answer.responses[0].partition_responses[0].error_code == 0


async def join(client: WireClient, group: str = "q", topics: tuple[str, ...] = ("t",)) -> Any:
    joined = await client.request(req(SHARE_GROUP_HEARTBEAT, 1, group_id=group, member_id=MEMBER, member_epoch=0,
                                      rack_id=None, subscribed_topic_names=list(topics)))
    assert joined.error_code == 0 and joined.assignment.topic_partitions
    return joined


async def leave(client: WireClient, epoch: int, group: str = "q") -> None:
    left = await client.request(req(SHARE_GROUP_HEARTBEAT, 1, group_id=group, member_id=MEMBER, member_epoch=-1,
                                    rack_id=None, subscribed_topic_names=None))
    assert left.error_code == 0


async def fetch(client: WireClient, topic_id: uuid.UUID, partition: int, epoch: int = 0) -> list[tuple[int, int]]:
    answer = await client.request(req(
        SHARE_FETCH, 2, group_id="q", member_id=MEMBER, share_session_epoch=epoch, max_wait=0, min_bytes=1,
        max_bytes=1 << 20, max_records=500, batch_size=500, forgotten_topics_data=[],
        topics=[{"topic_id": topic_id, "partitions": [{"partition_index": partition, "acknowledgement_batches": []}]}]))
    assert answer.error_code == 0, answer
    return [(a.first_offset, a.last_offset) for r in answer.responses for p in r.partitions
            for a in p.acquired_records]


async def acknowledge(client: WireClient, topic_id: uuid.UUID, partition: int, epoch: int,
                      batches: list[tuple[int, int, int]]) -> int:
    answer = await client.request(req(
        SHARE_ACKNOWLEDGE, 2, group_id="q", member_id=MEMBER, share_session_epoch=epoch, is_renew_ack=False,
        topics=[{"topic_id": topic_id, "partitions": [{"partition_index": partition, "acknowledgement_batches": [
            {"first_offset": f, "last_offset": last, "acknowledge_types": [kind]} for f, last, kind in batches]}]}]))
    assert answer.error_code == 0, answer
    (code,) = {p.error_code for r in answer.responses for p in r.partitions}
    return code


async def describe(client: WireClient, group: str, topics: list[dict[str, Any]] | None = None,
                   version: int = 1) -> Any:
    answer = await client.request(req(DESCRIBE_OFFSETS, version, groups=[{"group_id": group, "topics": topics}]))
    (described,) = answer.groups
    return described


def starts(described: Any) -> dict[tuple[str, int], tuple[int, int]]:
    """(topic, partition) -> (start offset, lag)."""
    return {(t.topic_name, p.partition_index): (p.start_offset, p.lag) for t in described.topics for p in t.partitions}


async def alter(client: WireClient, group: str, topics: dict[str, list[tuple[int, int]]]) -> Any:
    return await client.request(req(ALTER_OFFSETS, 0, group_id=group, topics=[
        {"topic_name": name, "partitions": [{"partition_index": i, "start_offset": s} for i, s in parts]}
        for name, parts in topics.items()]))


async def delete(client: WireClient, group: str, topics: list[str]) -> Any:
    return await client.request(req(DELETE_OFFSETS, 0, group_id=group, topics=[{"topic_name": t} for t in topics]))


async def test_describe_gives_start_offsets_and_lag_alter_and_delete_need_an_empty_group(tmp_path) -> None:
    async with serving(tmp_path, topics="t:2", **EARLIEST) as server:
        client = await WireClient.connect(server.port)
        try:
            await produce(client, "t", 0, 10)
            joined = await join(client)
            topic_id = joined.assignment.topic_partitions[0].topic_id
            assert await fetch(client, topic_id, 0) == [(0, 9)]
            assert await acknowledge(client, topic_id, 0, 1, [(0, 3, 1)]) == 0  # accept 0..3

            # All topics (null): every partition the group has state for; lag = end - start - finished.
            described = await describe(client, "q")
            assert described.error_code == 0
            assert starts(described) == {("t", 0): (4, 6), ("t", 1): (0, 0)}
            assert {t.topic_id for t in described.topics} == {topic_id}
            # Named topics, v0 (no lag on the wire): an unknown topic is answered -1 with the zero id (kio: None).
            named = await describe(client, "q", [{"topic_name": "t", "partitions": [0]},
                                                 {"topic_name": "nope", "partitions": [0]}], version=0)
            assert [(t.topic_name, t.topic_id, [(p.partition_index, p.start_offset, p.error_code) for p in t.partitions])
                    for t in named.topics] == [("t", topic_id, [(0, 4, 0)]), ("nope", None, [(0, -1, 0)])]  # zero id: None

            refused = await alter(client, "q", {"t": [(0, 8)]})
            assert (refused.error_code, refused.responses) == (NON_EMPTY_GROUP, ())
            assert (await delete(client, "q", ["t"])).error_code == NON_EMPTY_GROUP
            assert starts(await describe(client, "q"))[("t", 0)] == (4, 6), "nothing changed"

            await leave(client, joined.member_epoch)
            # Empty now (its records 4..9 are still acquired: a leave keeps the share session).
            altered = await alter(client, "q", {"t": [(0, 8), (7, 0)], "nope": [(0, 0)]})
            assert altered.error_code == 0
            assert {(r.topic_name, p.partition_index, p.error_code) for r in altered.responses for p in r.partitions} == {
                ("t", 0, 0), ("t", 7, UNKNOWN_TOPIC_OR_PARTITION), ("nope", 0, UNKNOWN_TOPIC_OR_PARTITION)}
            assert starts(await describe(client, "q"))[("t", 0)] == (8, 2)
            # What was in flight is forgotten: a new session acquires from the new start at once.
            await join(client)
            assert await fetch(client, topic_id, 0) == [(8, 9)]
        finally:
            await client.close()

    async with serving(tmp_path, topics="t:2", **EARLIEST) as server:  # the same log, replayed
        client = await WireClient.connect(server.port)
        try:
            assert starts(await describe(client, "q"))[("t", 0)][0] == 8
            await leave(client, 0)
            deleted = await delete(client, "q", ["t", "nope"])
            assert deleted.error_code == 0
            assert [(r.topic_name, r.error_code) for r in deleted.responses] == [
                ("t", 0), ("nope", UNKNOWN_TOPIC_OR_PARTITION)]
            assert starts(await describe(client, "q")) == {}, "no partition has state any more"
            again = await describe(client, "q", [{"topic_name": "t", "partitions": [0, 1]}])
            assert starts(again) == {("t", 0): (-1, -1), ("t", 1): (-1, -1)}
            # Deleted twice: nothing left to delete.
            assert [r.error_code for r in (await delete(client, "q", ["t"])).responses] == [UNKNOWN_TOPIC_OR_PARTITION]
        finally:
            await client.close()


async def test_unknown_groups_and_groups_of_another_type_get_kafkas_codes(tmp_path) -> None:
    async with serving(tmp_path, topics="t:1") as server:
        client = await WireClient.connect(server.port)
        try:
            consumer = await client.request(req(
                CONSUMER_GROUP_HEARTBEAT, 1, group_id="c", member_id="consumerMember000000001", member_epoch=0,
                instance_id=None, rack_id=None, rebalance_timeout=10_000, subscribed_topic_names=["t"],
                subscribed_topic_regex=None, server_assignor=None, topic_partitions=[]))
            assert consumer.error_code == 0
            for group in ("c", "nobody"):
                assert (await describe(client, group)).error_code == GROUP_ID_NOT_FOUND
                assert (await delete(client, group, ["t"])).error_code == GROUP_ID_NOT_FOUND
            assert (await alter(client, "c", {"t": [(0, 0)]})).error_code == GROUP_ID_NOT_FOUND
            assert (await alter(client, "", {"t": [(0, 0)]})).error_code == INVALID_GROUP_ID

            # Alter creates a share group that does not exist yet (KAFKA-19662): an operator may set
            # where it starts before the first consumer comes.
            created = await alter(client, "fresh", {"t": [(0, 0)]})
            assert created.error_code == 0 and created.responses[0].partitions[0].error_code == 0
            listed = await client.request(req(LIST_GROUPS, 5, states_filter=[], types_filter=["share"]))
            assert [(g.group_id, g.group_state) for g in listed.groups] == [("fresh", "Empty")]
            assert starts(await describe(client, "fresh")) == {("t", 0): (0, 0)}
        finally:
            await client.close()
