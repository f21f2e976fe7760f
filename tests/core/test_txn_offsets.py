"""TxnOffsetCommit as Kafka's group coordinator validates it (KIP-447), and the durable mark of a
group whose offsets live upstream (sidecar mode)."""

from __future__ import annotations

from coordinator.core.errors import ErrorCode
from coordinator.core.records import OffsetsUpstreamKey, Record
from coordinator.core.requests import OffsetsUpstreamQuery, TxnOffsetCommitCheck
from tests.core.consumer.harness import ConsumerHarness
from tests.core.harness import Harness


def check(h: Harness, group_id: str = "g", member_id: str = "", generation: int = -1,
          instance_id: str | None = None, mark: bool = False) -> tuple[int, bool]:
    ref = h.next_ref()
    h.send(TxnOffsetCommitCheck(ref, group_id, member_id, generation, instance_id, (("t", (0, 1)),), mark))
    reply = h.reply(ref)
    return int(reply.error_code), reply.upstream


def upstream_groups(h: Harness) -> frozenset[str]:
    ref = h.next_ref()
    h.send(OffsetsUpstreamQuery(ref))
    return h.reply(ref).groups


def test_a_group_this_coordinator_does_not_know() -> None:
    h = Harness()
    assert check(h, "new", generation=-1) == (ErrorCode.NONE, False)  # Kafka makes a simple group
    assert check(h, "new", member_id="m", generation=3)[0] == ErrorCode.ILLEGAL_GENERATION
    assert not h.records


def test_a_classic_member_must_be_of_the_current_generation() -> None:
    h = Harness()
    members, generation = h.stable_group("g", 2)
    assert check(h, "g", members[0], generation)[0] == ErrorCode.NONE
    assert check(h, "g", members[1], generation - 1)[0] == ErrorCode.ILLEGAL_GENERATION
    assert check(h, "g", "gone", generation)[0] == ErrorCode.UNKNOWN_MEMBER_ID
    # No member, no generation: accepted with no group checks, even from a group with members.
    assert check(h, "g")[0] == ErrorCode.NONE


def test_a_rebalance_in_progress_does_not_refuse_a_transactional_commit() -> None:
    h = Harness()
    members, generation = h.stable_group("g", 2)
    for member_id in members:  # both rejoin: the new generation waits for its assignment
        h.join("g", member_id)
    assert h.state("g") == "CompletingRebalance"
    current = h.group("g").generation_id
    assert current == generation + 1
    plain = h.commit("g", generation_id=current, member_id=members[0])
    assert {p.error_code for t in h.reply(plain).topics for p in t.partitions} == {ErrorCode.REBALANCE_IN_PROGRESS}
    assert check(h, "g", members[0], current)[0] == ErrorCode.NONE
    assert check(h, "g", members[0], generation)[0] == ErrorCode.ILLEGAL_GENERATION


def test_the_mark_is_written_once_and_survives_a_restart() -> None:
    h = Harness()
    assert check(h, "g", mark=True) == (ErrorCode.NONE, True)
    assert check(h, "g", mark=True) == (ErrorCode.NONE, True)
    marks = [r for r in h.records if isinstance(r.key, OffsetsUpstreamKey)]
    assert len(marks) == 1 and isinstance(marks[0], Record)
    assert check(h, "other") == (ErrorCode.NONE, False)
    h.restart()
    assert upstream_groups(h) == frozenset({"g"})
    assert check(h, "g") == (ErrorCode.NONE, True)


def test_a_refused_check_writes_no_mark() -> None:
    h = Harness()
    h.stable_group("g", 1)
    assert check(h, "g", "gone", 1, mark=True)[0] == ErrorCode.UNKNOWN_MEMBER_ID
    assert not [r for r in h.records if isinstance(r.key, OffsetsUpstreamKey)]
    assert upstream_groups(h) == frozenset()


def test_a_kip848_member_commits_at_its_epoch_and_a_newer_one_is_refused() -> None:
    """Consumer groups: the member's epoch (or, KIP-1251, an older one at or after the partition's
    assignment epoch); a stale epoch is ILLEGAL_GENERATION for a transactional commit, as Kafka
    maps STALE_MEMBER_EPOCH there."""
    h = ConsumerHarness({"foo": 4})
    h.cjoin("a")
    epoch = h.cgroup().members["a"].member_epoch
    ref = h.next_ref()
    h.send(TxnOffsetCommitCheck(ref, "g", "a", epoch, None, (("foo", (0, 1)),)))
    assert h.reply(ref).error_code == ErrorCode.NONE
    ref = h.next_ref()
    h.send(TxnOffsetCommitCheck(ref, "g", "a", epoch + 1, None, (("foo", (0,)),)))
    assert h.reply(ref).error_code == ErrorCode.ILLEGAL_GENERATION
    ref = h.next_ref()
    h.send(TxnOffsetCommitCheck(ref, "g", "a", epoch - 1, None, (("foo", (0,)),)))  # before foo-0 was assigned
    assert h.reply(ref).error_code == ErrorCode.ILLEGAL_GENERATION
    ref = h.next_ref()
    h.send(TxnOffsetCommitCheck(ref, "g", "nobody", epoch, None, (("foo", (0,)),)))
    assert h.reply(ref).error_code == ErrorCode.UNKNOWN_MEMBER_ID
