"""Worked examples for the ``uniform`` assignor: each one pins a concrete, hand-checked outcome."""

from __future__ import annotations

import pytest

from coordinator.core.assignors import (
    GroupSpec,
    PartitionAssignorError,
    SubscriptionType,
    UniformAssignor,
)
from tests.core.assignors.support import (
    T1,
    T2,
    T3,
    check_valid,
    describer,
    group,
    loads,
    member,
    sets,
    with_current,
)

uniform = UniformAssignor()


def test_kip848_three_members_join_one_by_one_with_minimal_movement() -> None:
    counts = {T1: 3}
    topics = describer(counts)

    first = uniform.assign(group(A=member(T1)), topics)
    assert sets(first) == {"A": {T1: {0, 1, 2}}}

    spec = with_current(group(A=member(T1), B=member(T1)), first)
    second = uniform.assign(spec, topics)
    # A keeps two of its three partitions and gives up the highest one; nothing else moves.
    assert sets(second) == {"A": {T1: {0, 1}}, "B": {T1: {2}}}

    spec = with_current(group(A=member(T1), B=member(T1), C=member(T1)), second)
    third = uniform.assign(spec, topics)
    # Exactly one partition moves (A's 1 to C); B keeps partition 2.
    assert sets(third) == {"A": {T1: {0}}, "B": {T1: {2}}, "C": {T1: {1}}}


def test_reference_worked_example_four_partitions_second_member_joins() -> None:
    # kip848.md §2.6: target@1 = A:{0,1,2,3}; after B joins, target@2 = A:{0,1}, B:{2,3}.
    topics = describer({T1: 4})
    first = uniform.assign(group(A=member(T1)), topics)
    assert sets(first) == {"A": {T1: {0, 1, 2, 3}}}
    second = uniform.assign(with_current(group(A=member(T1), B=member(T1)), first), topics)
    assert sets(second) == {"A": {T1: {0, 1}}, "B": {T1: {2, 3}}}


def test_new_member_sorting_first_still_only_takes_the_released_partition() -> None:
    topics = describer({T1: 3})
    spec = GroupSpec({"A": member(T1, current={T1: {0, 1, 2}}), "0": member(T1)})
    # The newcomer "0" comes first in member order and gives up the extra slot it cannot fill
    # from its own partitions, so A keeps two partitions.
    assert sets(uniform.assign(spec, topics)) == {"A": {T1: {0, 1}}, "0": {T1: {2}}}


def test_departed_member_partitions_go_to_the_last_member_that_must_take_the_extra_slot() -> None:
    topics = describer({T1: 3})
    spec = group(A=member(T1, current={T1: {0}}), B=member(T1, current={T1: {2}}))
    # C (which held partition 1) left. A gives its extra slot up (B could still take it); B is
    # the last member and must take it.
    assert sets(uniform.assign(spec, topics)) == {"A": {T1: {0}}, "B": {T1: {1, 2}}}


def test_balanced_assignment_is_never_reshuffled() -> None:
    topics = describer({T1: 5, T2: 2})
    current = {
        "A": {T2: {1}, T1: {3}},
        "B": {T1: {0, 4}},
        "C": {T1: {1, 2}, T2: {0}},
    }
    spec = group(**{m: member(T1, T2, current=c) for m, c in current.items()})
    assert sets(uniform.assign(spec, topics)) == current


def test_over_quota_member_keeps_its_lowest_numbered_partitions_in_topic_order() -> None:
    topics = describer({T1: 4, T2: 2})
    spec = group(A=member(T1, T2, current={T2: {0, 1}, T1: {0, 1, 2, 3}}), B=member(T1, T2))
    result = uniform.assign(spec, topics)
    # Quota 3: topics are visited in id order (T1 < T2), so A keeps T1 0-2 and releases T1:3
    # and all of T2.
    assert sets(result) == {"A": {T1: {0, 1, 2}}, "B": {T1: {3}, T2: {0, 1}}}


def test_subscription_change_of_whole_group_reassigns_the_new_topic() -> None:
    topics = describer({T1: 2, T2: 4})
    spec = group(
        A=member(T2, current={T1: {0}}),
        B=member(T2, current={T1: {1}}),
    )
    assert sets(uniform.assign(spec, topics)) == {"A": {T2: {0, 1}}, "B": {T2: {2, 3}}}


def test_partitions_added_to_a_topic_are_spread_without_moving_existing_ones() -> None:
    topics = describer({T1: 6})
    spec = group(A=member(T1, current={T1: {0, 1}}), B=member(T1, current={T1: {2, 3}}))
    assert sets(uniform.assign(spec, topics)) == {"A": {T1: {0, 1, 4}}, "B": {T1: {2, 3, 5}}}


def test_current_assignment_hygiene_out_of_range_and_double_claims() -> None:
    topics = describer({T1: 4})
    spec = group(
        A=member(T1, current={T1: {0, 1, 7, -1}}),
        B=member(T1, current={T1: {1, 2}}),  # 1 is also claimed by A, which comes first
    )
    result = uniform.assign(spec, topics)
    check_valid(spec, {T1: 4}, result)
    assert sets(result) == {"A": {T1: {0, 1}}, "B": {T1: {2, 3}}}


def test_from_scratch_the_extra_slots_go_to_the_last_members() -> None:
    # Nobody holds anything, so every member but the last ones gives its extra slot up.
    topics = describer({T1: 2})
    spec = group(A=member(T1), B=member(T1), C=member(T1))
    assert sets(uniform.assign(spec, topics)) == {"A": {}, "B": {T1: {0}}, "C": {T1: {1}}}
    spec = group(A=member(T1), B=member(T1))
    assert sets(uniform.assign(spec, describer({T1: 5}))) == {
        "A": {T1: {0, 1}},
        "B": {T1: {2, 3, 4}},
    }


def test_empty_group_and_members_without_subscriptions() -> None:
    topics = describer({T1: 2})
    assert uniform.assign(GroupSpec({}), topics) == {}
    assert uniform.assign(group(A=member(), B=member()), topics) == {"A": {}, "B": {}}


@pytest.mark.parametrize(
    "spec",
    [
        group(A=member(T1, T3)),  # homogeneous
        group(A=member(T1), B=member(T3)),  # heterogeneous
    ],
)
def test_subscribed_topic_missing_from_metadata_is_an_error(spec: GroupSpec) -> None:
    with pytest.raises(PartitionAssignorError):
        uniform.assign(spec, describer({T1: 2}))


# ----- heterogeneous -------------------------------------------------------------------------


def test_heterogeneous_overlapping_subscriptions_from_scratch() -> None:
    counts = {T1: 3, T2: 3}
    spec = group(A=member(T1), B=member(T1, T2), C=member(T2))
    assert spec.subscription_type is SubscriptionType.HETEROGENEOUS
    result = uniform.assign(spec, describer(counts))
    check_valid(spec, counts, result)
    assert loads(result) == {"A": 2, "B": 2, "C": 2}
    # Topics tie on partitions per subscriber and subscriber count, so T1 (lower id) goes first:
    # A and B share its three partitions (A, lower member, gets the odd one); then T2 tops C up
    # to two and gives B its second partition.
    assert sets(result) == {"A": {T1: {0, 1}}, "B": {T1: {2}, T2: {2}}, "C": {T2: {0, 1}}}


def test_heterogeneous_joining_member_is_balanced_topic_by_topic() -> None:
    counts = {T1: 4, T2: 4}
    spec = group(
        A=member(T1, current={T1: {0, 1, 2, 3}}),
        B=member(T2, current={T2: {0, 1, 2, 3}}),
        C=member(T1, T2),
    )
    result = uniform.assign(spec, describer(counts))
    check_valid(spec, counts, result)
    # T1 (first by id on a tie) is balanced between A and C first: C takes A's two highest
    # partitions. Then T2 between B (4) and C (2): C takes B's highest. Balanced 2/3/3, in three
    # moves where a global optimum would need two: Kafka's per-topic greedy does the same.
    assert sets(result) == {"A": {T1: {0, 1}}, "B": {T2: {0, 1, 2}}, "C": {T1: {2, 3}, T2: {3}}}


def test_heterogeneous_balance_is_bounded_by_what_members_can_hold() -> None:
    counts = {T1: 10, T2: 2}
    spec = group(A=member(T1), B=member(T1, T2), C=member(T2))
    result = uniform.assign(spec, describer(counts))
    check_valid(spec, counts, result)
    # T1 (5 per subscriber) is handed out first: 5 + 5. Then T2 fills C, the least loaded. C can
    # never hold more than T2's two partitions, so 5/5/2 is the best possible.
    assert sets(result) == {
        "A": {T1: {0, 1, 2, 3, 4}},
        "B": {T1: {5, 6, 7, 8, 9}},
        "C": {T2: {0, 1}},
    }


def test_heterogeneous_unsubscribed_topic_is_revoked_and_rebalanced() -> None:
    counts = {T1: 4, T2: 2}
    spec = group(
        A=member(T1, current={T1: {0, 1}, T2: {0, 1}}),
        B=member(T1, T2, current={T1: {2, 3}}),
    )
    result = uniform.assign(spec, describer(counts))
    check_valid(spec, counts, result)
    assert loads(result) == {"A": 3, "B": 3}
    # A keeps T1 0,1 and receives B's highest T1 partition; B gets T2.
    assert sets(result) == {"A": {T1: {0, 1, 3}}, "B": {T1: {2}, T2: {0, 1}}}


def test_heterogeneous_is_only_locally_balanced_when_subscriptions_chain() -> None:
    # Kafka's own example of the limit of per-topic balancing: A-B share T1, B-C share T2. A load
    # spread of 2 (A 9, C 11) is a fixpoint because each topic is balanced on its own.
    counts = {T1: 18, T2: 12}
    current = {
        "A": {T1: set(range(9))},
        "B": {T1: set(range(9, 18)), T2: {0}},
        "C": {T2: set(range(1, 12))},
    }
    spec = group(
        A=member(T1, current=current["A"]),
        B=member(T1, T2, current=current["B"]),
        C=member(T2, current=current["C"]),
    )
    result = uniform.assign(spec, describer(counts))
    check_valid(spec, counts, result)
    assert loads(result) == {"A": 9, "B": 10, "C": 11}
    assert sets(result) == current


def test_heterogeneous_hands_out_topics_with_most_partitions_per_subscriber_first() -> None:
    counts = {T1: 2, T2: 10}
    spec = group(A=member(T1), B=member(T1, T2), C=member(T2))
    result = uniform.assign(spec, describer(counts))
    check_valid(spec, counts, result)
    # T2 (5 per subscriber) goes first although T1 has the lower id: B and C get five each, then
    # T1 goes to A, the least loaded of its subscribers. No balancing move is needed afterwards.
    assert sets(result) == {
        "A": {T1: {0, 1}},
        "B": {T2: {0, 1, 2, 3, 4}},
        "C": {T2: {5, 6, 7, 8, 9}},
    }
