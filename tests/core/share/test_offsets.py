"""AlterShareGroupOffsets and DeleteShareGroupOffsets on the share core: Kafka's refusals, a new
start with a new state epoch, and deletion that lets the reset strategy apply again."""

from __future__ import annotations

from coordinator.core.errors import ErrorCode
from coordinator.core.share.acquisition import acquire
from coordinator.core.share.membership import HeartbeatRequest, ShareGroups, heartbeat
from coordinator.core.share.offsets import alter_offsets, delete_offsets

from .twin import GROUP, TOPIC, Twin

TOPICS = {"orders": (TOPIC, 2)}


def test_alter_creates_the_group_and_restarts_partitions_elsewhere() -> None:
    t = Twin()
    t.log_records(acquire(t.p, "a", [(0, 9)], 10, 0, t.config).records)
    groups = ShareGroups()
    result = alter_offsets(groups, t.partitions, GROUP, [("orders", [(0, 42), (7, 1)]), ("nope", [(0, 1)])], TOPICS)
    t.log_records(result.records)
    assert result.error == ErrorCode.NONE and groups.get(GROUP) is not None
    assert result.errors["orders"] == (TOPIC, {0: ErrorCode.NONE, 7: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION})
    assert result.errors["nope"] == (None, {0: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION})
    assert (t.p.start_offset, t.p.state_epoch, t.p.offsets) == (42, 1, {})


def test_offsets_of_a_group_with_members_or_of_another_type_are_refused() -> None:
    t = Twin()
    groups = ShareGroups()
    heartbeat(groups, HeartbeatRequest(GROUP, "m1", 0, subscribed_topic_names=["orders"]), TOPICS, lambda t: [], 0)
    assert alter_offsets(groups, t.partitions, GROUP, [], TOPICS).error == ErrorCode.NON_EMPTY_GROUP
    assert delete_offsets(groups, t.partitions, GROUP, ["orders"], TOPICS).error == ErrorCode.NON_EMPTY_GROUP
    other = alter_offsets(groups, t.partitions, "c", [], TOPICS, id_taken_by_another_type=True)
    assert other.error == ErrorCode.GROUP_ID_NOT_FOUND
    assert delete_offsets(ShareGroups(), t.partitions, GROUP, [], TOPICS).error == ErrorCode.GROUP_ID_NOT_FOUND
    assert alter_offsets(groups, t.partitions, "", [], TOPICS).error == ErrorCode.INVALID_GROUP_ID


def test_delete_forgets_whole_topics_and_refuses_topics_without_state() -> None:
    t = Twin()
    groups = ShareGroups()
    alter_offsets(groups, t.partitions, GROUP, [], TOPICS)
    result = delete_offsets(groups, t.partitions, GROUP, ["orders", "payments"], TOPICS)
    t.log_records(result.records)
    assert result.errors == {"orders": (TOPIC, {None: ErrorCode.NONE}),
                             "payments": (None, {None: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION})}
    assert t.partitions.get(GROUP, TOPIC, 0) is None
    again = delete_offsets(groups, t.partitions, GROUP, ["orders"], TOPICS)
    assert again.errors["orders"][1] == {None: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}, "no offset information"
