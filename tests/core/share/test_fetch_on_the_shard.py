"""ShareFetch and ShareAcknowledge on the shard, through the core harness (replay equals live after
every step): sessions, acknowledgements before acquisition, lock expiry, a member leaving, a
restart, each written as records before the answer."""

from __future__ import annotations

from coordinator.core.config import GroupConfig
from coordinator.core.errors import ErrorCode
from coordinator.core.share.records import RecordState
from coordinator.core.share.requests import ShareAckPartition, ShareFetch, ShareReadPartition
from tests.core.share.test_registration import (
    TOPIC,
    heartbeat,
    joined_member,
    share_harness,
    share_type,
)

T = TOPIC.topic_id
ACCEPT, RELEASE, REJECT = 1, 2, 3
READ_0 = ShareReadPartition(T, 0, 0, ((0, 4), (5, 9)))  # two batches of five records at offsets 0-9


def fetch(h, member: str, epoch: int, reads=(READ_0,), acks=(), max_records: int = 100, final: bool = False,
          acknowledge_only: bool = False):
    ref = h.next_ref()
    h.send(ShareFetch(ref, "q", member, -1 if final else epoch, "conn-1", 2, max_records,
                      added=((T, 0),) if epoch == 0 else (), acks=tuple(acks), reads=tuple(reads),
                      acknowledge_only=acknowledge_only))
    return h.reply(ref)


def states(h) -> dict[int, RecordState]:
    p = share_type(h).partitions.get("q", T, 0)
    assert p is not None
    return {o: s.state for o, s in p.offsets.items()}


def test_a_fetch_acquires_and_the_next_one_acknowledges_first() -> None:
    h = share_harness()
    joined_member(h, "m1")
    first = fetch(h, "m1", 0, max_records=5)
    assert first.error_code == ErrorCode.NONE
    assert [(a.partition, a.acquired) for a in first.partitions] == [(0, ((0, 4, 1),))]
    second = fetch(h, "m1", 1, acks=(ShareAckPartition(T, 0, ((0, 4, (ACCEPT,)),)),))
    (answer,) = second.partitions
    assert answer.ack_error_code == ErrorCode.NONE and answer.acquired == ((5, 9, 1),)
    p = share_type(h).partitions.get("q", T, 0)
    assert p is not None and p.start_offset == 5  # 0-4 are finished and forgotten


def test_bad_acknowledgements_get_kafkas_codes_and_change_nothing() -> None:
    h = share_harness()
    joined_member(h, "m1")
    fetch(h, "m1", 0, max_records=5)
    never = fetch(h, "m1", 1, reads=(), acks=(ShareAckPartition(T, 0, ((3, 7, (ACCEPT,)),)),))
    assert never.partitions[0].ack_error_code == ErrorCode.INVALID_REQUEST  # 5-7 were never delivered
    assert set(states(h).values()) == {RecordState.ACQUIRED}  # and 3-4 were not acknowledged either
    once = fetch(h, "m1", 2, reads=(), acks=(ShareAckPartition(T, 0, ((0, 3, (ACCEPT,)),)),))
    assert once.partitions[0].ack_error_code == ErrorCode.NONE
    twice = fetch(h, "m1", 3, reads=(), acks=(ShareAckPartition(T, 0, ((4, 4, (ACCEPT,)), (4, 4, (ACCEPT,)))),))
    assert twice.partitions[0].ack_error_code == ErrorCode.INVALID_RECORD_STATE  # acknowledged twice: refused
    assert states(h)[4] is RecordState.ACQUIRED
    assert fetch(h, "m1", 9, reads=()).error_code == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    assert fetch(h, "stranger", 4, reads=()).error_code == ErrorCode.SHARE_SESSION_NOT_FOUND
    opening_with_acks = fetch(h, "m2", 0, acks=(ShareAckPartition(T, 0, ((5, 5, (ACCEPT,)),)),))
    assert opening_with_acks.error_code == ErrorCode.INVALID_REQUEST


def test_released_records_are_acquired_again_and_rejected_ones_archived() -> None:
    h = share_harness()
    joined_member(h, "m1")
    fetch(h, "m1", 0, max_records=5)
    answer = fetch(h, "m1", 1, acks=(ShareAckPartition(T, 0, ((0, 4, (RELEASE, REJECT, ACCEPT, RELEASE, ACCEPT)),)),),
                   max_records=3)
    # 0 and 3 redelivered (a second delivery each), then the next log batch whole (never split)
    assert answer.partitions[0].acquired == ((0, 0, 2), (3, 3, 2), (5, 9, 1))
    assert states(h)[1] is RecordState.ARCHIVED


def test_expired_locks_release_records_and_late_acknowledgements_are_refused() -> None:
    h = share_harness()
    joined_member(h, "m1")
    fetch(h, "m1", 0, max_records=5)
    h.advance(h.config.share_record_lock_duration_ms + 1)  # the lock timer fires
    assert all(s is RecordState.AVAILABLE for s in states(h).values())
    late = fetch(h, "m1", 1, reads=(), acks=(ShareAckPartition(T, 0, ((0, 4, (ACCEPT,)),)),))
    assert late.partitions[0].ack_error_code == ErrorCode.INVALID_RECORD_STATE


def test_a_member_closing_its_session_releases_what_it_holds_and_a_leave_does_not() -> None:
    h = share_harness()
    joined_member(h, "m1")
    fetch(h, "m1", 0, max_records=5)
    assert heartbeat(h, "m1", -1, topics=None).member_epoch == -1
    # librdkafka leaves before its final ShareAcknowledge: the records and the session wait for it
    assert set(states(h).values()) == {RecordState.ACQUIRED}
    closed = fetch(h, "m1", 1, reads=(), acks=(ShareAckPartition(T, 0, ((0, 1, (ACCEPT,)),)),), final=True,
                   acknowledge_only=True)
    assert closed.error_code == ErrorCode.NONE and closed.partitions[0].ack_error_code == ErrorCode.NONE
    assert [states(h).get(o) for o in range(2, 5)] == [RecordState.AVAILABLE] * 3  # released with the session



def test_a_member_fenced_by_its_session_timeout_releases_before_its_locks_end() -> None:
    h = share_harness(GroupConfig(group_initial_rebalance_delay_ms=0, share_record_lock_duration_ms=600_000))
    joined_member(h, "m2")
    fetch(h, "m2", 0, max_records=3)
    h.advance(h.config.share_group_session_timeout_ms + 1)  # m2 goes silent: fenced, well before the locks end
    assert set(states(h).values()) == {RecordState.AVAILABLE}
    assert fetch(h, "m2", 1, reads=()).error_code == ErrorCode.SHARE_SESSION_NOT_FOUND


def test_a_restart_redelivers_what_was_acquired_and_never_what_was_acknowledged() -> None:
    h = share_harness()
    joined_member(h, "m1")
    fetch(h, "m1", 0, max_records=10)
    fetch(h, "m1", 1, reads=(), acks=(ShareAckPartition(T, 0, ((0, 4, (ACCEPT,)),)),))
    h.restart()
    assert states(h) == {o: RecordState.AVAILABLE for o in range(5, 10)}
    assert fetch(h, "m1", 2, reads=()).error_code == ErrorCode.SHARE_SESSION_NOT_FOUND  # sessions are memory
    again = fetch(h, "m1", 0, reads=(ShareReadPartition(T, 0, 0, ((5, 9),)),))
    assert again.partitions[0].acquired == ((5, 9, 2),)


def test_a_members_sessions_with_two_nodes_keep_their_own_epochs_and_a_final_request_releases_its_own() -> None:
    """Sidecar mode answers for every upstream broker: a consumer whose partitions have two leaders
    keeps a session with each (Kafka's per-broker share sessions), and neither disturbs the other."""
    h = share_harness()
    joined_member(h, "m1")
    read_1 = ShareReadPartition(T, 1, 0, ((0, 4),))

    def at(node: str, epoch: int, partition: int, reads=(), acks=(), final: bool = False):
        ref = h.next_ref()
        h.send(ShareFetch(ref, "q", "m1", -1 if final else epoch, f"conn-{node}", 2, 100,
                          added=((T, partition),) if epoch == 0 else (), acks=tuple(acks), reads=tuple(reads),
                          node=node))
        return h.reply(ref)

    assert at("1", 0, 0, reads=(READ_0,)).partitions[0].acquired == ((0, 9, 1),)
    assert at("2", 0, 1, reads=(read_1,)).partitions[0].acquired == ((0, 4, 1),)  # does not replace node 1's
    assert at("1", 1, 0).error_code == ErrorCode.NONE  # each node's epochs are its own
    assert at("2", 1, 1).error_code == ErrorCode.NONE
    assert at("2", 1, 1).error_code == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    sessions = share_type(h).sessions
    assert sessions.get("q", "m1", "1").partitions == {(T, 0)}  # type: ignore[union-attr]
    assert sessions.get("q", "m1", "2").partitions == {(T, 1)}  # type: ignore[union-attr]

    closing = at("1", 2, 0, acks=(ShareAckPartition(T, 0, ((0, 4, (ACCEPT,)),)),), final=True)
    assert closing.error_code == ErrorCode.NONE
    assert set(states(h).values()) == {RecordState.AVAILABLE}  # 5-9 released (0-4 accepted, forgotten)
    p1 = share_type(h).partitions.get("q", T, 1)
    assert p1 is not None and {s.state for s in p1.offsets.values()} == {RecordState.ACQUIRED}, "node 2's stay held"
    assert sessions.get("q", "m1", "1") is None and sessions.get("q", "m1", "2") is not None
    assert at("2", 2, 1).error_code == ErrorCode.NONE
