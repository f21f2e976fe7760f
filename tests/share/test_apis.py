"""ShareGroupHeartbeat v1 and ShareGroupDescribe v1 over a real socket (embedded mode): a share
member joins and is assigned its partitions at once (the edge read their start offsets in the data
plane's logs), the admin APIs see a group of type share, another protocol is refused the id."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from protocol.build import build
from protocol.schemas import request_schema
from tests.runtime.conftest import serving
from tests.support.wire import WireClient

SHARE_GROUP_HEARTBEAT, SHARE_GROUP_DESCRIBE = 76, 77
GROUP_ID_NOT_FOUND, UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH, INVALID_REQUEST = 69, 25, 110, 42
MEMBER = "shareMember00000000001"  # a client-generated member id (Kafka's Uuid string)


def req(api_key: int, version: int, **fields: Any) -> Any:
    return build(request_schema(api_key, version), fields)


def heartbeat(group: str, member: str, epoch: int, topics: list[str] | None = None) -> Any:
    return req(SHARE_GROUP_HEARTBEAT, 1, group_id=group, member_id=member, member_epoch=epoch, rack_id=None,
               subscribed_topic_names=topics)


@pytest.mark.asyncio
async def test_a_share_member_joins_gets_its_partitions_describes_and_leaves(tmp_path) -> None:
    async with serving(tmp_path, topics="t:2") as server:
        client = await WireClient.connect(server.port)
        try:
            joined = await client.request(heartbeat("q", MEMBER, 0, ["t"]))
            assert joined.error_code == 0 and joined.member_epoch >= 1
            assert joined.heartbeat_interval.total_seconds() == 5
            epoch = joined.member_epoch
            # The edge found the partitions' start offsets in the log before the join reached the
            # shard, so the first answer already assigns them.
            assert [sorted(tp.partitions) for tp in joined.assignment.topic_partitions] == [[0, 1]]
            steady = await client.request(heartbeat("q", MEMBER, epoch))
            assert (steady.error_code, steady.assignment) == (0, None)  # unchanged: not sent again

            described = await client.request(req(SHARE_GROUP_DESCRIBE, 1, group_ids=["q", "nobody"],
                                                 include_authorized_operations=False))
            found, missing = described.groups
            assert (found.error_code, found.group_state, found.assignor_name) == (0, "Stable", "simple")
            (member,) = found.members
            assert member.member_id == MEMBER and member.member_epoch == epoch
            assert [(tp.topic_name, sorted(tp.partitions)) for tp in member.assignment.topic_partitions] == [
                ("t", [0, 1])]
            assert missing.error_code == GROUP_ID_NOT_FOUND

            listed = await client.request(req(16, 5, states_filter=[], types_filter=["share"]))
            assert [(g.group_id, g.group_type, g.protocol_type) for g in listed.groups] == [("q", "share", "share")]

            consumer = await client.request(req(68, 1, group_id="q", member_id="consumerMember000000001",
                                                member_epoch=0, instance_id=None, rack_id=None,
                                                rebalance_timeout=10_000, subscribed_topic_names=["t"],
                                                subscribed_topic_regex=None, server_assignor=None,
                                                topic_partitions=[]))
            assert consumer.error_code == GROUP_ID_NOT_FOUND  # the id names a share group

            stale = await client.request(heartbeat("q", MEMBER, epoch + 1))
            assert stale.error_code == FENCED_MEMBER_EPOCH
            assert (await client.request(heartbeat("q", "strangerMember00000001", 3))).error_code == UNKNOWN_MEMBER_ID
            assert (await client.request(heartbeat("q", "", 0, ["t"]))).error_code == INVALID_REQUEST

            left = await client.request(heartbeat("q", MEMBER, -1))
            assert (left.error_code, left.member_epoch) == (0, -1)
            after = await client.request(req(SHARE_GROUP_DESCRIBE, 1, group_ids=["q"], include_authorized_operations=False))
            assert after.groups[0].group_state == "Empty" and not after.groups[0].members
        finally:
            await client.close()


@pytest.mark.asyncio
async def test_a_share_heartbeat_for_a_consumer_groups_id_is_group_id_not_found(tmp_path) -> None:
    async with serving(tmp_path, topics="t:1") as server:
        client = await WireClient.connect(server.port)
        try:
            consumer = await client.request(req(68, 1, group_id="c", member_id="consumerMember000000001",
                                                member_epoch=0, instance_id=None, rack_id=None,
                                                rebalance_timeout=10_000, subscribed_topic_names=["t"],
                                                subscribed_topic_regex=None, server_assignor=None,
                                                topic_partitions=[]))
            assert consumer.error_code == 0
            refused = await client.request(heartbeat("c", MEMBER, 0, ["t"]))
            assert refused.error_code == GROUP_ID_NOT_FOUND
        finally:
            await client.close()


SHARE_FETCH, SHARE_ACKNOWLEDGE = 78, 79
SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH, UNKNOWN_TOPIC_ID = 122, 123, 100


def share_fetch(epoch: int, topics: list[dict[str, Any]], version: int = 2) -> Any:
    return req(SHARE_FETCH, version, group_id="q", member_id=MEMBER, share_session_epoch=epoch, max_wait=0,
               min_bytes=1, max_bytes=1 << 20, max_records=500, batch_size=500, topics=topics,
               forgotten_topics_data=[])


@pytest.mark.asyncio
async def test_share_fetch_answers_bad_sessions_and_unknown_topics_with_kafkas_codes(tmp_path) -> None:
    async with serving(tmp_path, topics="t:1") as server:
        client = await WireClient.connect(server.port)
        try:
            joined = await client.request(heartbeat("q", MEMBER, 0, ["t"]))
            assert joined.error_code == 0
            topic_id = joined.assignment.topic_partitions[0].topic_id
            assert (await client.request(share_fetch(5, []))).error_code == SHARE_SESSION_NOT_FOUND
            ack = req(SHARE_ACKNOWLEDGE, 2, group_id="q", member_id=MEMBER, share_session_epoch=0, topics=[])
            assert (await client.request(ack)).error_code == INVALID_SHARE_SESSION_EPOCH  # cannot open a session

            opened = await client.request(share_fetch(0, [{"topic_id": topic_id, "partitions": [
                {"partition_index": 0, "acknowledgement_batches": []}]}]))
            assert opened.error_code == 0 and opened.acquisition_lock_timeout.total_seconds() == 30
            assert [(p.partition_index, p.error_code, p.acquired_records) for r in opened.responses
                    for p in r.partitions] == [(0, 0, ())]  # an empty topic: nothing to acquire
            assert (await client.request(share_fetch(7, []))).error_code == INVALID_SHARE_SESSION_EPOCH

            stranger = uuid.UUID("0123456789abcdef0123456789abcdef")
            unknown = await client.request(share_fetch(1, [{"topic_id": stranger, "partitions": [
                {"partition_index": 0, "acknowledgement_batches": []}]}]))
            assert unknown.error_code == 0
            codes = {(r.topic_id, p.partition_index): p.error_code for r in unknown.responses for p in r.partitions}
            assert codes == {(topic_id, 0): 0, (stranger, 0): UNKNOWN_TOPIC_ID}  # the session's partition too
        finally:
            await client.close()
