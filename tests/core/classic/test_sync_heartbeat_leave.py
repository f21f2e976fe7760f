"""SyncGroup, Heartbeat, LeaveGroup, session expiry and the sync barrier timeout."""

from __future__ import annotations

from coordinator.core.errors import ErrorCode
from coordinator.core.events import MemberLeft, SessionExpired
from coordinator.core.records import GroupMetadataKey, GroupMetadataValue
from coordinator.core.requests import LeavingMember
from tests.core.harness import Harness

OK = ErrorCode.NONE


def _completing(h: Harness, n: int = 2, **kwargs: object) -> tuple[str, list[str]]:
    ids = [h.join_new("g", client_id=f"c{i}", **kwargs)[1] for i in range(n)]  # type: ignore[arg-type]
    h.advance(0)
    leader = h.group("g").leader_id
    assert leader is not None
    return leader, [m for m in ids if m != leader]


# ---- SyncGroup -------------------------------------------------------------------------------------


def test_leader_sync_persists_assignment_and_releases_everyone_in_the_same_result() -> None:
    h = Harness()
    leader, (follower,) = _completing(h)
    follower_ref = h.sync("g", follower, 1)
    assert h.pending(follower_ref)
    records_before = len(h.records)
    leader_ref = h.sync("g", leader, 1, [(leader, b"L"), (follower, b"F"), ("unknown", b"?")])
    result = h.results[-1]
    assert [r.key for r in result.records] == [GroupMetadataKey("g")]
    assert {reply.ref for reply in result.replies} == {leader_ref, follower_ref}
    value = h.records[records_before].value
    assert isinstance(value, GroupMetadataValue)
    assert (value.generation, value.protocol, value.leader) == (1, "range", leader)
    assert {m.member_id: m.assignment for m in value.members} == {leader: b"L", follower: b"F"}
    assert h.reply(follower_ref) == h.reply(follower_ref)
    assert (h.reply(follower_ref).assignment, h.reply(follower_ref).protocol_name) == (b"F", "range")
    assert h.reply(leader_ref).protocol_type == "consumer"
    assert h.state("g") == "Stable"


def test_members_missing_from_the_leader_assignment_get_empty_bytes() -> None:
    h = Harness()
    leader, (follower,) = _completing(h)
    h.sync("g", leader, 1, [(leader, b"L")])
    assert h.reply(h.sync("g", follower, 1)).assignment == b""


def test_sync_in_stable_returns_the_stored_assignment() -> None:
    h = Harness()
    (_leader, follower), gen = h.stable_group("g", 2)
    response = h.reply(h.sync("g", follower, gen))
    assert (response.error_code, response.assignment) == (OK, f"assign-{follower}".encode())


def test_sync_errors() -> None:
    h = Harness()
    assert h.reply(h.sync("", "m", 1)).error_code == ErrorCode.INVALID_GROUP_ID
    assert h.reply(h.sync("nope", "m", 1)).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    h.join("empty")  # MEMBER_ID_REQUIRED: an Empty group
    assert h.reply(h.sync("empty", "client-1", 0)).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    (leader, follower), gen = h.stable_group("g", 2)
    assert h.reply(h.sync("g", "stranger", gen)).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert h.reply(h.sync("g", follower, gen + 1)).error_code == ErrorCode.ILLEGAL_GENERATION
    wrong_name = h.sync("g", follower, gen, protocol_type="consumer", protocol_name="roundrobin")
    assert h.reply(wrong_name).error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    wrong_type = h.sync("g", follower, gen, protocol_type="connect")
    assert h.reply(wrong_type).error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    h.join("g", leader)  # -> PreparingRebalance
    assert h.reply(h.sync("g", follower, gen)).error_code == ErrorCode.REBALANCE_IN_PROGRESS


def test_sync_barrier_timeout_removes_members_that_never_synced() -> None:
    h = Harness()
    leader, (follower,) = _completing(h, session_timeout_ms=60_000, rebalance_timeout_ms=20_000)
    h.sync("g", leader, 1, [(leader, b"L"), (follower, b"F")])
    assert h.state("g") == "Stable"
    h.heartbeat("g", leader, 1)
    h.advance(20_000)
    assert MemberLeft("g", follower, "did-not-sync") in h.events
    assert list(h.group("g").members) == [leader]
    assert h.state("g") == "PreparingRebalance"


def test_sync_timer_is_cancelled_once_everyone_synced() -> None:
    h = Harness()
    h.stable_group("g", 2)
    assert ("classic-sync", "g") not in h.timers


# ---- Heartbeat -------------------------------------------------------------------------------------


def test_heartbeat_per_state() -> None:
    h = Harness()
    assert h.reply(h.heartbeat("", "m", 0)).error_code == ErrorCode.INVALID_GROUP_ID
    assert h.reply(h.heartbeat("nope", "m", 0)).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    h.join("empty")
    assert h.reply(h.heartbeat("empty", "client-1", 0)).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    leader, (follower,) = _completing(h)
    # CompletingRebalance: members heartbeat between JoinGroup and SyncGroup responses.
    assert h.reply(h.heartbeat("g", follower, 1)).error_code == OK
    assert h.reply(h.heartbeat("g", follower, 0)).error_code == ErrorCode.ILLEGAL_GENERATION
    assert h.reply(h.heartbeat("g", "stranger", 1)).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    h.sync("g", leader, 1, [])
    assert h.reply(h.heartbeat("g", follower, 1)).error_code == OK
    h.join("g", leader)
    deadline_before = h.timers[("classic-heartbeat", "g", follower)]
    h.advance(1)
    assert h.reply(h.heartbeat("g", follower, 1)).error_code == ErrorCode.REBALANCE_IN_PROGRESS
    assert h.timers[("classic-heartbeat", "g", follower)] == deadline_before + 1  # but the session lives


def test_session_expiry_of_a_follower_rebalances_the_group() -> None:
    h = Harness()
    (leader, follower), gen = h.stable_group("g", 2)
    for _ in range(3):
        h.advance(5_000)
        h.heartbeat("g", leader, gen)
    assert h.events_of(SessionExpired) == [SessionExpired("g", follower)]
    assert list(h.group("g").members) == [leader]
    assert h.state("g") == "PreparingRebalance"
    assert h.reply(h.heartbeat("g", leader, gen)).error_code == ErrorCode.REBALANCE_IN_PROGRESS
    response = h.reply(h.join("g", leader))  # the only member left: the barrier completes at once
    assert (response.generation_id, response.leader) == (gen + 1, leader)


def test_last_member_expiring_empties_the_group_durably() -> None:
    h = Harness()
    (_member,), gen = h.stable_group("g", 1)
    h.advance(10_000)
    assert h.state("g") == "Empty"
    value = h.records[-1].value
    assert isinstance(value, GroupMetadataValue)
    assert (value.generation, value.protocol, value.leader, value.members) == (gen + 1, None, None, ())
    assert value.protocol_type == "consumer"  # kept when the group empties


def test_parked_members_are_not_expired() -> None:
    h = Harness()
    (leader, _follower), gen = h.stable_group("g", 2, session_timeout_ms=10_000, rebalance_timeout_ms=60_000)
    h.join("g", leader, session_timeout_ms=10_000, rebalance_timeout_ms=60_000)
    h.advance(10_000)  # the parked leader survives, the silent follower does not
    assert list(h.group("g").members) == [leader]
    assert h.group("g").generation_id == gen + 1


def test_stale_timer_firings_are_ignored() -> None:
    h = Harness()
    (leader, _), gen = h.stable_group("g", 2)
    key = ("classic-heartbeat", "g", leader)
    old_deadline = h.timers[key]
    h.advance(1)
    h.heartbeat("g", leader, gen)
    result = h.fire(key, old_deadline)
    assert (result.records, result.replies, result.events) == ([], [], [])
    assert leader in h.group("g").members


# ---- LeaveGroup ------------------------------------------------------------------------------------


def test_leave_rebalances_and_answers_per_member() -> None:
    h = Harness()
    (leader, follower), _gen = h.stable_group("g", 2)
    ref = h.leave("g", follower, "stranger", LeavingMember(leader, "not-static"))
    response = h.reply(ref)
    assert response.error_code == OK
    assert [(m.member_id, m.error_code) for m in response.members] == [
        (follower, OK),
        ("stranger", ErrorCode.UNKNOWN_MEMBER_ID),
        (leader, ErrorCode.UNKNOWN_MEMBER_ID),  # unknown instance id
    ]
    assert MemberLeft("g", follower, "leave-group") in h.events
    assert h.state("g") == "PreparingRebalance"
    assert ("classic-heartbeat", "g", follower) not in h.timers


def test_last_member_leaving_empties_the_group_with_a_new_generation() -> None:
    h = Harness()
    (member,), gen = h.stable_group("g", 1)
    h.leave("g", member)
    assert h.state("g") == "Empty"
    assert h.group("g").generation_id == gen + 1


def test_leave_of_a_parked_member_answers_its_join() -> None:
    h = Harness()
    (leader, _follower), _ = h.stable_group("g", 2)
    join_ref = h.join("g", leader)
    h.leave("g", leader)
    assert h.reply(join_ref).error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_leave_of_a_pending_member() -> None:
    h = Harness()
    (_leader, _follower), _ = h.stable_group("g", 2)
    pending = h.reply(h.join("g", client_id="new")).member_id
    assert h.reply(h.leave("g", pending)).members[0].error_code == OK
    assert not h.group("g").pending_join_members
    # Kafka counts the pending id as a successful leave and rebalances (a harmless quirk).
    assert h.state("g") == "PreparingRebalance"


def test_leave_in_preparing_rebalance_may_complete_the_join() -> None:
    h = Harness()
    (leader, follower), gen = h.stable_group("g", 2)
    join_ref = h.join("g", leader)
    h.leave("g", follower)
    assert h.reply(join_ref).generation_id == gen + 1


def test_leave_of_absent_group_and_errors() -> None:
    h = Harness()
    response = h.reply(h.leave("nope", "m", LeavingMember("", "i")))
    assert response.error_code == OK
    assert [m.error_code for m in response.members] == [ErrorCode.UNKNOWN_MEMBER_ID] * 2
    assert h.reply(h.leave("", "m")).error_code == ErrorCode.INVALID_GROUP_ID
    h.stable_group("g", 1)
    h._absorb(h.shard.on_unloaded(h.now))
    assert h.reply(h.leave("g", "m")).error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
