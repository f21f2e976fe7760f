"""Kafka's simple share assignor: balanced sharing first, then stickiness, only assignable partitions."""

from __future__ import annotations

from uuid import UUID

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coordinator.core.share.assignor import AssignorError, assign

T1, T2, T3 = UUID(int=1), UUID(int=2), UUID(int=3)


def counts(result: dict[str, dict[UUID, set[int]]]) -> dict[str, int]:
    return {m: sum(len(p) for p in a.values()) for m, a in result.items()}


def test_fewer_members_than_partitions_each_partition_to_one_member_balanced() -> None:
    result = assign({m: frozenset({T1}) for m in "abc"}, {}, {T1: range(8)})
    assert sorted(counts(result).values()) == [2, 3, 3]
    everyone = [p for a in result.values() for p in a[T1]]
    assert sorted(everyone) == list(range(8)), "every partition exactly once"


def test_more_members_than_partitions_share_each_partition() -> None:
    result = assign({m: frozenset({T1}) for m in "abcde"}, {}, {T1: [0, 1]})
    # desired sharing ceil(5/2) = 3 members per partition: 6 assignments, quotas 2, 1, 1, 1, 1
    assert counts(result) == {"a": 2, "b": 1, "c": 1, "d": 1, "e": 1}
    holders = {p: sorted(m for m, a in result.items() if p in a.get(T1, set())) for p in (0, 1)}
    assert [len(h) for h in holders.values()] == [3, 3]


def test_a_new_member_takes_partitions_and_the_others_keep_the_rest() -> None:
    before = assign({"a": frozenset({T1}), "b": frozenset({T1})}, {}, {T1: range(6)})
    after = assign({m: frozenset({T1}) for m in "abc"}, before, {T1: range(6)})
    assert counts(after) == {"a": 2, "b": 2, "c": 2}
    assert after["a"][T1] <= before["a"][T1] and after["b"][T1] <= before["b"][T1], "sticky"


def test_heterogeneous_subscriptions_share_per_topic_as_kafkas_example() -> None:
    subs = {"m1": frozenset({T1}), "m2": frozenset({T2}), "m3": frozenset({T1, T2})}
    result = assign(subs, {}, {T1: [0, 1], T2: [0, 1]})
    assert len(result["m1"][T1]) == 1 and len(result["m2"][T2]) == 1
    assert len(result["m3"][T1]) == 1 and len(result["m3"][T2]) == 1


def test_only_assignable_partitions_and_unsubscribed_topics_are_dropped() -> None:
    result = assign({"a": frozenset({T1})}, {"a": {T1: {0, 5}, T2: {0}}}, {T1: [0, 1], T2: [0]})
    assert result == {"a": {T1: {0, 1}}}


def test_a_subscribed_topic_missing_from_the_metadata_fails() -> None:
    with pytest.raises(AssignorError, match="missing from the metadata"):
        assign({"a": frozenset({T3})}, {}, {T1: [0]})


@given(st.integers(1, 9), st.integers(1, 12), st.data())
def test_balanced_and_every_partition_served_whatever_the_previous_assignment(
    members: int, partitions: int, data: st.DataObject
) -> None:
    ids = [f"m{i}" for i in range(members)]
    previous = {m: {T1: set(data.draw(st.lists(st.integers(0, partitions + 2), max_size=4)))} for m in ids}
    result = assign({m: frozenset({T1}) for m in ids}, previous, {T1: range(partitions)})
    sizes = counts(result).values()
    assert max(sizes) - min(sizes) <= 1
    served = {p for a in result.values() for p in a.get(T1, set())}
    assert served == set(range(partitions))
    sharing = -(-members // partitions)
    for p in range(partitions):
        assert sum(p in a.get(T1, set()) for a in result.values()) <= sharing
