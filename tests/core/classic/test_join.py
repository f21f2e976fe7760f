"""JoinGroup: creation, KIP-394, the join barrier, the initial delay, protocol selection, errors."""

from __future__ import annotations

from coordinator.core.config import GroupConfig
from coordinator.core.errors import ErrorCode
from coordinator.core.events import RebalanceCompleted, SessionExpired
from coordinator.core.records import GroupMetadataKey, GroupMetadataValue
from tests.core.harness import FAST, Harness

OK = ErrorCode.NONE


def test_first_join_creates_group_durably_and_requires_member_id() -> None:
    h = Harness()
    ref = h.join("g")
    response = h.reply(ref)
    assert response.error_code == ErrorCode.MEMBER_ID_REQUIRED
    assert response.member_id == "client-1"
    assert response.generation_id == -1
    # Kafka 4 writes an "empty group" record when a join creates a group and writes nothing else.
    assert [r.key for r in h.records] == [GroupMetadataKey("g")]
    value = h.records[0].value
    assert isinstance(value, GroupMetadataValue)
    assert (value.protocol_type, value.generation, value.members) == ("", 0, ())
    group = h.group("g")
    assert h.state("g") == "Empty"
    assert list(group.pending_join_members) == ["client-1"]
    assert h.timers[("classic-heartbeat", "g", "client-1")] == h.now + 10_000


def test_member_id_required_flow_then_join_completes() -> None:
    h = Harness()
    ref, member_id = h.join_new("g")
    assert h.pending(ref)
    assert h.state("g") == "PreparingRebalance"
    h.advance(0)  # initial delay 0: completes on its timer
    response = h.reply(ref)
    assert response.error_code == OK
    assert (response.member_id, response.leader, response.generation_id) == (member_id, member_id, 1)
    assert response.protocol_name == "range"
    assert response.protocol_type == "consumer"
    assert [m.member_id for m in response.members] == [member_id]
    assert h.state("g") == "CompletingRebalance"


def test_old_versions_join_without_member_id_required() -> None:
    h = Harness()
    ref = h.join("g", require_known_member_id=False)
    assert h.pending(ref)
    assert list(h.group("g").members) == ["client-1"]


def test_static_members_never_get_member_id_required() -> None:
    h = Harness()
    ref = h.join("g", instance_id="i1")
    assert h.pending(ref)
    assert list(h.group("g").static_members) == ["i1"]


def test_pending_member_expires_after_its_session_timeout() -> None:
    h = Harness()
    member_id = h.reply(h.join("g", session_timeout_ms=7_000)).member_id
    h.advance(6_999)
    assert member_id in h.group("g").pending_join_members
    h.advance(1)
    assert not h.group("g").pending_join_members
    assert h.events_of(SessionExpired)[-1] == SessionExpired("g", member_id)
    late = h.join("g", member_id)
    assert h.reply(late).error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_pending_member_holds_the_join_barrier_until_it_expires() -> None:
    h = Harness()
    (leader, follower), _ = h.stable_group("g", 2)
    newcomer = h.reply(h.join("g", client_id="new")).member_id  # MEMBER_ID_REQUIRED, no rebalance
    assert h.state("g") == "Stable"
    r1 = h.join("g", leader)
    r2 = h.join("g", follower)
    assert h.state("g") == "PreparingRebalance"
    assert h.pending(r1) and h.pending(r2), "the pending id must hold the barrier"
    h.advance(10_000)  # the pending id's session timeout
    assert newcomer not in h.group("g").pending_join_members
    assert h.reply(r1).generation_id == 2 and h.reply(r2).generation_id == 2


def test_initial_delay_is_extended_by_newcomers_and_capped_by_rebalance_timeout() -> None:
    h = Harness(GroupConfig(group_initial_rebalance_delay_ms=3_000))
    start = h.now
    refs = [h.join_new("g", client_id="a", rebalance_timeout_ms=10_000)[0]]
    # A newcomer in every delay window: 3000 + 3000 + 3000 + 1000 (capped at the rebalance timeout).
    for _ in range(4):
        h.advance(2_000)
        refs.append(h.join_new("g", client_id="x", rebalance_timeout_ms=10_000)[0])
    h.advance(start + 9_999 - h.now)
    assert all(h.pending(r) for r in refs)
    h.advance(1)
    assert h.now == start + 10_000
    assert all(h.reply(r).generation_id == 1 for r in refs)


def test_initial_delay_without_newcomers_completes_after_one_delay() -> None:
    h = Harness(GroupConfig(group_initial_rebalance_delay_ms=3_000))
    ref, _ = h.join_new("g")
    h.advance(2_999)
    assert h.pending(ref)
    h.advance(1)
    assert h.reply(ref).error_code == OK


def test_initial_rebalance_waits_for_its_timer_even_if_everyone_joined() -> None:
    h = Harness(GroupConfig(group_initial_rebalance_delay_ms=3_000))
    ref, member_id = h.join_new("g")
    again = h.join("g", member_id)  # the same member re-sends its join: still parked
    assert h.pending(ref) and h.pending(again)
    assert h.state("g") == "PreparingRebalance"


def test_rebalance_completes_as_soon_as_all_members_rejoined() -> None:
    h = Harness()
    (leader, follower), gen = h.stable_group("g", 2)
    r1 = h.join("g", leader)  # a leader's join always rebalances
    assert h.state("g") == "PreparingRebalance"
    assert h.pending(r1)
    r2 = h.join("g", follower)
    assert h.reply(r1).generation_id == gen + 1
    assert [m.member_id for m in h.reply(r1).members] == [leader, follower]
    assert h.reply(r2).members == ()
    assert h.events_of(RebalanceCompleted) == [RebalanceCompleted("g", 1, 0, 2)]  # only Stable/Empty count


def test_join_barrier_timeout_drops_dynamic_members_that_did_not_rejoin() -> None:
    h = Harness()
    (leader, follower), gen = h.stable_group("g", 2, session_timeout_ms=20_000, rebalance_timeout_ms=15_000)
    h.heartbeat("g", follower, gen)
    ref = h.join("g", leader, session_timeout_ms=20_000, rebalance_timeout_ms=15_000)
    h.advance(14_999)
    assert h.pending(ref)
    h.advance(1)
    response = h.reply(ref)
    assert response.generation_id == gen + 1
    assert [m.member_id for m in response.members] == [leader]
    assert list(h.group("g").members) == [leader]


def test_new_member_join_timeout_drops_a_parked_new_member() -> None:
    h = Harness()
    slow = {"session_timeout_ms": 400_000, "rebalance_timeout_ms": 500_000}
    (leader, _follower), _ = h.stable_group("g", 2, **slow)
    newcomer_ref, newcomer = h.join_new("g", client_id="new")
    assert h.state("g") == "PreparingRebalance"
    h.join("g", leader, **slow)
    h.advance(300_000)
    assert h.reply(newcomer_ref).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert newcomer not in h.group("g").members
    assert h.state("g") == "PreparingRebalance"  # still waiting for the silent follower


def test_protocol_selected_by_vote_among_common_protocols() -> None:
    h = Harness()
    prefs = [
        (("range", b"1"), ("roundrobin", b"1"), ("only-a", b"")),
        (("roundrobin", b"2"), ("range", b"2")),
        (("roundrobin", b"3"), ("range", b"3")),
    ]
    refs = [h.join_new("g", client_id=f"c{i}", protocols=p)[0] for i, p in enumerate(prefs)]
    h.advance(0)
    assert {h.reply(r).protocol_name for r in refs} == {"roundrobin"}
    leader_response = next(h.reply(r) for r in refs if h.reply(r).members)
    assert [m.metadata for m in leader_response.members] == [b"1", b"2", b"3"]


def test_inconsistent_group_protocol() -> None:
    h = Harness()
    # Empty group: protocol type and protocols must be non-empty. The group is still created durably.
    assert h.reply(h.join("g", protocol_type="")).error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert h.reply(h.join("g", protocols=())).error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert h.state("g") == "Empty" and len(h.records) == 1
    h.stable_group("g", 1)
    other_type = h.join("g", protocol_type="connect")
    assert h.reply(other_type).error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    nothing_common = h.join("g", protocols=(("sticky", b""),))
    assert h.reply(nothing_common).error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL


def test_sole_member_cannot_switch_to_an_unshared_protocol() -> None:
    h = Harness()
    (member,), _ = h.stable_group("g", 1)
    ref = h.join("g", member, protocols=(("sticky", b""),))
    assert h.reply(ref).error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert h.reply(ref).member_id == member


def test_request_validation_errors() -> None:
    h = Harness()
    assert h.reply(h.join("")).error_code == ErrorCode.INVALID_GROUP_ID
    assert h.reply(h.join("g", session_timeout_ms=5_999)).error_code == ErrorCode.INVALID_SESSION_TIMEOUT
    assert h.reply(h.join("g", session_timeout_ms=1_800_001)).error_code == ErrorCode.INVALID_SESSION_TIMEOUT
    assert h.records == [] and h.state("g") == "absent"


def test_unknown_member_ids() -> None:
    h = Harness()
    absent = h.reply(h.join("nope", "m-1"))
    assert (absent.error_code, absent.member_id) == (ErrorCode.UNKNOWN_MEMBER_ID, "m-1")
    assert h.state("nope") == "absent"
    h.stable_group("g", 1)
    assert h.reply(h.join("g", "stranger")).error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_group_max_size() -> None:
    h = Harness(GroupConfig(group_initial_rebalance_delay_ms=0, group_max_size=2))
    (_leader, follower), gen = h.stable_group("g", 2)
    full = h.reply(h.join("g"))
    assert (full.error_code, full.member_id) == (ErrorCode.GROUP_MAX_SIZE_REACHED, "")
    # Known members are always accepted while Stable.
    assert h.reply(h.join("g", follower)).generation_id == gen


def test_group_max_size_in_preparing_rebalance_counts_parked_members() -> None:
    h = Harness(GroupConfig(group_initial_rebalance_delay_ms=3_000, group_max_size=2))
    first, _ = h.join_new("g", client_id="a")
    second, _ = h.join_new("g", client_id="b")
    ref = h.join("g", require_known_member_id=False, client_id="c")
    assert h.reply(ref).error_code == ErrorCode.GROUP_MAX_SIZE_REACHED
    assert len(h.group("g").members) == 2
    assert h.pending(first) and h.pending(second)


def test_rejoin_in_completing_rebalance_with_same_protocols_is_answered_at_once() -> None:
    h = Harness()
    _ref, member_id = h.join_new("g")
    h.advance(0)
    again = h.reply(h.join("g", member_id))
    assert again.error_code == OK
    assert (again.generation_id, again.leader) == (1, member_id)
    assert [m.member_id for m in again.members] == [member_id]  # the leader gets the members again
    assert h.state("g") == "CompletingRebalance"


def test_rejoin_in_completing_rebalance_with_new_protocols_rebalances() -> None:
    h = Harness()
    ids = [h.join_new("g", client_id=f"c{i}")[1] for i in range(2)]
    h.advance(0)
    group = h.group("g")
    follower = next(m for m in ids if m != group.leader_id)
    parked_sync = h.sync("g", follower, 1)
    assert h.pending(parked_sync)
    h.join("g", follower, protocols=(("range", b"changed"),))
    assert h.state("g") == "PreparingRebalance"
    assert h.reply(parked_sync).error_code == ErrorCode.REBALANCE_IN_PROGRESS


def test_stable_follower_rejoining_unchanged_gets_current_generation() -> None:
    h = Harness()
    (leader, follower), gen = h.stable_group("g", 2)
    response = h.reply(h.join("g", follower))
    assert (response.error_code, response.generation_id, response.leader, response.members) == (OK, gen, leader, ())
    assert h.state("g") == "Stable"


def test_stable_follower_with_changed_metadata_rebalances() -> None:
    h = Harness()
    (_leader, follower), _ = h.stable_group("g", 2)
    ref = h.join("g", follower, protocols=(("range", b"new-subscription"),))
    assert h.pending(ref)
    assert h.state("g") == "PreparingRebalance"


def test_join_in_dead_group_is_coordinator_not_available() -> None:
    h = Harness()
    (member,), _ = h.stable_group("g", 1)
    h._absorb(h.shard.on_unloaded(h.now))
    assert h.state("g") == "Dead"
    assert h.reply(h.join("g")).error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert h.reply(h.join("g", member)).error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE


def test_fast_config_is_kafka_defaults_except_the_delay() -> None:
    assert GroupConfig(group_initial_rebalance_delay_ms=0) == FAST
