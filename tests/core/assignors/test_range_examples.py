"""Worked examples for the ``range`` assignor."""

from __future__ import annotations

import pytest

from coordinator.core.assignors import GroupSpec, PartitionAssignorError, RangeAssignor
from coordinator.core.assignors.range_assignor import range_member_order
from tests.core.assignors.support import T1, T2, T3, describer, group, member, sets, with_current

range_assignor = RangeAssignor()


def test_two_members_two_topics_are_co_partitioned() -> None:
    topics = describer({T1: 3, T2: 3})
    result = range_assignor.assign(group(A=member(T1, T2), B=member(T1, T2)), topics)
    assert sets(result) == {
        "A": {T1: {0, 1}, T2: {0, 1}},
        "B": {T1: {2}, T2: {2}},
    }


def test_co_partitioning_four_members_three_topics() -> None:
    topics = describer({T1: 10, T2: 10, T3: 10})
    spec = group(**{m: member(T1, T2, T3) for m in "DCBA"})
    result = range_assignor.assign(spec, topics)
    expected = {"A": {0, 1, 2}, "B": {3, 4, 5}, "C": {6, 7}, "D": {8, 9}}
    assert sets(result) == {m: {T1: p, T2: p, T3: p} for m, p in expected.items()}


def test_unequal_partition_counts_are_ranged_per_topic() -> None:
    topics = describer({T1: 5, T2: 2})
    result = range_assignor.assign(group(A=member(T1, T2), B=member(T1, T2)), topics)
    assert sets(result) == {"A": {T1: {0, 1, 2}, T2: {0}}, "B": {T1: {3, 4}, T2: {1}}}


def test_heterogeneous_subscriptions_range_each_topic_over_its_own_subscribers() -> None:
    topics = describer({T1: 4, T2: 3})
    spec = group(A=member(T1), B=member(T1, T2), C=member(T2))
    assert sets(range_assignor.assign(spec, topics)) == {
        "A": {T1: {0, 1}},
        "B": {T1: {2, 3}, T2: {0, 1}},
        "C": {T2: {2}},
    }


def test_more_members_than_partitions_leaves_the_last_members_empty() -> None:
    topics = describer({T1: 2})
    spec = group(A=member(T1), B=member(T1), C=member(T1))
    assert sets(range_assignor.assign(spec, topics)) == {"A": {T1: {0}}, "B": {T1: {1}}, "C": {}}


def test_topic_without_partitions_and_members_without_subscriptions() -> None:
    topics = describer({T1: 0, T2: 1})
    spec = group(A=member(T1, T2), B=member())
    assert sets(range_assignor.assign(spec, topics)) == {"A": {T2: {0}}, "B": {}}
    assert range_assignor.assign(GroupSpec({}), topics) == {}


def test_static_members_come_first_by_instance_id() -> None:
    topics = describer({T1: 6})
    spec = group(a=member(T1), b=member(T1, instance_id="i2"), c=member(T1, instance_id="i1"))
    assert range_member_order(spec) == ["c", "b", "a"]
    assert sets(range_assignor.assign(spec, topics)) == {
        "c": {T1: {0, 1}},
        "b": {T1: {2, 3}},
        "a": {T1: {4, 5}},
    }


def test_static_member_rejoining_with_a_new_member_id_keeps_its_range() -> None:
    topics = describer({T1: 5})
    before = group(a=member(T1, instance_id="i1"), b=member(T1), c=member(T1, instance_id="i3"))
    after = group(z=member(T1, instance_id="i1"), b=member(T1), c=member(T1, instance_id="i3"))
    first = range_assignor.assign(before, topics)
    second = range_assignor.assign(with_current(after, {"z": first["a"], **first}), topics)
    assert second["z"] == first["a"]
    assert second["b"] == first["b"]
    assert second["c"] == first["c"]


def test_new_dynamic_member_shifts_ranges_because_current_assignment_is_ignored() -> None:
    topics = describer({T1: 4})
    first = range_assignor.assign(group(A=member(T1), C=member(T1)), topics)
    assert sets(first) == {"A": {T1: {0, 1}}, "C": {T1: {2, 3}}}
    spec = with_current(group(A=member(T1), B=member(T1), C=member(T1)), first)
    # Kafka 4.x range is not sticky on the previous target: B, sorting between A and C, takes
    # partition 2 from C even though C could have kept it.
    assert sets(range_assignor.assign(spec, topics)) == {
        "A": {T1: {0, 1}},
        "B": {T1: {2}},
        "C": {T1: {3}},
    }


def test_instance_ids_compare_like_java_strings() -> None:
    # Java compares UTF-16 code units: U+1F600 is encoded D83D DE00, which sorts before U+FFFF,
    # whereas Python's code point order puts it after.
    spec = group(x=member(instance_id="\uffff"), y=member(instance_id="\U0001f600"))
    assert range_member_order(spec) == ["y", "x"]


@pytest.mark.parametrize(
    "spec",
    [
        group(A=member(T1, T3), B=member(T1, T3)),
        group(A=member(T1), B=member(T3)),
    ],
)
def test_subscribed_topic_missing_from_metadata_is_an_error(spec: GroupSpec) -> None:
    with pytest.raises(PartitionAssignorError):
        range_assignor.assign(spec, describer({T1: 2}))
