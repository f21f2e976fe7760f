"""The incremental uniform target (``uniform_incremental.rebalance_homogeneous``): from any valid
previous target, every partition exactly once, balanced within one, exactly as sticky as the full
uniform run, untouched members handed back by identity; invalid input is refused (None). Through
the core, joins and leaves take the incremental path and the harness checks replay == live."""

from __future__ import annotations

from uuid import UUID

from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator.core.assignors import (
    GroupAssignment,
    GroupSpec,
    MemberSubscriptionSpec,
    SubscribedTopicDescriber,
    UniformAssignor,
)
from coordinator.core.assignors.uniform_incremental import rebalance_homogeneous
from coordinator.core.events import TargetAssignmentComputed
from tests.core.assignors.support import T1, T2, T3, describer, loads, owners
from tests.core.consumer.harness import ConsumerHarness

Assignment = dict[UUID, frozenset[int]]


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[dict[UUID, int], dict[str, Assignment], list[str]]:
    """Topic counts, a valid (possibly unbalanced, partial) current target, and the new members
    (some of the current holders may have left, newcomers may have joined)."""
    counts = {t: draw(st.integers(0, 12)) for t in draw(st.sets(st.sampled_from([T1, T2, T3]), min_size=1))}
    holders = draw(st.lists(st.sampled_from([f"m{i}" for i in range(8)]), unique=True, max_size=8))
    current: dict[str, dict[UUID, set[int]]] = {m: {} for m in holders}
    if holders:
        for topic_id, count in counts.items():
            for p in range(count):
                owner = draw(st.sampled_from([*holders, None]))
                if owner is not None:
                    current[owner].setdefault(topic_id, set()).add(p)
    candidates = holders + [f"n{i}" for i in range(4)]
    members = draw(st.lists(st.sampled_from(candidates), unique=True, min_size=1))
    frozen = {m: {t: frozenset(ps) for t, ps in a.items()} for m, a in current.items()}
    return counts, frozen, members


def kept(before: dict[str, Assignment], after: dict[str, Assignment]) -> int:
    return sum(len(ps & before.get(m, {}).get(t, frozenset())) for m, a in after.items() for t, ps in a.items())


@settings(max_examples=300, deadline=None)
@given(scenarios())
def test_valid_every_partition_once_balanced_and_as_sticky_as_the_full_run(
    scenario: tuple[dict[UUID, int], dict[str, Assignment], list[str]],
) -> None:
    counts, current, members = scenario
    result = rebalance_homogeneous(members, current, counts)
    assert result is not None and set(result) == set(members)
    # Every partition of every subscribed topic exactly once (owners() asserts no duplicates).
    assert set(owners(result)) == {(t, p) for t, n in counts.items() for p in range(n)}
    sizes = loads(result)
    assert max(sizes.values()) - min(sizes.values()) <= 1
    # As sticky as the full uniform run (both keep the maximum any balanced assignment allows).
    subscribed = frozenset(counts)
    spec = GroupSpec({m: MemberSubscriptionSpec(subscribed, current.get(m, {})) for m in members})
    full = UniformAssignor().assign(spec, describer(counts))
    assert kept(current, result) == kept(current, full)
    # Untouched members get their very object back; nobody both gives and takes.
    for m in members:
        before = current.get(m, {})
        if m in current and result[m] is not before:
            assert result[m] != before
            assert not (set(owners({m: before})) - set(owners({m: result[m]}))
                        and set(owners({m: result[m]})) - set(owners({m: before})))
    # The full run returns it unchanged: a later full run moves nothing.
    again = GroupSpec({m: MemberSubscriptionSpec(subscribed, result[m]) for m in members})
    assert UniformAssignor().assign(again, describer(counts)) == {m: dict(a) for m, a in result.items()}


def test_a_newcomer_takes_its_share_from_the_most_loaded() -> None:
    current = {"a": {T1: frozenset({0, 1, 2})}, "b": {T1: frozenset({3, 4})}, "c": {T1: frozenset({5, 6})}}
    result = rebalance_homogeneous(["a", "b", "c", "z"], current, {T1: 7})
    assert result is not None
    assert result["z"] == {T1: frozenset({2})}  # a (3) gives its highest; b and c keep theirs
    assert result["b"] is current["b"] and result["c"] is current["c"]


def test_a_leavers_partitions_go_to_the_members_below_quota() -> None:
    current = {"a": {T1: frozenset({0, 1})}, "b": {T1: frozenset({2})}, "c": {T1: frozenset({3, 4})}}
    result = rebalance_homogeneous(["a", "b"], current, {T1: 5})
    # 5 over 2: the extra slot goes to the most loaded (a); c's partitions fill a and b in id order.
    assert result == {"a": {T1: frozenset({0, 1, 3})}, "b": {T1: frozenset({2, 4})}}


def test_invalid_previous_targets_are_refused() -> None:
    assert rebalance_homogeneous(["a"], {"a": {T2: frozenset({0})}}, {T1: 3}) is None  # unsubscribed topic
    assert rebalance_homogeneous(["a"], {"a": {T1: frozenset({3})}}, {T1: 3}) is None  # out of range
    twice = {"a": {T1: frozenset({0})}, "b": {T1: frozenset({0, 1})}}
    assert rebalance_homogeneous(["a", "b"], twice, {T1: 3}) is None


def test_joins_and_leaves_through_the_core_take_the_incremental_path_and_replay_equals_live() -> None:
    h = ConsumerHarness({"foo": 10})
    targets = h.shard.types["consumer"].targets  # type: ignore[attr-defined]
    full_runs: list[int] = []

    class Counting(UniformAssignor):
        def assign(self, group_spec: GroupSpec, topics: SubscribedTopicDescriber) -> GroupAssignment:
            full_runs.append(len(group_spec.members))
            return super().assign(group_spec, topics)

    targets.assignors["uniform"] = Counting()
    for i in range(5):
        h.cjoin(f"m{i}")  # the harness checks replay == live and the ownership invariants each step
    timings = h.events_of(TargetAssignmentComputed)
    assert len(timings) == 5 and all(e.assignor == "uniform" for e in timings)
    assert full_runs == []  # every join took the incremental path
    h.cgh("m4", -1)  # a leave: also incremental
    assert full_runs == []
    h.cjoin("m9", names=("foo", "bar"))  # a different subscription: the full run
    assert full_runs == [5]
    h.cgh("m9", -1)
    h.cjoin("m4")
    group = h.cgroup()
    sizes = sorted(sum(len(p) for p in group.target(m).values()) for m in group.members)
    assert sizes == [2, 2, 2, 2, 2]
    # The same joins with the full run only give a target just as balanced.
    full = ConsumerHarness({"foo": 10})
    consumer = full.shard.types["consumer"]
    consumer.targets.incremental = False  # type: ignore[attr-defined]
    for i in range(5):
        full.cjoin(f"m{i}")
    full_group = full.cgroup()
    assert sorted(sum(len(p) for p in full_group.target(m).values()) for m in full_group.members) == sizes
