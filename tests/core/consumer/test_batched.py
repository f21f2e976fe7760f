"""Batched handling (the runtime's batches): heartbeats that need a new target assignment wait
for the end of the batch, so a join storm runs the assignor once per group and batch.

Every step is checked by the harness (replay of the log == live state, ownership invariants)."""

from __future__ import annotations

from msgspec.structs import replace

from coordinator.core.errors import ErrorCode
from coordinator.core.events import TargetAssignmentComputed
from coordinator.core.records import ConsumerGroupTargetAssignmentMemberKey
from coordinator.core.requests import ConsumerGroupDescribe, ConsumerGroupHeartbeat
from tests.core.consumer.harness import ConsumerHarness

OK = ErrorCode.NONE


def test_a_join_storm_runs_the_assignor_once_per_group_and_batch() -> None:
    h = ConsumerHarness({"foo": 12, "bar": 6})
    joins = [h.join_request(f"m{i}") for i in range(6)] + [h.join_request(f"b{i}", ("bar",), "g2") for i in range(3)]
    joins = [joins[i] for i in (0, 6, 1, 2, 7, 3, 4, 8, 5)]  # groups interleaved
    records_before = len(h.records)
    replies = h.batch(*joins)
    assert len(h.events_of(TargetAssignmentComputed)) == 2
    for join in joins:
        response = replies[join.ref]
        assert response.error_code == OK
        group = h.cgroup(join.group_id)
        # Everyone is reconciled to the one target computed for the batch, and gets its share at once.
        assert response.member_epoch == group.group_epoch == group.assignment_epoch
        assert sum(len(ps) for _, ps in response.assignment) == 2  # 12 / 6 and 6 / 3
    assert h.cgroup("g").state_name == h.cgroup("g2").state_name == "Stable"
    # One target record per member (not one per member per join).
    written = h.records[records_before:]
    assert sum(isinstance(r.key, ConsumerGroupTargetAssignmentMemberKey) for r in written) == 9


def test_waiting_replies_come_by_the_batch_end_and_observers_complete_them_first() -> None:
    h = ConsumerHarness({"foo": 4})
    h.cjoin("a")
    a_epoch = h.cgroup().members["a"].member_epoch
    join_b = h.join_request("b")
    # A describe reads the group: the waiting join is completed first, in the describe's entry.
    describe = ConsumerGroupDescribe(h.next_ref(), ("g",))
    results = h.shard.handle_batch([join_b, describe], h.now)
    for result in results:
        h._absorb(result)
    h.check()
    # b's entry holds its membership, no reply: the group was Assigning after it.
    assert results[0].replies == [] and results[0].records
    assert [r.ref for r in results[1].replies] == [join_b.ref, describe.ref]
    assert results[1].replies[1].response.groups[0].group_state == "Reconciling"
    # a still owns everything: b waits for a's revocation (revoke before assign).
    assert results[1].replies[0].response.assignment == ()
    response = h.cgh("a", a_epoch)
    assert h.named(response.assignment) == {"foo": {0, 1}}


def test_a_batch_ends_with_nothing_waiting() -> None:
    h = ConsumerHarness({"foo": 4})
    h.cjoin("a")
    joins = [h.join_request("b"), h.join_request("c")]
    results = h.shard.handle_batch(joins, h.now)
    for result in results:
        h._absorb(result)
    h.check()
    # Both wait until the batch's last event, whose entry completes them: one assignor run.
    assert results[0].replies == [] and [r.ref for r in results[1].replies] == [j.ref for j in joins]
    assert not h.shard.consumer.heartbeats.has_waiting()
    assert len(h.events_of(TargetAssignmentComputed)) == 2  # a's own join, then b and c together


def test_same_member_twice_and_leaves_in_one_batch() -> None:
    h = ConsumerHarness({"foo": 4})
    first = h.join_request("a")
    again = replace(first, ref=h.next_ref())
    join_b = h.join_request("b")
    leave_b = ConsumerGroupHeartbeat(h.next_ref(), "g", "b", -1)
    join_c = h.join_request("c")
    replies = h.batch(first, again, join_b, leave_b, join_c)
    assert all(r.error_code == OK for r in replies.values())
    assert replies[leave_b.ref].member_epoch == -1
    group = h.cgroup()
    assert set(group.members) == {"a", "c"}
    assert replies[join_c.ref].member_epoch == group.assignment_epoch == group.group_epoch
    # Two joins of "a": the second completed the first one before it was handled (no new epoch).
    assert replies[first.ref].member_epoch == replies[again.ref].member_epoch == 1
    assert replies[first.ref].assignment == replies[again.ref].assignment


def test_heartbeats_one_per_batch_each_run_the_assignor() -> None:
    h = ConsumerHarness({"foo": 4})
    for member in ("a", "b", "c"):
        assert h.cjoin(member).member_epoch == h.cgroup().group_epoch
    assert len(h.events_of(TargetAssignmentComputed)) == 3
