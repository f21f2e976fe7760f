"""Batched handling (the runtime's batches): heartbeats that need a new target assignment are
deferred to the end of the batch, so a join storm runs the assignor once per group and batch.

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


def test_deferred_replies_wait_for_the_flush_and_other_events_complete_them_first() -> None:
    h = ConsumerHarness({"foo": 4})
    h.cjoin("a")
    a_epoch = h.cgroup().members["a"].member_epoch
    join_b = h.join_request("b")
    result = h.shard.handle(join_b, h.now, batched=True)
    h._absorb(result)
    h.check()
    assert result.replies == [] and h.cgroup().state_name == "Assigning"
    # A describe reads the group: the deferred join is completed first, in the same entry.
    describe = ConsumerGroupDescribe(h.next_ref(), ("g",))
    result = h.shard.handle(describe, h.now, batched=True)
    h._absorb(result)
    h.check()
    assert [r.ref for r in result.replies] == [join_b.ref, describe.ref]
    assert result.replies[1].response.groups[0].group_state == "Reconciling"
    assert not h.shard.flush(h.now).replies
    # a still owns everything: b waits for a's revocation (revoke before assign).
    assert result.replies[0].response.assignment == ()
    response = h.cgh("a", a_epoch)
    assert h.named(response.assignment) == {"foo": {0, 1}}


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


def test_unbatched_handling_is_unchanged() -> None:
    h = ConsumerHarness({"foo": 4})
    for member in ("a", "b", "c"):
        assert h.cjoin(member).member_epoch == h.cgroup().group_epoch
    assert len(h.events_of(TargetAssignmentComputed)) == 3
