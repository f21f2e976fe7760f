"""ShareGroupHeartbeat as Kafka 4.3 answers it: joining, the first empty assignment until the partitions
are initialized, sharing by the simple assignor, epochs and their errors, leaving, fencing; and the
groups rebuilt from the encoded records equal the live ones after every heartbeat."""

from __future__ import annotations

from collections.abc import Sequence
from uuid import UUID

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator.core.errors import ErrorCode
from coordinator.core.share.membership import (
    HeartbeatConfig,
    HeartbeatRequest,
    HeartbeatResult,
    ShareGroups,
    delete_group,
    fence_member,
    heartbeat,
)
from coordinator.core.share.records import (
    ShareGroupRecord,
    decode_group_record,
    encode_group_record,
)

ORDERS = UUID(int=11)
TOPICS = {"orders": (ORDERS, 2)}


class Coordinator:
    def __init__(self) -> None:
        self.groups = ShareGroups()
        self.log: list[tuple[int, bytes, bytes | None]] = []
        self.initialized: dict[UUID, list[int]] = {}

    def logged(self, records: list[ShareGroupRecord]) -> None:
        self.log += [encode_group_record(r) for r in records]
        rebuilt = ShareGroups()
        for entry in self.log:
            rebuilt.replay(decode_group_record(*entry))
        assert rebuilt.view() == self.groups.view()

    def beat(self, member: str, epoch: int, topics: Sequence[str] | None = None, group: str = "q",
             config: HeartbeatConfig | None = None, **extra: object) -> HeartbeatResult:
        request = HeartbeatRequest(group, member, epoch, subscribed_topic_names=topics, client_id="c",
                                   client_host="/127.0.0.1")
        result = heartbeat(self.groups, request, TOPICS, lambda t: self.initialized.get(t, []), 0, config,
                           **extra)  # type: ignore[arg-type]
        self.logged(result.records)
        for topic_id, partition in result.to_initialize:  # what the share-partition side would do
            self.initialized.setdefault(topic_id, []).append(partition)
        return result


def test_a_new_group_answers_an_empty_assignment_first_then_the_partitions() -> None:
    c = Coordinator()
    first = c.beat("m1", 0, ["orders"])
    assert (first.error, first.member_epoch, first.assignment) == (ErrorCode.NONE, 1, {})
    assert first.to_initialize == {(ORDERS, 0), (ORDERS, 1)}
    second = c.beat("m1", 1)
    assert second.member_epoch == 2 and second.assignment == {ORDERS: frozenset({0, 1})}
    assert c.beat("m1", 2).assignment is None, "unchanged: not sent"
    assert c.groups.get("q").state_name == "Stable"  # type: ignore[union-attr]


def test_members_share_partitions_and_jump_to_the_target_without_revoking() -> None:
    c = Coordinator()
    c.beat("m1", 0, ["orders"])
    c.beat("m1", 1)
    joined = [c.beat(m, 0, ["orders"]) for m in ("m2", "m3")]
    assert all(j.error == ErrorCode.NONE for j in joined)
    m1 = c.beat("m1", 2)
    assert m1.member_epoch == c.groups.get("q").epoch  # type: ignore[union-attr]
    holders = {m: c.groups.get("q").members[m].assigned for m in ("m1", "m2", "m3")}  # type: ignore[union-attr]
    assert all(len(a.get(ORDERS, ())) >= 1 for a in holders.values()), "3 members on 2 partitions: shared"


def test_epoch_errors_are_kafkas() -> None:
    c = Coordinator()
    assert c.beat("m1", 3).error == ErrorCode.GROUP_ID_NOT_FOUND
    c.beat("m1", 0, ["orders"])
    c.beat("m1", 1)  # now at epoch 2, previous 1
    assert c.beat("m1", 3).error == ErrorCode.FENCED_MEMBER_EPOCH
    assert c.beat("m1", 1).error == ErrorCode.NONE, "the previous epoch: its answer may have been lost"
    assert c.beat("m1", 0, ["orders"]).error == ErrorCode.NONE, "rejoin with the same id"
    assert c.beat("ghost", 4).error == ErrorCode.UNKNOWN_MEMBER_ID
    assert c.beat("ghost", -1).error == ErrorCode.UNKNOWN_MEMBER_ID


@pytest.mark.parametrize(("member", "epoch", "topics"), [("", 0, ["orders"]), ("m" * 37, 0, ["orders"]),
                                                         ("m", 0, None), ("m", 0, []), ("m", -2, ["orders"])])
def test_bad_requests_are_invalid_request(member: str, epoch: int, topics: list[str] | None) -> None:
    assert Coordinator().beat(member, epoch, topics).error == ErrorCode.INVALID_REQUEST


def test_limits_and_another_group_type() -> None:
    c = Coordinator()
    c.beat("m1", 0, ["orders"], config=HeartbeatConfig(max_size=1))
    assert c.beat("m2", 0, ["orders"], config=HeartbeatConfig(max_size=1)).error == ErrorCode.GROUP_MAX_SIZE_REACHED
    taken = c.beat("m1", 0, ["orders"], group="classic-one", id_taken_by_another_type=True)
    assert taken.error == ErrorCode.GROUP_ID_NOT_FOUND


def test_leaving_and_fencing_remove_the_member_and_bump_the_epoch() -> None:
    c = Coordinator()
    c.beat("m1", 0, ["orders"])
    c.beat("m2", 0, ["orders"])
    epoch = c.groups.get("q").epoch  # type: ignore[union-attr]
    left = c.beat("m1", -1)
    assert (left.error, left.member_epoch) == (ErrorCode.NONE, -1)
    c.logged(fence_member(c.groups, "q", "m2", TOPICS))
    group = c.groups.get("q")
    assert group is not None and group.members == {} and group.epoch == epoch + 2 and group.state_name == "Empty"
    c.logged(delete_group(c.groups, "q"))
    assert c.groups.get("q") is None


def test_a_subscription_change_refilters_and_reassigns() -> None:
    c = Coordinator()
    c.beat("m1", 0, ["orders"])
    assert c.beat("m1", 1).assignment == {ORDERS: frozenset({0, 1})}
    moved = c.beat("m1", 2, ["payments"])  # a topic that does not exist: nothing to assign
    assert moved.assignment == {}


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["m1", "m2", "m3", "m4"]),
                          st.sampled_from(["join", "beat", "leave", "fence", "resubscribe"])), max_size=30))
def test_any_sequence_of_heartbeats_replays_and_converges_to_every_partition_served(
    steps: list[tuple[str, str]]
) -> None:
    c = Coordinator()
    epochs: dict[str, int] = {}
    for member, action in steps:
        if action == "join" or (member not in epochs and action != "fence"):
            result = c.beat(member, 0, ["orders"])
        elif action == "beat":
            result = c.beat(member, epochs[member])
        elif action == "resubscribe":
            result = c.beat(member, epochs[member], ["orders"])
        elif action == "leave":
            result = c.beat(member, -1)
        else:
            c.logged(fence_member(c.groups, "q", member, TOPICS))
            epochs.pop(member, None)
            continue
        assert result.error == ErrorCode.NONE, (member, action, result)
        if result.member_epoch == -1:
            epochs.pop(member)
        else:
            epochs[member] = result.member_epoch
    for _ in range(2):  # every member catches up with the target
        for member in list(epochs):
            epochs[member] = c.beat(member, epochs[member]).member_epoch
    group = c.groups.get("q")
    if group is None or not group.members:
        return
    assert all(m.member_epoch == group.assignment_epoch == group.epoch for m in group.members.values())
    served = {p for m in group.members.values() for p in m.assigned.get(ORDERS, ())}
    assert served == {0, 1}
