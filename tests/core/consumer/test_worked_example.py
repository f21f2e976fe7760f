"""KIP-848's worked example through the core: topic ``foo`` with 3 partitions, uniform assignor.

A joins alone; B joins and is held at nothing until A has acknowledged the revocation of the
partition that moves; C joins, B moves to epoch 3 without any change, A revokes one partition before
C receives it. After every step the harness checks replay == live state, the ownership invariants,
and that no two members' latest responses share a partition.
"""

from __future__ import annotations

from coordinator.core.consumer.member import MemberState
from coordinator.core.errors import ErrorCode
from coordinator.core.records import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMetadataKey,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMetadataKey,
)
from tests.core.consumer.harness import ConsumerHarness

OK = ErrorCode.NONE


def test_kip848_worked_example() -> None:
    h = ConsumerHarness({"foo": 3})
    foo = h.tid("foo")

    # 1. A joins: group epoch 1, A at epoch 1 with every partition.
    a = h.cjoin("A")
    assert (a.error_code, a.member_id, a.member_epoch) == (OK, "A", 1)
    assert a.heartbeat_interval_ms == 5_000
    assert h.named(a.assignment) == {"foo": {0, 1, 2}}
    group = h.cgroup()
    assert (group.group_epoch, group.assignment_epoch, group.state_name) == (1, 1, "Stable")
    # Kafka's record order for a join: member, epoch, target member, target epoch, current assignment.
    assert [type(r.key) for r in h.results[-1].records] == [
        ConsumerGroupMemberMetadataKey,
        ConsumerGroupMetadataKey,
        ConsumerGroupTargetAssignmentMemberKey,
        ConsumerGroupTargetAssignmentMetadataKey,
        ConsumerGroupCurrentMemberAssignmentKey,
    ]

    # A steady heartbeat changes nothing and writes nothing.
    steady = h.cgh("A", 1)
    assert (steady.member_epoch, steady.assignment) == (1, None)
    assert h.results[-1].records == []

    # 2. B joins: group epoch 2, target A:2 + B:1. B's partition is still A's: B gets nothing yet.
    b = h.cjoin("B")
    assert (b.error_code, b.member_epoch) == (OK, 2)
    assert h.named(b.assignment) == {}  # present (a join always gets a full response) but empty
    assert b.assignment == ()
    group = h.cgroup()
    assert (group.group_epoch, group.assignment_epoch, group.state_name) == (2, 2, "Reconciling")
    target_a, target_b = group.target("A")[foo], group.target("B")[foo]
    assert len(target_a) == 2 and len(target_b) == 1 and target_a | target_b == {0, 1, 2}
    (moving,) = target_b
    assert group.members["B"].state is MemberState.UNRELEASED_PARTITIONS

    # B keeps heartbeating: still nothing while A owns the partition.
    assert h.cgh("B", 2).assignment is None
    assert h.cgroup().members["B"].assigned_partitions == {}

    # 3. A's next heartbeat: revoke the moving partition, epoch frozen at 1.
    a = h.cgh("A", 1)
    assert a.member_epoch == 1
    assert h.named(a.assignment) == {"foo": set(target_a)}
    member_a = h.cgroup().members["A"]
    assert member_a.state is MemberState.UNREVOKED_PARTITIONS
    assert member_a.partitions_pending_revocation == {foo: frozenset({moving})}
    assert ("consumer-rebalance", "g", "A") in h.timers

    # B is still held: A has not acknowledged.
    assert h.cgh("B", 2).assignment is None

    # A heartbeats again without acknowledging (owned unchanged = null): same answer, no change.
    a_again = h.cgh("A", 1)
    assert (a_again.member_epoch, a_again.assignment) == (1, None)

    # 4. A acknowledges the revocation: A moves to epoch 2 with two partitions.
    a = h.cgh("A", 1, owned={"foo": target_a})
    assert (a.member_epoch, a.assignment) == (2, None)
    assert h.cgroup().members["A"].state is MemberState.STABLE
    assert ("consumer-rebalance", "g", "A") not in h.timers

    # 5. B's next heartbeat gets the released partition.
    b = h.cgh("B", 2)
    assert b.member_epoch == 2
    assert h.named(b.assignment) == {"foo": {moving}}
    assert h.cgroup().state_name == "Stable"
    b_partition = moving

    # 6. C joins: group epoch 3, target 1+1+1.
    c = h.cjoin("C")
    assert (c.member_epoch, c.assignment) == (3, ())
    group = h.cgroup()
    assert (group.group_epoch, group.assignment_epoch) == (3, 3)
    assert group.target("B")[foo] == {b_partition}  # sticky: B keeps its partition
    (c_partition,) = group.target("C")[foo]
    assert c_partition in target_a

    # 7. B moves to epoch 3 without any change.
    b = h.cgh("B", 2)
    assert (b.member_epoch, b.assignment) == (3, None)
    assert h.cgroup().is_reconciled(h.cgroup().members["B"])  # at epoch 3, without a record (its target did not move)

    # 8. A must revoke one partition before C receives it.
    a = h.cgh("A", 2)
    assert a.member_epoch == 2
    assert h.named(a.assignment) == {"foo": set(target_a) - {c_partition}}
    assert h.cgh("C", 3).assignment is None  # C is still held
    a = h.cgh("A", 2, owned={"foo": set(target_a) - {c_partition}})
    assert (a.member_epoch, a.assignment) == (3, None)

    # 9. C gets its partition.
    c = h.cgh("C", 3)
    assert (c.member_epoch, h.named(c.assignment)) == (3, {"foo": {c_partition}})

    group = h.cgroup()
    assert group.state_name == "Stable"
    assert {m: (group.effective_epoch(x), len(x.assigned_partitions[foo])) for m, x in group.members.items()} == {
        "A": (3, 1),
        "B": (3, 1),
        "C": (3, 1),
    }
    assert {p for x in group.members.values() for p in x.assigned_partitions[foo]} == {0, 1, 2}

    # Everything survives a restart: members keep ids, epochs and partitions; no rebalance.
    h.restart()
    group = h.cgroup()
    assert {m: x.member_epoch for m, x in group.members.items()} == {"A": 3, "B": 2, "C": 3}  # B: no record for 3
    assert {m: group.effective_epoch(x) for m, x in group.members.items()} == {"A": 3, "B": 3, "C": 3}
    for member in ("A", "B", "C"):
        response = h.cgh(member, 3)
        assert (response.error_code, response.member_epoch, response.assignment) == (OK, 3, None)
    assert h.cgroup().group_epoch == 3
