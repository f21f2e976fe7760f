"""The operators' side of share groups on the shard, through the core harness (replay equals live
after every step, restarts included): Describe/Alter/DeleteShareGroupOffsets, a closed connection
releasing its sessions' records, DescribeSharePartitions' counts, and the ShareRecordsChanged events
the counters are fed from (once per transition, none at replay)."""

from __future__ import annotations

from coordinator.core.errors import ErrorCode
from coordinator.core.events import ShareRecordsChanged
from coordinator.core.requests import TopicsChanged
from coordinator.core.share.records import RecordState
from coordinator.core.share.requests import (
    AlterShareGroupOffsets,
    DeleteShareGroupOffsets,
    DescribeShareGroupOffsets,
    DescribeSharePartitions,
    ShareAckPartition,
    ShareConnectionClosed,
    ShareFetch,
    ShareReadPartition,
)
from tests.core.share.test_fetch_on_the_shard import ACCEPT, REJECT, RELEASE, T, fetch, states
from tests.core.share.test_registration import TOPIC, heartbeat, joined_member, share_harness

RENEW = 4

ALL = ("acquired", "acknowledged", "released", "archived", "lock_expired")


def totals(h) -> dict[str, int]:
    events = h.events_of(ShareRecordsChanged)
    return {name: sum(getattr(e, name) for e in events) for name in ALL}


def restart(h) -> None:
    """A new shard replays the log; the node hands it the topic image, as at every load."""
    h.restart()
    h.send(TopicsChanged((TOPIC,), snapshot=True))


def ask(h, request_type, *fields):
    ref = h.next_ref()
    h.send(request_type(ref, *fields))
    return h.reply(ref)


def test_alter_is_refused_with_a_member_then_starts_the_partition_afresh_and_survives_a_restart() -> None:
    h = share_harness()
    epoch = joined_member(h, "m1")
    fetch(h, "m1", 0, max_records=10)  # 0-9 acquired
    refused = ask(h, AlterShareGroupOffsets, "q", (("orders", ((0, 7),)),))
    assert refused.error_code == ErrorCode.NON_EMPTY_GROUP and not refused.topics
    assert set(states(h).values()) == {RecordState.ACQUIRED}, "nothing changed"

    heartbeat(h, "m1", -1)
    assert epoch > 0
    altered = ask(h, AlterShareGroupOffsets, "q", (("orders", ((0, 7), (5, 0))), ("nope", ((0, 0),))))
    assert altered.error_code == ErrorCode.NONE
    assert altered.topics == (("orders", T, ((0, ErrorCode.NONE), (5, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))),
                              ("nope", None, ((0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),)))
    assert states(h) == {}, "what was in flight is forgotten"
    restart(h)
    described = ask(h, DescribeShareGroupOffsets, (("q", None),), ((T, 0, 10),))
    (group,) = described.groups
    assert [(t["topic_name"], [(r["partition_index"], r["start_offset"], r["lag"]) for r in t["partitions"]])
            for t in group["topics"]] == [("orders", [(0, 7, 3), (1, 0, -1)])]  # no log end handed in for 1


def test_delete_forgets_a_topic_and_needs_an_existing_empty_share_group() -> None:
    h = share_harness()
    joined_member(h, "m1")
    assert ask(h, DeleteShareGroupOffsets, "q", ("orders",)).error_code == ErrorCode.NON_EMPTY_GROUP
    heartbeat(h, "m1", -1)
    assert ask(h, DeleteShareGroupOffsets, "nobody", ("orders",)).error_code == ErrorCode.GROUP_ID_NOT_FOUND
    deleted = ask(h, DeleteShareGroupOffsets, "q", ("orders", "nope"))
    assert deleted.topics == (("orders", T, ((None, ErrorCode.NONE),)),
                              ("nope", None, ((None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),)))
    (group,) = ask(h, DescribeShareGroupOffsets, (("q", None),)).groups
    assert group["error_code"] == ErrorCode.NONE and group["topics"] == []
    restart(h)
    (named,) = ask(h, DescribeShareGroupOffsets, (("q", (("orders", T, (0,)),)),)).groups
    assert named["topics"][0]["partitions"][0]["start_offset"] == -1


def test_a_closed_connection_releases_only_the_sessions_it_opened() -> None:
    h = share_harness()
    joined_member(h, "m1")
    joined_member(h, "m2")
    fetch(h, "m1", 0, max_records=5)  # both on "conn-1" (the helper's connection)
    assert ask(h, ShareConnectionClosed, "conn-2").sessions == 0
    assert set(states(h).values()) == {RecordState.ACQUIRED}, "another connection: nothing released"
    closed = ask(h, ShareConnectionClosed, "conn-1")
    assert closed.sessions == 1
    assert set(states(h).values()) == {RecordState.AVAILABLE}
    assert fetch(h, "m1", 1, reads=()).error_code == ErrorCode.SHARE_SESSION_NOT_FOUND, "the session is gone"


def test_transitions_are_reported_once_and_a_restart_reports_nothing() -> None:
    h = share_harness()
    joined_member(h, "m1")
    fetch(h, "m1", 0, max_records=10)
    acks = ShareAckPartition(T, 0, ((0, 3, (ACCEPT,)), (4, 5, (RELEASE,)), (6, 6, (REJECT,))))
    fetch(h, "m1", 1, reads=(), acks=(acks,))
    assert totals(h) == {"acquired": 10, "acknowledged": 4, "released": 2, "archived": 1, "lock_expired": 0}
    h.advance(h.config.share_record_lock_duration_ms + 1)  # 7-9 were never acknowledged
    assert totals(h) == {"acquired": 10, "acknowledged": 4, "released": 2, "archived": 1, "lock_expired": 3}
    renewed = fetch(h, "m1", 2, reads=(ShareReadPartition(T, 0, 0, ((0, 4), (5, 9))),), max_records=2)
    assert renewed.partitions[0].acquired == ((4, 5, 2),)
    assert totals(h)["acquired"] == 12, "a redelivery is a delivery"
    ref = h.next_ref()
    h.send(ShareFetch(ref, "q", "m1", 3, "conn-1", 2, is_renew_ack=True, acknowledge_only=True,
                      acks=(ShareAckPartition(T, 0, ((4, 5, (RENEW,)),)),)))
    assert h.reply(ref).partitions[0].ack_error_code == ErrorCode.NONE
    assert totals(h)["acquired"] == 12, "a renewed lock is not a delivery"
    before = totals(h)
    restart(h)  # a load releases what is acquired: those are released records, nothing else again
    after = totals(h)
    assert after == {**before, "released": before["released"] + 2}


def test_describe_share_partitions_counts_what_is_in_flight_by_state() -> None:
    h = share_harness()
    joined_member(h, "m1")
    fetch(h, "m1", 0, max_records=10)
    fetch(h, "m1", 1, reads=(), acks=(ShareAckPartition(T, 0, ((2, 3, (ACCEPT,)), (4, 4, (REJECT,)))),))
    (group, other) = ask(h, DescribeSharePartitions, ("q", "nobody")).groups
    assert other["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND
    rows = {r["partition_index"]: r for r in group["partitions"]}
    assert rows[0] == {"topic_name": TOPIC.name, "partition_index": 0, "start_offset": 0, "available": 0,
                       "acquired": 7, "acknowledged": 2, "archived": 1}
    assert rows[1]["start_offset"] == 0 and rows[1]["acquired"] == 0
