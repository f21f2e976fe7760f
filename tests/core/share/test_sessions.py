"""Share sessions as Kafka's ShareSessionCache keeps them: opened at epoch 0, ordered by epoch,
closed at -1 or with their connection, bounded in number; Kafka's error codes for the rest."""

from __future__ import annotations

from uuid import UUID

from coordinator.core.errors import ErrorCode
from coordinator.core.share.sessions import INT32_MAX, ShareSessions, next_epoch

T = UUID(int=7)


def test_a_session_opens_at_0_and_follows_its_epochs() -> None:
    s = ShareSessions()
    opened = s.fetch("q", "m", 0, "conn-1", has_acks=False, added=[(T, 0), (T, 1)])
    assert opened.error == ErrorCode.NONE and opened.fetch_partitions == {(T, 0), (T, 1)}
    step = s.fetch("q", "m", 1, "conn-1", has_acks=True, added=[(T, 2)], forgotten=[(T, 0)])
    assert step.fetch_partitions == {(T, 1), (T, 2)}
    assert s.acknowledge("q", "m", 2).error == ErrorCode.NONE
    assert s.fetch("q", "m", 3, "conn-1", has_acks=False).error == ErrorCode.NONE
    assert s.get("q", "m").epoch == 4  # type: ignore[union-attr]


def test_epochs_out_of_order_and_unknown_sessions_get_kafkas_codes() -> None:
    s = ShareSessions()
    assert s.fetch("q", "m", 3, "c", has_acks=False).error == ErrorCode.SHARE_SESSION_NOT_FOUND
    assert s.fetch("q", "m", -1, "c", has_acks=False).error == ErrorCode.SHARE_SESSION_NOT_FOUND
    assert s.acknowledge("q", "m", 1).error == ErrorCode.SHARE_SESSION_NOT_FOUND
    assert s.fetch("q", "m", 0, "c", has_acks=True).error == ErrorCode.INVALID_REQUEST, "acks on a new session"
    s.fetch("q", "m", 0, "c", has_acks=False)
    assert s.fetch("q", "m", 2, "c", has_acks=False).error == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    assert s.fetch("q", "m", 1, "c", has_acks=False).error == ErrorCode.NONE
    assert s.fetch("q", "m", 1, "c", has_acks=False).error == ErrorCode.INVALID_SHARE_SESSION_EPOCH, "replayed"
    assert s.acknowledge("q", "m", 0).error == ErrorCode.INVALID_SHARE_SESSION_EPOCH


def test_the_final_request_fetches_nothing_and_closing_removes_the_session() -> None:
    s = ShareSessions()
    s.fetch("q", "m", 0, "c", has_acks=False, added=[(T, 0)])
    final = s.fetch("q", "m", -1, "c", has_acks=True)
    assert final.final and final.fetch_partitions == frozenset()
    assert s.close("q", "m") is not None and s.get("q", "m") is None


def test_the_cache_is_bounded_but_a_member_may_reopen() -> None:
    s = ShareSessions(max_sessions=1)
    s.fetch("q", "a", 0, "c", has_acks=False)
    assert s.fetch("q", "b", 0, "c", has_acks=False).error == ErrorCode.SHARE_SESSION_LIMIT_REACHED
    assert s.fetch("q", "a", 0, "c", has_acks=False).error == ErrorCode.NONE


def test_a_closed_connection_ends_only_the_sessions_it_still_owns() -> None:
    s = ShareSessions()
    s.fetch("q", "a", 0, "old", has_acks=False)
    s.fetch("q", "b", 0, "old", has_acks=False)
    s.fetch("q", "a", 0, "new", has_acks=False)  # a reopened on another connection (KAFKA-19950)
    gone = s.connection_closed("old")
    assert [x.member_id for x in gone] == ["b"]
    assert s.get("q", "a") is not None and len(s) == 1


def test_the_epoch_wraps_to_1_after_int32_max() -> None:
    assert next_epoch(INT32_MAX) == 1 and next_epoch(0) == 1 and next_epoch(41) == 42
