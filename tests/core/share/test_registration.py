"""The share group type served by the shard: heartbeats, initialization, timers, ListGroups,
DescribeGroups and deletion through the core harness (replay equals live after every step)."""

from __future__ import annotations

from uuid import UUID

from coordinator.core.config import GroupConfig
from coordinator.core.errors import ErrorCode
from coordinator.core.requests import (
    ConsumerGroupHeartbeat,
    DeleteGroups,
    DescribeGroups,
    JoinGroup,
    ListGroups,
    OffsetFetch,
    OffsetFetchGroup,
    TopicsChanged,
)
from coordinator.core.share.registration import SESSION_TIMER, ShareGroupType
from coordinator.core.share.requests import (
    ShareGroupDescribe,
    ShareGroupHeartbeat,
    ShareInitialize,
)
from coordinator.core.topics import TopicInfo
from tests.core.harness import FAST, Harness

TOPIC = TopicInfo(UUID(int=7), "orders", 2)


def share_harness(config: GroupConfig = FAST) -> Harness:
    h = Harness(config)
    h.send(TopicsChanged((TOPIC,), snapshot=True))
    return h


def share_type(h: Harness) -> ShareGroupType:
    t = h.shard.types["share"]
    assert isinstance(t, ShareGroupType)
    return t


def heartbeat(h: Harness, member: str, epoch: int, group: str = "q", topics: tuple[str, ...] | None = ("orders",)):
    ref = h.next_ref()
    h.send(ShareGroupHeartbeat(ref, group, member, epoch, subscribed_topic_names=topics))
    return h.reply(ref)


def initialize(h: Harness, group: str, partitions: tuple[tuple[UUID, int, int], ...]):
    ref = h.next_ref()
    h.send(ShareInitialize(ref, group, partitions))
    return h.reply(ref)


def joined_member(h: Harness, member: str = "m1", group: str = "q") -> int:
    """A member that joined, had its partitions initialized, and got them: its epoch."""
    first = heartbeat(h, member, 0, group)
    assert first.error_code == ErrorCode.NONE
    if first.to_initialize:
        assert initialize(h, group, tuple((t, p, 0) for t, p in first.to_initialize)).error_code == ErrorCode.NONE
    second = heartbeat(h, member, first.member_epoch, group, None)
    assert second.error_code == ErrorCode.NONE
    return int(second.member_epoch)


def test_a_new_member_gets_its_partitions_once_they_are_initialized() -> None:
    h = share_harness()
    first = heartbeat(h, "m1", 0)
    assert first.error_code == ErrorCode.NONE
    assert first.assignment == ()  # nothing is assignable before the partitions have state
    assert first.to_initialize == ((TOPIC.topic_id, 0), (TOPIC.topic_id, 1))

    assert initialize(h, "q", ((TOPIC.topic_id, 0, 5), (TOPIC.topic_id, 1, 0))).initialized == 2
    second = heartbeat(h, "m1", first.member_epoch, topics=None)
    assert second.assignment == ((TOPIC.topic_id, (0, 1)),)
    assert second.to_initialize == ()
    assert share_type(h).partitions.get("q", TOPIC.topic_id, 0).start_offset == 5  # type: ignore[union-attr]

    again = initialize(h, "q", ((TOPIC.topic_id, 0, 9),))  # a racing second initialization changes nothing
    assert again.initialized == 0
    assert share_type(h).partitions.get("q", TOPIC.topic_id, 0).start_offset == 5  # type: ignore[union-attr]


def test_two_members_share_the_partitions_and_survive_a_restart() -> None:
    h = share_harness()
    e1 = joined_member(h, "m1")
    e2 = heartbeat(h, "m2", 0)  # its partitions have state already: assigned at once
    assert e2.assignment is not None and len(e2.assignment[0][1]) == 1
    m1 = heartbeat(h, "m1", e1, topics=None)
    assert m1.assignment is not None and len(m1.assignment[0][1]) == 1
    h.restart()  # the harness compares the replayed shard with the live one after every step
    described = share_type(h)
    group = described.groups.get("q")
    assert group is not None and set(group.members) == {"m1", "m2"}
    assert (SESSION_TIMER, "q", "m1") in h.timers  # a fresh session for every member after a load


def test_the_session_timeout_fences_a_silent_member() -> None:
    h = share_harness()
    joined_member(h, "m1")
    h.advance(h.config.share_group_session_timeout_ms + 1)
    group = share_type(h).groups.get("q")
    assert group is not None and not group.members
    assert h.shard.group("q") is not None and h.shard.group("q").state_name == "Empty"  # type: ignore[union-attr]


def test_list_groups_shows_share_groups_under_their_type() -> None:
    h = share_harness()
    joined_member(h, "m1")
    ref = h.next_ref()
    h.send(ListGroups(ref, types_filter=("share",)))
    rows = h.reply(ref).groups
    assert [(r.group_id, r.group_type, r.protocol_type, r.group_state) for r in rows] == [
        ("q", "share", "share", "Stable")]
    ref = h.next_ref()
    h.send(ListGroups(ref, types_filter=("consumer",)))
    assert h.reply(ref).groups == ()


def test_describe_groups_answers_a_share_group_as_not_a_classic_group() -> None:
    h = share_harness()
    joined_member(h, "m1")
    ref = h.next_ref()
    h.send(DescribeGroups(ref, ("q",)))
    (row,) = h.reply(ref).groups
    assert row.group_state == "Dead" and not row.exists


def test_share_group_describe_tells_members_and_assignments() -> None:
    h = share_harness()
    joined_member(h, "m1")
    ref = h.next_ref()
    h.send(ShareGroupDescribe(ref, ("q", "missing")))
    found, missing = h.reply(ref).groups
    assert found["error_code"] == ErrorCode.NONE and found["group_state"] == "Stable"
    (member,) = found["members"]
    assert member["member_id"] == "m1"
    assert member["assignment"]["topic_partitions"][0]["topic_name"] == "orders"
    assert missing["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND


def test_an_id_of_another_type_is_refused_both_ways() -> None:
    h = share_harness()
    ref = h.next_ref()
    h.send(ConsumerGroupHeartbeat(ref, "c", "cm1", 0, subscribed_topic_names=("orders",), rebalance_timeout_ms=1000,
                                  topic_partitions=()))
    assert h.reply(ref).error_code == ErrorCode.NONE
    assert heartbeat(h, "m1", 0, group="c").error_code == ErrorCode.GROUP_ID_NOT_FOUND

    joined_member(h, "m1", group="q")
    ref = h.next_ref()
    h.send(ConsumerGroupHeartbeat(ref, "q", "cm1", 0, subscribed_topic_names=("orders",), rebalance_timeout_ms=1000,
                                  topic_partitions=()))
    assert h.reply(ref).error_code == ErrorCode.GROUP_ID_NOT_FOUND
    ref = h.next_ref()
    h.send(JoinGroup(ref, "q", "", None, "consumer", (("range", b""),), 10_000, 10_000, "c", "/h",
                     require_known_member_id=False))
    assert h.reply(ref).error_code in (ErrorCode.GROUP_ID_NOT_FOUND, ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
    ref = h.next_ref()
    h.send(OffsetFetch(ref, (OffsetFetchGroup("q", None),)))
    assert h.reply(ref).groups[0].error_code == ErrorCode.GROUP_ID_NOT_FOUND


def test_deleting_an_empty_share_group_forgets_its_partitions() -> None:
    h = share_harness()
    epoch = joined_member(h, "m1")
    ref = h.next_ref()
    h.send(DeleteGroups(ref, ("q",)))
    assert h.reply(ref).results[0].error_code == ErrorCode.NON_EMPTY_GROUP
    assert heartbeat(h, "m1", -1, topics=None).member_epoch == -1
    assert epoch > 0
    ref = h.next_ref()
    h.send(DeleteGroups(ref, ("q",)))
    assert h.reply(ref).results[0].error_code == ErrorCode.NONE
    assert h.shard.group("q") is None
    assert len(share_type(h).partitions) == 0


def test_a_join_carrying_start_offsets_is_assigned_at_once() -> None:
    h = share_harness()
    ref = h.next_ref()
    h.send(ShareGroupHeartbeat(ref, "q", "m1", 0, subscribed_topic_names=("orders",),
                               start_offsets=((TOPIC.topic_id, 0, 3), (TOPIC.topic_id, 1, 0))))
    answer = h.reply(ref)
    assert answer.assignment == ((TOPIC.topic_id, (0, 1)),) and answer.to_initialize == ()
    assert share_type(h).partitions.get("q", TOPIC.topic_id, 0).start_offset == 3  # type: ignore[union-attr]


def test_start_offsets_of_a_refused_heartbeat_leave_no_state_for_a_group_that_never_was() -> None:
    h = share_harness()
    ref = h.next_ref()
    h.send(ShareGroupHeartbeat(ref, "nobody", "m1", 4, start_offsets=((TOPIC.topic_id, 0, 0),)))
    assert h.reply(ref).error_code == ErrorCode.GROUP_ID_NOT_FOUND
    assert len(share_type(h).partitions) == 0
