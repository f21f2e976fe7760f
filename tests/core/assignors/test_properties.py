"""Hypothesis properties of the assignors.

What they establish, for any group Hypothesis builds (1-7 members, 1-4 topics of 0-12 partitions,
arbitrary subscriptions, static and dynamic members, and current assignments that may name unknown
or unsubscribed topics, out-of-range partitions and partitions claimed by two members):

- validity: every partition of every subscribed topic is assigned exactly once, to a member
  subscribed to its topic, and every member has an entry (both assignors, both group shapes);
- uniform, homogeneous: sizes differ by at most one, and members keep exactly as many of their
  usable current partitions as any balanced assignment could;
- uniform, heterogeneous: locally balanced (no holder of a topic's partition is two or more above
  another subscriber of that topic), and balanced within one when everyone subscribes alike;
- stickiness: recomputing from the previous result with unchanged inputs returns it unchanged;
- one member joining a balanced homogeneous group moves exactly P // (N + 1) partitions (so at
  most ceil(P / (N + 1))), all to the newcomer; one member leaving takes nothing from the others;
- determinism: the result, including its key order, does not depend on the order of any input
  mapping or set;
- range: per topic, subscribers in range member order hold consecutive ranges whose sizes differ
  by at most one, larger first; co-partitioned when subscriptions and partition counts agree; the
  current assignment has no influence.
"""

from __future__ import annotations

from collections.abc import Mapping
from uuid import UUID

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from coordinator.core.assignors import (
    GroupAssignment,
    GroupSpec,
    MemberSubscriptionSpec,
    PartitionAssignor,
    RangeAssignor,
    SubscriptionType,
    UniformAssignor,
)
from coordinator.core.assignors.range_assignor import range_member_order
from coordinator.core.assignors.uniform_heterogeneous import assign_heterogeneous
from tests.core.assignors.support import (
    Case,
    cases,
    check_valid,
    describer,
    evolutions,
    loads,
    member_ids,
    usable_current,
    with_current,
)

uniform = UniformAssignor()
range_assignor = RangeAssignor()
both = st.sampled_from([uniform, range_assignor])


def _total(case: Case) -> int:
    first = case.spec.members[case.spec.sorted_member_ids[0]]
    return sum(case.counts[t] for t in first.subscribed_topic_ids)


def _check_locally_balanced(spec: GroupSpec, assignment: GroupAssignment) -> None:
    load = loads(assignment)
    for holder, assigned in assignment.items():
        for topic_id in assigned:
            for other, m in spec.members.items():
                if topic_id in m.subscribed_topic_ids:
                    assert load[holder] - load[other] <= 1, (holder, other, topic_id, load)


# ----- validity ---------------------------------------------------------------------------------


@settings(deadline=None)
@given(assignor=both, case=cases())
def test_every_partition_once_to_a_subscriber(assignor: PartitionAssignor, case: Case) -> None:
    result = assignor.assign(case.spec, case.topics)
    check_valid(case.spec, case.counts, result)


@settings(deadline=None)
@given(assignor=both, history=evolutions())
def test_valid_after_members_subscriptions_and_partitions_change(
    assignor: PartitionAssignor, history: tuple[Case, Case]
) -> None:
    before, after = history
    previous = assignor.assign(before.spec, before.topics)
    spec = with_current(after.spec, previous)
    result = assignor.assign(spec, after.topics)
    check_valid(spec, after.counts, result)
    if assignor is uniform and spec.subscription_type is SubscriptionType.HETEROGENEOUS:
        _check_locally_balanced(spec, result)


# ----- uniform: balance and stickiness ----------------------------------------------------------


@settings(deadline=None)
@given(case=cases(homogeneous=True))
def test_uniform_homogeneous_is_balanced_within_one(case: Case) -> None:
    result = uniform.assign(case.spec, case.topics)
    sizes = loads(result).values()
    assert max(sizes) - min(sizes) <= 1


@settings(deadline=None)
@given(case=cases(homogeneous=True))
def test_uniform_homogeneous_keeps_the_most_any_balanced_assignment_could(case: Case) -> None:
    result = uniform.assign(case.spec, case.topics)
    usable = usable_current(case.spec, case.counts)
    kept = sum(
        len(partitions & result[m].get(t, frozenset()))
        for m, assigned in usable.items()
        for t, partitions in assigned.items()
    )
    quota, extra = divmod(_total(case), len(case.spec.members))
    held = [sum(len(p) for p in assigned.values()) for assigned in usable.values()]
    best = sum(min(c, quota) for c in held) + min(extra, sum(1 for c in held if c > quota))
    assert kept == best


@settings(deadline=None)
@given(case=cases(homogeneous=False))
def test_uniform_heterogeneous_is_locally_balanced(case: Case) -> None:
    assert case.spec.subscription_type is SubscriptionType.HETEROGENEOUS
    result = uniform.assign(case.spec, case.topics)
    _check_locally_balanced(case.spec, result)


@settings(deadline=None)
@given(case=cases(homogeneous=True))
def test_heterogeneous_builder_balances_within_one_when_subscriptions_agree(case: Case) -> None:
    result = assign_heterogeneous(case.spec, case.topics)
    check_valid(case.spec, case.counts, result)
    sizes = loads(result).values()
    assert max(sizes) - min(sizes) <= 1


@settings(deadline=None)
@given(assignor=both, case=cases())
def test_recomputing_from_the_result_changes_nothing(
    assignor: PartitionAssignor, case: Case
) -> None:
    first = assignor.assign(case.spec, case.topics)
    second = assignor.assign(with_current(case.spec, first), case.topics)
    assert second == first


@settings(deadline=None)
@given(case=cases(homogeneous=True), newcomer=member_ids.map(lambda s: "new-" + s))
def test_one_member_joining_moves_only_the_newcomers_share(case: Case, newcomer: str) -> None:
    balanced = uniform.assign(case.spec, case.topics)  # balanced and complete
    subscribed = case.spec.members[case.spec.sorted_member_ids[0]].subscribed_topic_ids
    spec = with_current(
        GroupSpec({**case.spec.members, newcomer: MemberSubscriptionSpec(subscribed)}), balanced
    )
    result = uniform.assign(spec, case.topics)

    total, members = _total(case), len(case.spec.members)
    moved = sum(
        len(p - result[m].get(t, frozenset())) for m, a in balanced.items() for t, p in a.items()
    )
    assert sum(len(p) for p in result[newcomer].values()) == total // (members + 1) == moved
    assert moved <= -(-total // (members + 1))
    for m, assigned in result.items():
        if m != newcomer:
            assert all(p <= balanced[m].get(t, frozenset()) for t, p in assigned.items())


@settings(deadline=None)
@given(case=cases(homogeneous=True), data=st.data())
def test_one_member_leaving_takes_nothing_from_the_others(case: Case, data: st.DataObject) -> None:
    assume(len(case.spec.members) >= 2)
    balanced = uniform.assign(case.spec, case.topics)
    leaver = data.draw(st.sampled_from(case.spec.sorted_member_ids))
    remaining = {m: s for m, s in case.spec.members.items() if m != leaver}
    result = uniform.assign(with_current(GroupSpec(remaining), balanced), case.topics)
    for m in remaining:
        assert all(p <= result[m].get(t, frozenset()) for t, p in balanced[m].items())


# ----- determinism ------------------------------------------------------------------------------


def _reordered(spec: GroupSpec, order: list[str]) -> GroupSpec:
    """The same group built in another order: members, topic sets, current maps and sets."""

    def rebuilt_map(current: Mapping[UUID, frozenset[int]]) -> dict[UUID, frozenset[int]]:
        return {t: frozenset(reversed(sorted(current[t]))) for t in reversed(list(current))}

    return GroupSpec(
        {
            m: MemberSubscriptionSpec(
                subscribed_topic_ids=frozenset(
                    reversed(sorted(spec.members[m].subscribed_topic_ids))
                ),
                assigned_partitions=rebuilt_map(spec.members[m].assigned_partitions),
                rack_id=spec.members[m].rack_id,
                instance_id=spec.members[m].instance_id,
            )
            for m in order
        }
    )


@settings(deadline=None)
@given(assignor=both, case=cases(), data=st.data())
def test_result_does_not_depend_on_input_order(
    assignor: PartitionAssignor, case: Case, data: st.DataObject
) -> None:
    order = data.draw(st.permutations(list(case.spec.members)))
    first = assignor.assign(case.spec, case.topics)
    second = assignor.assign(
        _reordered(case.spec, order), describer(dict(reversed(case.counts.items())))
    )
    assert second == first
    assert list(second) == list(first) == sorted(first)
    for m in first:
        assert list(second[m]) == list(first[m]) == sorted(first[m])


@settings(deadline=None)
@given(assignor=both, case=cases(), data=st.data())
def test_recomputation_does_not_depend_on_input_order(
    assignor: PartitionAssignor, case: Case, data: st.DataObject
) -> None:
    # With the previous result as current assignment most members are unchanged, which exercises
    # the copy-on-write paths.
    spec = with_current(case.spec, assignor.assign(case.spec, case.topics))
    order = data.draw(st.permutations(list(spec.members)))
    first = assignor.assign(spec, case.topics)
    second = assignor.assign(_reordered(spec, order), case.topics)
    assert second == first
    for m in first:
        assert list(second[m]) == list(first[m]) == sorted(first[m])


@settings(deadline=None)
@given(case=cases())
def test_mutable_sets_in_the_current_assignment_never_leak_into_the_result(case: Case) -> None:
    spec = with_current(case.spec, uniform.assign(case.spec, case.topics))
    as_sets = GroupSpec(
        {
            m: MemberSubscriptionSpec(
                s.subscribed_topic_ids,
                {t: set(p) for t, p in s.assigned_partitions.items()},  # type: ignore[misc]
                instance_id=s.instance_id,
            )
            for m, s in spec.members.items()
        }
    )
    result = uniform.assign(as_sets, case.topics)
    check_valid(spec, case.counts, result)  # values must be frozensets


# ----- range ------------------------------------------------------------------------------------


@settings(deadline=None)
@given(case=cases())
def test_range_gives_consecutive_ranges_in_member_order(case: Case) -> None:
    result = range_assignor.assign(case.spec, case.topics)
    order = range_member_order(case.spec)
    for topic_id, count in case.counts.items():
        subscribers = [m for m in order if topic_id in case.spec.members[m].subscribed_topic_ids]
        if not subscribers:
            continue
        runs = [sorted(result[m].get(topic_id, ())) for m in subscribers]
        assert [p for run in runs for p in run] == list(range(count))
        sizes = [len(run) for run in runs]
        assert sizes == sorted(sizes, reverse=True)
        assert sizes[0] - sizes[-1] <= 1


@settings(deadline=None)
@given(case=cases(), count=st.integers(0, 12))
def test_range_co_partitions_when_subscriptions_and_counts_agree(case: Case, count: int) -> None:
    counts = dict.fromkeys(case.counts, count)
    first = case.spec.members[case.spec.sorted_member_ids[0]].subscribed_topic_ids
    spec = GroupSpec(
        {
            m: MemberSubscriptionSpec(first, instance_id=s.instance_id)
            for m, s in case.spec.members.items()
        }
    )
    result = range_assignor.assign(spec, describer(counts))
    for assigned in result.values():
        assert len(set(assigned.values())) <= 1
        assert len(assigned) in (0, len(first))


@settings(deadline=None)
@given(case=cases())
def test_range_ignores_the_current_assignment(case: Case) -> None:
    without = GroupSpec(
        {
            m: MemberSubscriptionSpec(s.subscribed_topic_ids, instance_id=s.instance_id)
            for m, s in case.spec.members.items()
        }
    )
    assert range_assignor.assign(case.spec, case.topics) == range_assignor.assign(
        without, case.topics
    )
