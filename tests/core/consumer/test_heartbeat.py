"""ConsumerGroupHeartbeat through the core: validation, member and epoch errors, joins, leaves,
lost responses, rejoin after fencing, timeouts, assignor selection."""

from __future__ import annotations

from uuid import UUID

import pytest

from coordinator.core.config import GroupConfig
from coordinator.core.consumer.member import MemberState
from coordinator.core.errors import ErrorCode
from coordinator.core.events import MemberFenced, MemberLeft, TargetAssignmentComputed
from coordinator.core.records import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMetadataKey,
    ConsumerGroupTargetAssignmentMemberKey,
)
from coordinator.core.requests import HeartbeatTopicPartitions
from tests.core.consumer.harness import CONSUMER, ConsumerHarness

OK = ErrorCode.NONE
E = ErrorCode


# ---- request validation (Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid) ------------------

JOIN = {"names": ("foo",), "owned": {}, "rebalance_timeout_ms": 30_000}


@pytest.mark.parametrize(
    ("member_id", "epoch", "group", "kwargs", "message"),
    [
        ("m", 0, " ", JOIN, "GroupId can't be empty."),
        ("m", 0, "g", {**JOIN, "instance_id": " "}, "InstanceId can't be empty."),
        ("m", 0, "g", {**JOIN, "rack_id": ""}, "RackId can't be empty."),
        ("", 0, "g", JOIN, "MemberId can't be empty."),  # v1: the client generates it
        (" ", 1, "g", {}, "MemberId can't be empty."),
        ("m", 0, "g", {**JOIN, "rebalance_timeout_ms": -1}, "RebalanceTimeoutMs must be provided in first request."),
        ("m", 0, "g", {**JOIN, "owned": None}, "TopicPartitions must be empty when (re-)joining."),
        ("m", 0, "g", {**JOIN, "owned": {"foo": [0]}}, "TopicPartitions must be empty when (re-)joining."),
        ("m", 0, "g", {**JOIN, "names": None}, "SubscribedTopicNames or SubscribedTopicRegex must be set in first request."),
        ("m", -2, "g", {}, "InstanceId can't be null."),
        ("m", -3, "g", {}, "MemberEpoch is invalid."),
    ],
)
def test_invalid_requests(member_id: str, epoch: int, group: str, kwargs: dict, message: str) -> None:
    h = ConsumerHarness({"foo": 3})
    response = h.cgh(member_id, epoch, group, **kwargs)
    assert (response.error_code, response.error_message) == (E.INVALID_REQUEST, message)
    assert (response.member_id, response.heartbeat_interval_ms, response.assignment) == (None, 0, None)
    assert h.records == []


def test_v0_join_gets_a_generated_member_id() -> None:
    h = ConsumerHarness({"foo": 3})
    response = h.cjoin("", member_id_required=False, new_member_id="generated-1")
    assert (response.error_code, response.member_id, response.member_epoch) == (OK, "generated-1", 1)
    # v0 still needs the id on later heartbeats and leaves.
    assert h.cgh("", 1, member_id_required=False).error_code == E.INVALID_REQUEST
    assert h.cgh("generated-1", 1, member_id_required=False).error_code == OK


def test_empty_subscription_and_empty_regex_are_accepted() -> None:
    h = ConsumerHarness({"foo": 3})
    response = h.cjoin("m", names=(), regex="")  # librdkafka sends "" for "no regex"
    assert (response.error_code, response.member_epoch, response.assignment) == (OK, 1, ())
    # A member with names and no regex field at all.
    assert h.cjoin("n", names=None, regex="^foo$").error_code == OK


def test_unsupported_assignor() -> None:
    h = ConsumerHarness({"foo": 3})
    response = h.cjoin("m", assignor="sticky")
    assert response.error_code == E.UNSUPPORTED_ASSIGNOR
    assert response.error_message == "ServerAssignor sticky is not supported. Supported assignors: uniform, range."


def test_invalid_regular_expression() -> None:
    h = ConsumerHarness({"foo": 3})
    response = h.cjoin("m", names=(), regex="(foo")
    assert response.error_code == E.INVALID_REGULAR_EXPRESSION
    # RE2 semantics, not Python's: back-references are invalid.
    assert h.cjoin("m", names=(), regex=r"(f)\1").error_code == E.INVALID_REGULAR_EXPRESSION
    assert h.shard.group("g") is None


# ---- group and member lookup -----------------------------------------------------------------------


def test_unknown_group_and_member() -> None:
    h = ConsumerHarness({"foo": 3})
    missing = h.cgh("m", 1)
    assert (missing.error_code, missing.error_message) == (E.GROUP_ID_NOT_FOUND, "Consumer group g not found.")
    assert h.cgh("m", -1).error_code == E.GROUP_ID_NOT_FOUND
    h.cjoin("a")
    unknown = h.cgh("b", 1)
    assert (unknown.error_code, unknown.error_message) == (E.UNKNOWN_MEMBER_ID, "Member b is not a member of group g.")
    assert h.cgh("b", -1).error_code == E.UNKNOWN_MEMBER_ID


def test_classic_group_ids_are_not_consumer_groups() -> None:
    h = ConsumerHarness({"foo": 3})
    h.stable_group("classic", 1)
    assert h.cgh("m", 1, group_id="classic").error_message == "Group classic is not a consumer group."
    # A join would upgrade the live classic group (tests/core/test_migration.py), but this one's protocol
    # metadata is no ConsumerProtocolSubscription.
    response = h.cjoin("m", group_id="classic")
    assert (response.error_code, response.error_message) == (
        E.GROUP_ID_NOT_FOUND,
        "Cannot upgrade classic group classic to consumer group because the embedded consumer protocol is malformed.",
    )
    # An EMPTY classic group (here: only offsets) is converted by the first join, offsets kept.
    h.commit("simple", {("foo", 0): 42})
    converted = h.cjoin("m", group_id="simple")
    assert (converted.error_code, converted.member_epoch) == (OK, 1)
    assert h.cgroup("simple").members["m"].member_epoch == 1
    assert h.fetch("simple", {"foo": (0,)}).topics[0].partitions[0].committed_offset == 42


def test_group_max_size() -> None:
    h = ConsumerHarness({"foo": 3}, GroupConfig(consumer_group_max_size=2))
    h.cjoin("a")
    h.cjoin("b")
    full = h.cjoin("c")
    assert (full.error_code, full.error_message) == (
        E.GROUP_MAX_SIZE_REACHED,
        "The consumer group has reached its maximum capacity of 2 members.",
    )
    assert h.cgh("a", 1).error_code == OK  # members keep heartbeating


# ---- epochs ------------------------------------------------------------------------------------------


def test_fenced_member_epoch_and_rejoin_with_the_same_member_id() -> None:
    h = ConsumerHarness({"foo": 3})
    h.cjoin("a")
    ahead = h.cgh("a", 7)
    assert ahead.error_code == E.FENCED_MEMBER_EPOCH
    assert "greater member epoch (7)" in ahead.error_message
    h.cjoin("b")  # epoch 2
    h.cgh("b", 2)
    behind = h.cgh("b", 1, owned={})
    assert behind.error_code == E.FENCED_MEMBER_EPOCH  # not b's previous epoch (-1)
    # Kafka 4.2 (KAFKA-19233): the fenced member rejoins at once with its member id and epoch 0.
    rejoined = h.cjoin("b")
    assert (rejoined.error_code, rejoined.member_epoch) == (OK, 2)
    assert h.cgroup().group_epoch == 2  # same subscription: no rebalance


def test_lost_response_previous_epoch_with_a_subset_is_accepted() -> None:
    h = ConsumerHarness({"foo": 4})
    h.cjoin("a")
    h.cjoin("b")  # group epoch 2; a must revoke two partitions
    revoking = h.cgh("a", 1)
    kept = h.named(revoking.assignment)["foo"]
    done = h.cgh("a", 1, owned={"foo": kept})
    assert done.member_epoch == 2
    # That response was lost: the client retries as a full request with epoch 1 and what it owns.
    retry = h.cgh("a", 1, names=("foo",), rebalance_timeout_ms=300_000, owned={"foo": kept})
    assert (retry.error_code, retry.member_epoch, h.named(retry.assignment)) == (OK, 2, {"foo": kept})
    # Previous epoch with partitions it does not own: fenced.
    other = {0, 1, 2, 3} - kept
    assert h.cgh("a", 1, owned={"foo": other}).error_code == E.FENCED_MEMBER_EPOCH
    # Previous epoch with null owned partitions: fenced (Kafka's isSubset(null) is false).
    assert h.cgh("a", 1).error_code == E.FENCED_MEMBER_EPOCH


def test_lost_join_response_is_retried_with_epoch_zero() -> None:
    h = ConsumerHarness({"foo": 3})
    first = h.cjoin("a")
    again = h.cjoin("a")
    assert (again.member_epoch, again.assignment) == (first.member_epoch, first.assignment)
    assert h.cgroup().group_epoch == 1


def test_full_request_gets_full_assignment_even_without_change() -> None:
    h = ConsumerHarness({"foo": 3})
    h.cjoin("a")
    assert h.cgh("a", 1).assignment is None
    full = h.cgh("a", 1, names=("foo",), rebalance_timeout_ms=300_000, owned={"foo": [0, 1, 2]})
    assert h.named(full.assignment) == {"foo": {0, 1, 2}}
    # A regex instead of names is a full request too (KAFKA-16367 with 4.x regex).
    assert h.cgh("a", 1, regex="", rebalance_timeout_ms=300_000, owned={"foo": [0, 1, 2]}).assignment is not None


def test_heartbeat_interval_comes_from_config() -> None:
    h = ConsumerHarness({"foo": 3}, GroupConfig(consumer_group_heartbeat_interval_ms=1234))
    assert h.cjoin("a").heartbeat_interval_ms == 1234
    assert h.cgh("a", 1).heartbeat_interval_ms == 1234


# ---- leaving -------------------------------------------------------------------------------------------


def test_leave_fences_and_bumps_the_epoch() -> None:
    h = ConsumerHarness({"foo": 4})
    h.cjoin("a")
    h.cjoin("b")
    h.cgh("a", 1, owned={"foo": h.cgroup().target("a")[h.tid("foo")]})
    left = h.cgh("b", -1)
    assert (left.error_code, left.member_id, left.member_epoch, left.heartbeat_interval_ms) == (OK, "b", -1, 0)
    records = h.results[-1].records
    assert [type(r.key) for r in records] == [
        ConsumerGroupCurrentMemberAssignmentKey,
        ConsumerGroupTargetAssignmentMemberKey,
        ConsumerGroupMemberMetadataKey,
        ConsumerGroupMetadataKey,
    ]
    assert [r.value is None for r in records] == [True, True, True, False]
    group = h.cgroup()
    assert (group.group_epoch, group.assignment_epoch, group.state_name) == (3, 2, "Assigning")
    assert ("consumer-session", "g", "b") not in h.timers
    a = h.cgh("a", 2)  # the next heartbeat computes the target: a gets everything back
    assert (a.member_epoch, h.named(a.assignment)) == (3, {"foo": {0, 1, 2, 3}})
    assert h.events_of(MemberLeft)[-1].reason == "leave-group"


def test_last_member_leaving_leaves_an_empty_group() -> None:
    h = ConsumerHarness({"foo": 3})
    h.cjoin("a")
    h.cgh("a", -1)
    group = h.cgroup()
    assert (group.state_name, group.group_epoch, group.members) == ("Empty", 2, {})
    assert h.cjoin("b").member_epoch == 3


# ---- static membership -------------------------------------------------------------------------------


def test_static_member_temporary_leave_and_replacement_without_rebalance() -> None:
    h = ConsumerHarness({"foo": 4})
    h.cjoin("a1", instance_id="i-a")
    h.cjoin("b", instance_id="i-b")
    h.cgh("a1", 1, owned={"foo": h.cgroup().target("a1")[h.tid("foo")]})
    h.cgh("b", 2)
    owned_by_a = h.cgroup().members["a1"].assigned_partitions
    epoch = h.cgroup().group_epoch
    # -2: the member stays with its partitions at epoch -2; no rebalance.
    gone = h.cgh("a1", -2, instance_id="i-a")
    assert (gone.error_code, gone.member_id, gone.member_epoch) == (OK, "a1", -2)
    member = h.cgroup().members["a1"]
    assert (member.member_epoch, member.assigned_partitions) == (-2, owned_by_a)
    assert h.cgroup().group_epoch == epoch
    assert h.cgroup().state_name == "Reconciling"  # a -2 member is not reconciled
    assert ("consumer-session", "g", "a1") in h.timers  # still running
    # The restarted instance comes back with a new member id and takes over the assignment.
    back = h.cjoin("a2", instance_id="i-a")
    assert back.error_code == OK
    assert h.named(back.assignment) == h.named(owned_by_a)
    group = h.cgroup()
    assert "a1" not in group.members and group.members["a2"].assigned_partitions == owned_by_a
    assert group.group_epoch == epoch and group.static_members == {"i-a": "a2", "i-b": "b"}
    assert back.member_epoch == group.assignment_epoch


def test_static_member_errors() -> None:
    h = ConsumerHarness({"foo": 3})
    h.cjoin("a", instance_id="i")
    unreleased = h.cjoin("b", instance_id="i")
    assert unreleased.error_code == E.UNRELEASED_INSTANCE_ID
    assert unreleased.error_message == (
        "Static member b with instance id i cannot join the group because the instance id is owned by a member."
    )
    fenced = h.cgh("b", 1, instance_id="i")
    assert (fenced.error_code, fenced.error_message) == (
        E.FENCED_INSTANCE_ID,
        "Static member b with instance id i was fenced by member a.",
    )
    assert h.cgh("b", -2, instance_id="i").error_code == E.FENCED_INSTANCE_ID
    unknown = h.cgh("c", 1, instance_id="other")
    assert (unknown.error_code, unknown.error_message) == (E.UNKNOWN_MEMBER_ID, "Instance id other is unknown.")
    assert h.cgh("c", -1, instance_id="other").error_code == E.UNKNOWN_MEMBER_ID


def test_static_member_that_never_comes_back_is_fenced_by_its_session() -> None:
    h = ConsumerHarness({"foo": 3})
    h.cjoin("a", instance_id="i")
    h.cjoin("b")
    h.cgh("a", -2, instance_id="i")
    for _ in range(9):
        h.advance(5_000)
        h.cgh("b", h.cgroup().members["b"].member_epoch)
    group = h.cgroup()
    assert "a" not in group.members and "b" in group.members
    assert h.events_of(MemberFenced)[-1].reason == "session-timeout"


# ---- timeouts ------------------------------------------------------------------------------------------


def test_session_timeout_fences_and_partitions_move() -> None:
    h = ConsumerHarness({"foo": 2})
    h.cjoin("a")
    h.cjoin("b")
    h.cgh("a", 1, owned={"foo": h.cgroup().target("a")[h.tid("foo")]})
    h.cgh("b", 2)
    for _ in range(8):  # only b keeps heartbeating
        h.advance(5_000)
        h.cgh("b", h.cgroup().members["b"].member_epoch)
    h.advance(5_000)
    assert "a" not in h.cgroup().members
    b = h.cgh("b", h.cgroup().members["b"].member_epoch)
    assert h.named(b.assignment) == {"foo": {0, 1}}
    fenced = h.events_of(MemberFenced)
    assert [(f.member_id, f.reason, f.partitions) for f in fenced] == [("a", "session-timeout", 1)]
    # The fenced client learns it on its next heartbeat, then rejoins with the same id.
    assert h.cgh("a", 2).error_code == E.UNKNOWN_MEMBER_ID
    assert h.cjoin("a").error_code == OK


def test_rebalance_timeout_fences_a_member_that_does_not_revoke() -> None:
    h = ConsumerHarness({"foo": 2})
    h.cjoin("a", rebalance_timeout_ms=10_000)
    h.cjoin("b")
    h.cgh("a", 1)  # revocation requested
    assert h.timers[("consumer-rebalance", "g", "a")] == h.now + 10_000
    h.advance(5_000)
    h.cgh("a", 1)  # still owning: the timer is NOT reset
    assert h.timers[("consumer-rebalance", "g", "a")] == h.now + 5_000
    h.advance(5_000)
    assert "a" not in h.cgroup().members
    assert h.events_of(MemberFenced)[-1].reason == "rebalance-timeout"
    b = h.cgh("b", 2)
    assert h.named(b.assignment) == {"foo": {0, 1}}


def test_stale_timer_firings_are_ignored() -> None:
    h = ConsumerHarness({"foo": 2})
    h.cjoin("a")
    deadline = h.timers[("consumer-session", "g", "a")]
    h.advance(1_000)
    h.cgh("a", 1)
    h.fire(("consumer-session", "g", "a"), deadline)
    assert "a" in h.cgroup().members


def test_restart_rearms_timers_with_fresh_deadlines() -> None:
    h = ConsumerHarness({"foo": 2})
    h.cjoin("a", rebalance_timeout_ms=60_000)
    h.cjoin("b")
    h.cgh("a", 1)  # a is revoking
    h.advance(40_000)
    h.restart()
    assert h.timers[("consumer-session", "g", "a")] == h.now + 45_000
    assert h.timers[("consumer-rebalance", "g", "a")] == h.now + 60_000
    assert h.cgroup().members["a"].state is MemberState.UNREVOKED_PARTITIONS


# ---- assignors -----------------------------------------------------------------------------------------


def test_server_assignor_choice() -> None:
    h = ConsumerHarness({"foo": 4, "bar": 4})
    h.cjoin("a", names=("foo", "bar"))
    assert h.events_of(TargetAssignmentComputed)[-1].assignor == "uniform"
    h.cjoin("b", names=("foo", "bar"), assignor="range")
    computed = h.events_of(TargetAssignmentComputed)[-1]
    assert (computed.assignor, computed.member_count, computed.partition_count) == ("range", 2, 8)
    group = h.cgroup()
    # range co-partitions: the same partition numbers of both topics go to the same member
    for member in ("a", "b"):
        target = group.target(member)
        assert target[h.tid("foo")] == target[h.tid("bar")]
    assert h.describe_consumer("g").groups[0].assignor_name == "range"


def test_default_assignor_is_the_first_configured() -> None:
    h = ConsumerHarness({"foo": 4}, GroupConfig(consumer_group_assignors=("range", "uniform")))
    h.cjoin("a")
    assert h.events_of(TargetAssignmentComputed)[-1].assignor == "range"


def test_assignment_refers_to_topics_by_id() -> None:
    h = ConsumerHarness({"foo": 3})
    response = h.cjoin("a")
    assert response.assignment == ((h.tid("foo"), (0, 1, 2)),)
    assert isinstance(response.assignment[0][0], UUID)


def test_unknown_topic_ids_in_owned_partitions_are_harmless() -> None:
    h = ConsumerHarness({"foo": 3})
    h.cjoin("a")
    stray = (HeartbeatTopicPartitions(UUID(int=999), (0,)),)
    response = h.cgh("a", 1, raw_owned=stray)
    assert (response.error_code, response.member_epoch) == (OK, 1)


def test_config_default_matches_kafka() -> None:
    assert GroupConfig().consumer_group_heartbeat_interval_ms == 5_000
    assert GroupConfig().consumer_group_session_timeout_ms == 45_000
    assert CONSUMER.consumer_group_assignors[0] == "uniform"


def _settle(h: ConsumerHarness) -> None:
    """Every member heartbeats (reporting what it holds) until the group is Stable."""
    group = h.cgroup()
    for _ in range(10):
        if group.state_name == "Stable":
            return
        for member_id, member in sorted(group.members.items()):
            if not group.is_reconciled(member):
                h.cgh(member_id, member.member_epoch, owned=h.named(member.assigned_partitions))
    raise AssertionError(f"not Stable: {group.state_name}")


def test_a_join_lets_the_others_catch_up_without_a_record() -> None:
    """After a join, a member whose target did not move is told the new epoch and writes nothing:
    its record says the epoch it held its partitions from, its target says it still holds exactly
    them. The group counts it reconciled at once, describes it at the new epoch, and it commits
    offsets at either epoch."""
    h = ConsumerHarness({"foo": 8})
    for m in ("a", "b", "c"):
        h.cjoin(m)
    _settle(h)
    group = h.cgroup()
    h.cjoin("d")  # 3, 3, 2 partitions become 2, 2, 2, 2: two of the three give one up
    epoch = group.group_epoch
    movers = {m for m in ("a", "b", "c") if group.target(m) != group.members[m].assigned_partitions}
    assert len(movers) == 2
    (stayer,) = {"a", "b", "c"} - movers
    before = group.members[stayer]
    assert before.member_epoch < epoch and group.effective_epoch(before) == epoch
    count = len(h.records)
    response = h.cgh(stayer, before.member_epoch)
    assert (response.error_code, response.member_epoch, response.assignment) == (OK, epoch, None)
    assert h.records[count:] == []
    assert group.members[stayer] is before
    assert h.cgh(stayer, epoch).member_epoch == epoch  # its next heartbeat, at the epoch it was told
    (described,) = [m for m in h.describe_consumer("g").groups[0].members if m.member_id == stayer]
    assert described.member_epoch == epoch
    assert group.state_name == "Reconciling"  # the movers, not the stayer
    _settle(h)
    assert group.state_name == "Stable"
    assert group.members[stayer].member_epoch < epoch  # still unrecorded, and Stable
    held = sorted(h.named(group.members[stayer].assigned_partitions)["foo"])
    for at in (before.member_epoch, epoch):
        ref = h.commit("g", {("foo", held[0]): 7 + at}, generation_id=at, member_id=stayer)
        assert h.reply(ref).topics[0].partitions[0].error_code == OK
    assert h.cgh(stayer, epoch + 1).error_code == E.FENCED_MEMBER_EPOCH  # never beyond what it was told
    assert sum(len(p) for m in group.members.values() for p in m.assigned_partitions.values()) == 8


def test_a_member_caught_up_without_a_record_survives_a_failover() -> None:
    """A coordinator that takes over replays the older epoch of a member told a newer one without
    a record: it serves that member at the epoch it was told, as the live one did (Kafka records
    every catch-up; here the target vouches for it)."""
    h = ConsumerHarness({"foo": 8})
    for m in ("a", "b", "c"):
        h.cjoin(m)
    _settle(h)
    group = h.cgroup()
    h.cjoin("d")
    epoch = group.group_epoch
    (stayer,) = [m for m in ("a", "b", "c") if group.target(m) == group.members[m].assigned_partitions]
    assert h.cgh(stayer, group.members[stayer].member_epoch).member_epoch == epoch
    h.restart()
    group = h.cgroup()
    assert group.members[stayer].member_epoch < epoch
    response = h.cgh(stayer, epoch)
    assert (response.error_code, response.member_epoch) == (OK, epoch)
    _settle(h)
    assert group.state_name == "Stable"


def test_a_member_told_an_epoch_without_a_record_is_served_at_it_after_its_target_moves() -> None:
    """A member told epochs without a record keeps its record until its reconciliation changes
    something: when a target moves it, nothing is written for it, and its client is served at any
    epoch it may have been told (the last, an earlier one, or the recorded one if it never
    heartbeat since), its reconciliation moving on from the epoch it names, never back."""
    h = ConsumerHarness({"foo": 12})
    for m in ("a", "b"):
        h.cjoin(m)
    _settle(h)
    group = h.cgroup()
    recorded = group.members["a"].member_epoch
    assert group.members["b"].member_epoch == recorded
    h.cjoin("z", names=("bar",))  # a bump that moves nobody subscribed to foo
    told = group.group_epoch
    assert group.target("a") == group.members["a"].assigned_partitions
    assert h.cgh("a", recorded).member_epoch == told  # told the epoch, nothing written
    assert group.members["a"].member_epoch == recorded
    h.cjoin("y", names=("bar",))  # another bump that moves nobody subscribed to foo
    later = group.group_epoch
    assert later > told and group.effective_epoch(group.members["a"]) == later
    count = len(h.records)
    h.cjoin("c")  # a's and b's targets move
    assert not [r for r in h.records[count:] if getattr(r.key, "member_id", None) in ("a", "b")
                and isinstance(r.key, ConsumerGroupCurrentMemberAssignmentKey)]
    assert group.effective_epoch(group.members["a"]) == recorded  # its target no longer vouches
    h.restart()  # and the coordinator that takes over serves them alike
    group = h.cgroup()
    response = h.cgh("a", told)  # the epoch it was told: neither recorded nor previous
    assert (response.error_code, response.member_epoch) == (OK, told)
    assert group.members["a"].state is MemberState.UNREVOKED_PARTITIONS
    assert group.members["a"].member_epoch == told
    response = h.cgh("b", recorded)  # never heard of the epochs since: served at its recorded one
    assert (response.error_code, response.member_epoch) == (OK, recorded)
    assert h.cgh("b", later + 1).error_code == E.FENCED_MEMBER_EPOCH
    _settle(h)
    assert sum(len(p) for m in group.members.values() for p in m.assigned_partitions.values()) == 12
