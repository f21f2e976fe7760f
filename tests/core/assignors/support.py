"""Builders, checkers and Hypothesis strategies shared by the assignor tests."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from uuid import UUID

from hypothesis import strategies as st

from coordinator.core.assignors import (
    GroupAssignment,
    GroupSpec,
    MemberSubscriptionSpec,
    SubscribedTopicMetadata,
    TopicMetadata,
)

T1 = UUID("00000000-0000-0000-0000-0000000000a1")
T2 = UUID("00000000-0000-0000-0000-0000000000a2")
T3 = UUID("00000000-0000-0000-0000-0000000000a3")


def describer(counts: Mapping[UUID, int]) -> SubscribedTopicMetadata:
    return SubscribedTopicMetadata(
        {topic_id: TopicMetadata(f"topic-{topic_id.int:x}", n) for topic_id, n in counts.items()}
    )


def member(
    *topics: UUID,
    current: Mapping[UUID, Iterable[int]] | None = None,
    instance_id: str | None = None,
) -> MemberSubscriptionSpec:
    return MemberSubscriptionSpec(
        subscribed_topic_ids=frozenset(topics),
        assigned_partitions={t: frozenset(p) for t, p in (current or {}).items()},
        instance_id=instance_id,
    )


def group(**members: MemberSubscriptionSpec) -> GroupSpec:
    return GroupSpec(members)


def sets(assignment: GroupAssignment) -> dict[str, dict[UUID, set[int]]]:
    """Plain sets, for readable equality assertions."""
    return {m: {t: set(p) for t, p in a.items()} for m, a in assignment.items()}


def with_current(spec: GroupSpec, assignment: GroupAssignment) -> GroupSpec:
    """``spec`` whose members' current assignments are ``assignment`` (missing members: empty)."""
    return GroupSpec(
        {
            member_id: MemberSubscriptionSpec(
                subscribed_topic_ids=m.subscribed_topic_ids,
                assigned_partitions=assignment.get(member_id, {}),
                rack_id=m.rack_id,
                instance_id=m.instance_id,
            )
            for member_id, m in spec.members.items()
        }
    )


def loads(assignment: GroupAssignment) -> dict[str, int]:
    return {m: sum(len(p) for p in a.values()) for m, a in assignment.items()}


def owners(assignment: GroupAssignment) -> dict[tuple[UUID, int], str]:
    """(topic, partition) -> member; asserts no partition has two owners."""
    result: dict[tuple[UUID, int], str] = {}
    for member_id, assigned in assignment.items():
        for topic_id, partitions in assigned.items():
            for p in partitions:
                assert (topic_id, p) not in result, f"{topic_id}:{p} assigned twice"
                result[topic_id, p] = member_id
    return result


def check_valid(spec: GroupSpec, counts: Mapping[UUID, int], assignment: GroupAssignment) -> None:
    """Every member present; every partition of a subscribed topic exactly once, to a subscriber."""
    assert set(assignment) == set(spec.members)
    owned = owners(assignment)
    for member_id, assigned in assignment.items():
        subscribed = spec.members[member_id].subscribed_topic_ids
        for topic_id, partitions in assigned.items():
            assert partitions, "empty partition sets are omitted"
            assert isinstance(partitions, frozenset)
            assert topic_id in subscribed, f"{member_id} got unsubscribed {topic_id}"
            assert all(0 <= p < counts[topic_id] for p in partitions)
    wanted = {
        (topic_id, p)
        for m in spec.members.values()
        for topic_id in m.subscribed_topic_ids
        for p in range(counts[topic_id])
    }
    assert set(owned) == wanted


def usable_current(spec: GroupSpec, counts: Mapping[UUID, int]) -> dict[str, dict[UUID, set[int]]]:
    """The documented input hygiene, written independently: subscribed topics, partitions in
    range, and a partition claimed twice belongs to the first member in member id order."""
    claimed: set[tuple[UUID, int]] = set()
    result: dict[str, dict[UUID, set[int]]] = {}
    for member_id in sorted(spec.members):
        m = spec.members[member_id]
        result[member_id] = {}
        for topic_id, partitions in m.assigned_partitions.items():
            if topic_id not in m.subscribed_topic_ids:
                continue
            for p in partitions:
                if 0 <= p < counts[topic_id] and (topic_id, p) not in claimed:
                    claimed.add((topic_id, p))
                    result[member_id].setdefault(topic_id, set()).add(p)
    return result


# ---------------------------------------------------------------------------------------------
# Hypothesis strategies
# ---------------------------------------------------------------------------------------------

member_ids = st.text(alphabet="abcdeXYZ-0", min_size=1, max_size=4)


@dataclass(frozen=True)
class Case:
    """A group to assign: the spec and the partition counts the describer knows."""

    spec: GroupSpec
    counts: dict[UUID, int]

    @property
    def topics(self) -> SubscribedTopicMetadata:
        return describer(self.counts)


@st.composite
def topic_counts(draw: st.DrawFn, max_topics: int = 4, max_partitions: int = 12) -> dict[UUID, int]:
    ids = draw(st.lists(st.uuids(), min_size=1, max_size=max_topics, unique=True))
    return {t: draw(st.integers(0, max_partitions)) for t in ids}


@st.composite
def current_assignments(
    draw: st.DrawFn, counts: Mapping[UUID, int], garbage: bool
) -> dict[UUID, frozenset[int]]:
    """Arbitrary current assignments; with ``garbage``, also unknown topics and bad numbers."""
    topic_choices = sorted(counts)
    if garbage:
        topic_choices.append(UUID(int=0))  # a topic nobody knows
    chosen = draw(
        st.lists(st.sampled_from(topic_choices), unique=True, max_size=len(topic_choices))
    )
    result: dict[UUID, frozenset[int]] = {}
    for t in chosen:
        top = counts.get(t, 3)
        low, high = (-2, top + 2) if garbage else (0, max(top - 1, 0))
        if not garbage and top == 0:
            continue
        ps = draw(st.frozensets(st.integers(low, high), max_size=top + 2))
        if ps:
            result[t] = ps
    return result


@st.composite
def cases(
    draw: st.DrawFn,
    homogeneous: bool | None = None,
    garbage: bool = True,
    max_members: int = 7,
    static: bool = True,
) -> Case:
    """A group. ``homogeneous``: True = same subscriptions, False = at least two different ones,
    None = either. Current assignments are arbitrary (possibly invalid, possibly overlapping)."""
    counts = draw(topic_counts())
    ids = draw(st.lists(member_ids, min_size=1, max_size=max_members, unique=True))
    topic_ids = sorted(counts)
    subscription = st.frozensets(st.sampled_from(topic_ids), max_size=len(topic_ids))
    if homogeneous:
        common = draw(subscription)
        subscriptions = [common] * len(ids)
    else:
        subscriptions = [draw(subscription) for _ in ids]
        if homogeneous is False and len(set(subscriptions)) == 1:
            if len(ids) == 1:
                ids.append(ids[0] + "+")
            subscriptions = [
                *subscriptions[:1],
                *([subscriptions[0] ^ {topic_ids[0]}] * (len(ids) - 1)),
            ]
    instance_ids = (
        draw(
            st.lists(
                st.sampled_from(["i1", "i2", "i3", "i4", None]),
                min_size=len(ids),
                max_size=len(ids),
            )
        )
        if static
        else [None] * len(ids)
    )
    seen: set[str] = set()
    members: dict[str, MemberSubscriptionSpec] = {}
    for member_id, subscribed, instance_id in zip(ids, subscriptions, instance_ids, strict=True):
        if instance_id in seen:
            instance_id = None  # instance ids are unique within a group
        if instance_id is not None:
            seen.add(instance_id)
        members[member_id] = MemberSubscriptionSpec(
            subscribed_topic_ids=subscribed,
            assigned_partitions=draw(current_assignments(counts, garbage)),
            instance_id=instance_id,
        )
    return Case(GroupSpec(members), counts)


@st.composite
def evolutions(draw: st.DrawFn, homogeneous: bool | None = None) -> tuple[Case, Case]:
    """A group, then the same group some time later: members left and joined, subscriptions and
    partition counts may have changed. The later group's current assignments are filled in by the
    test (from the earlier group's computed assignment)."""
    before = draw(cases(homogeneous=homogeneous, garbage=False))
    counts = {t: n + draw(st.integers(0, 3)) for t, n in before.counts.items()}
    kept = [m for m in sorted(before.spec.members) if draw(st.booleans()) or draw(st.booleans())]
    joined = draw(st.lists(member_ids.map(lambda s: "n" + s), max_size=3, unique=True))
    topic_ids = sorted(counts)
    change = draw(st.booleans())
    if homogeneous:
        first = before.spec.members[sorted(before.spec.members)[0]].subscribed_topic_ids
        common = draw(st.frozensets(st.sampled_from(topic_ids))) if change else first
        subscribe = lambda _old: common  # noqa: E731
    else:
        subscribe = lambda old: draw(st.frozensets(st.sampled_from(topic_ids))) if change else old  # noqa: E731
    members: dict[str, MemberSubscriptionSpec] = {}
    for member_id in kept:
        old = before.spec.members[member_id]
        members[member_id] = MemberSubscriptionSpec(
            subscribe(old.subscribed_topic_ids), instance_id=old.instance_id
        )
    for member_id in joined:
        if member_id not in members:
            members[member_id] = MemberSubscriptionSpec(subscribe(frozenset(topic_ids)))
    if not members:
        members["solo"] = MemberSubscriptionSpec(subscribe(frozenset(topic_ids)))
    return before, Case(GroupSpec(members), counts)
