"""KIP-1251 (Kafka 4.3): every partition a member holds carries the epoch it was assigned at, in the
current-assignment record (old records read with a default), and an OffsetCommit at an older member
epoch is accepted for the partitions the member still holds and got at or before that epoch.
OffsetFetch still names the current epoch exactly (Kafka 4.3 relaxes commits only)."""

from __future__ import annotations

from uuid import UUID

import msgspec

from coordinator.core.consumer.member import ConsumerGroupMember, MemberState
from coordinator.core.errors import ErrorCode
from coordinator.core.records import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    Record,
    TopicPartitions,
    decode_record,
    encode_record,
)
from coordinator.core.requests import (
    OffsetCommit,
    OffsetCommitPartition,
    OffsetCommitTopic,
    OffsetFetch,
    OffsetFetchGroup,
)
from coordinator.core.shard import CoordinatorShard
from tests.core.consumer.harness import ConsumerHarness

OK = ErrorCode.NONE
E = ErrorCode


def commit(h: ConsumerHarness, member_id: str, epoch: int, *partitions: int, topic: str = "foo") -> list[ErrorCode]:
    ref = h.next_ref()
    h.send(
        OffsetCommit(
            ref, "g", epoch, member_id, None, -1,
            (OffsetCommitTopic(topic, tuple(OffsetCommitPartition(p, 10 + p) for p in partitions)),),
        )
    )
    return [p.error_code for p in h.reply(ref).topics[0].partitions]


def fetch(h: ConsumerHarness, member_id: str, epoch: int) -> ErrorCode:
    ref = h.next_ref()
    h.send(OffsetFetch(ref, (OffsetFetchGroup("g", member_id, epoch, None),)))
    return ErrorCode(h.reply(ref).groups[0].error_code)


def epochs(h: ConsumerHarness, member_id: str) -> dict[int, int]:
    """Partition -> assignment epoch of everything the member holds of foo."""
    member = h.cgroup().members[member_id]
    tid = h.tid("foo")
    held = member.assigned_partitions.get(tid, frozenset()) | member.partitions_pending_revocation.get(tid, frozenset())
    return {p: e for p in held if (e := member.assignment_epoch(tid, p)) is not None}


def assigned(h: ConsumerHarness, member_id: str) -> list[int]:
    return sorted(h.cgroup().members[member_id].assigned_partitions.get(h.tid("foo"), ()))


def two_members(h: ConsumerHarness) -> None:
    """a joins alone (epoch 1, foo-0..3), b joins (epoch 2): a revokes two and acknowledges."""
    h.cjoin("a")
    assert epochs(h, "a") == {0: 1, 1: 1, 2: 1, 3: 1}
    h.cjoin("b")
    revoking = h.cgh("a", 1)
    assert h.cgroup().members["a"].state is MemberState.UNREVOKED_PARTITIONS
    assert revoking.member_epoch == 1  # frozen while it revokes
    kept = h.named(revoking.assignment)["foo"]
    h.cgh("a", 1, owned={"foo": kept})
    assert h.cgroup().members["a"].member_epoch == 2


def test_partitions_keep_the_epoch_they_were_assigned_at() -> None:
    h = ConsumerHarness({"foo": 4})
    two_members(h)
    a = h.cgroup().members["a"]
    # a kept two partitions from epoch 1; b got the other two at epoch 2 once they were free.
    assert set(epochs(h, "a").values()) == {1}
    h.cgh("b", 2)
    assert set(epochs(h, "b").values()) == {2}
    assert set(epochs(h, "a")) == set(a.assigned_partitions[h.tid("foo")])
    # And they are in the record: a replay rebuilds them (the harness compares replay with live).
    latest = [r for r in h.records if r.key == ConsumerGroupCurrentMemberAssignmentKey("g", "a")][-1]
    assert latest.value is not None
    (topic,) = latest.value.assigned_partitions
    assert topic.assignment_epochs == (1, 1)


def test_commit_at_an_older_epoch_is_accepted_for_partitions_held_since() -> None:
    h = ConsumerHarness({"foo": 4})
    two_members(h)
    held = sorted(epochs(h, "a"))  # assigned at epoch 1; a is now at epoch 2
    not_held = sorted(set(range(4)) - set(held))
    # The client has not heard of epoch 2 yet: its commit of what it held at epoch 1 is no zombie's.
    assert commit(h, "a", 1, *held) == [OK, OK]
    assert commit(h, "a", 2, *held) == [OK, OK]
    # Partitions it does not hold, older epochs than the assignment, newer epochs than the member's.
    assert commit(h, "a", 1, held[0], not_held[0]) == [E.STALE_MEMBER_EPOCH] * 2  # the whole commit fails
    assert commit(h, "a", 0, held[0]) == [E.STALE_MEMBER_EPOCH]
    assert commit(h, "a", 3, held[0]) == [E.STALE_MEMBER_EPOCH]
    # b got its partitions at epoch 2: a commit at epoch 1 for them would be a zombie's.
    h.cgh("b", 2)
    mine = sorted(epochs(h, "b"))
    assert commit(h, "b", 1, *mine) == [E.STALE_MEMBER_EPOCH] * 2
    assert commit(h, "b", 2, *mine) == [OK, OK]
    # An unknown topic cannot be held.
    assert commit(h, "a", 1, 0, topic="nope") == [E.STALE_MEMBER_EPOCH]


def test_partitions_pending_revocation_may_still_be_committed() -> None:
    h = ConsumerHarness({"foo": 4})
    h.cjoin("a")
    h.cgh("a", 1, owned={"foo": range(4)})
    h.cjoin("b")
    h.cjoin("c")  # epoch 3: a must give up more, and still holds them pending revocation
    revoking = h.cgh("a", 1)
    member = h.cgroup().members["a"]
    assert member.state is MemberState.UNREVOKED_PARTITIONS and member.member_epoch == 1
    pending = sorted(member.partitions_pending_revocation[h.tid("foo")])
    assert commit(h, "a", 1, *pending) == [OK] * len(pending)
    assert commit(h, "a", 0, *pending) == [E.STALE_MEMBER_EPOCH] * len(pending)
    assert revoking.error_code == OK


def test_fetch_names_the_current_epoch_exactly_even_while_reconciling() -> None:
    h = ConsumerHarness({"foo": 4})
    h.cjoin("a")
    h.cjoin("b")
    h.cgh("a", 1)  # revoking: its epoch stays 1 until it acknowledges
    assert fetch(h, "a", 1) == OK
    h.cgh("a", 1, owned={"foo": assigned(h, "a")})
    assert h.cgroup().members["a"].member_epoch == 2
    assert fetch(h, "a", 2) == OK
    assert fetch(h, "a", 1) == E.STALE_MEMBER_EPOCH  # Kafka 4.3: commits are relaxed, fetches are not
    assert fetch(h, "x", 2) == E.UNKNOWN_MEMBER_ID


def test_a_static_member_that_leaves_holds_its_partitions_from_epoch_zero() -> None:
    h = ConsumerHarness({"foo": 2})
    h.cjoin("a", instance_id="i")
    h.cjoin("b")
    h.cgh("a", 1, owned={"foo": assigned(h, "a")})
    h.cgh("a", -2, instance_id="i")
    assert set(epochs(h, "a").values()) == {0}
    # The member id that left can no longer commit at its old epochs...
    assert commit(h, "a", 2, *sorted(epochs(h, "a"))) != [OK]
    # ...and its next incarnation takes them over from epoch 0: it may commit at any epoch it is told.
    rejoined = h.cjoin("a2", instance_id="i")
    assert rejoined.error_code == OK
    assert set(epochs(h, "a2").values()) == {0}
    assert commit(h, "a2", rejoined.member_epoch, *sorted(epochs(h, "a2"))) == [OK] * len(epochs(h, "a2"))


def test_records_without_assignment_epochs_read_as_the_member_epoch() -> None:
    """A log written before KIP-1251: record 8's partitions have no epochs."""

    class OldTopicPartitions(msgspec.Struct, frozen=True, array_like=True):
        topic_id: UUID
        partitions: tuple[int, ...]

    class OldCurrentAssignment(msgspec.Struct, frozen=True, array_like=True):
        member_epoch: int
        previous_member_epoch: int
        state: int
        assigned_partitions: tuple[OldTopicPartitions, ...]
        partitions_pending_revocation: tuple[OldTopicPartitions, ...]

    foo = UUID(int=1)
    key = encode_record(Record(ConsumerGroupCurrentMemberAssignmentKey("g", "m"), None))[1]
    for member_epoch, expected in ((7, 7), (-2, 0)):  # a static member that left reads as epoch 0
        old = OldCurrentAssignment(member_epoch, 6, 1, (OldTopicPartitions(foo, (0, 2)),), (OldTopicPartitions(foo, (1,)),))
        record = decode_record(8, key, b"\x00\x00" + msgspec.msgpack.encode(old, enc_hook=None))
        assert isinstance(record.value, ConsumerGroupCurrentMemberAssignmentValue)
        shard = CoordinatorShard()
        shard.replay(record)
        group = shard.group("g")
        member = group.members["m"]  # type: ignore[union-attr]
        assert isinstance(member, ConsumerGroupMember)
        assert {p: member.assignment_epoch(foo, p) for p in (0, 1, 2)} == {0: expected, 2: expected, 1: expected}
        # Written back, the epochs are explicit.
        (assigned,) = member.to_assignment_value().assigned_partitions
        assert assigned.assignment_epochs == (expected, expected)


def test_the_target_assignment_record_keeps_its_bytes() -> None:
    """Assignment epochs are record 8's: record 7 (the target) is written exactly as before."""
    value = ConsumerGroupTargetAssignmentMemberValue((TopicPartitions(UUID(int=1), (0, 1)),))
    _, _, encoded = encode_record(Record(ConsumerGroupTargetAssignmentMemberKey("g", "m"), value))
    assert encoded == b"\x00\x00" + msgspec.msgpack.encode([[[UUID(int=1).bytes, [0, 1]]]])
