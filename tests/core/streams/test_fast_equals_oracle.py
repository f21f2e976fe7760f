"""The fast assignor and warm-up step give exactly what the straightforward ones gave
(``oracle.py``, the code before the speed work) on every input: Hypothesis groups of any shape
(processes of one or many members, previous assignments that are partial, unbalanced or claim a
task twice, standbys and offsets anywhere, tasks the topology does not have) and groups at a
tenth of Kafka's benchmark scale, full and incremental."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator.core.streams.assignor import AssignorError, AssignorMember, SubtopologySpec, assign
from coordinator.core.streams.tasks import Task, TasksTuple
from coordinator.core.streams.warmup import MemberTaskOffsets, WarmupConfig, WarmupMember, refine

from . import oracle

Group = tuple[dict[str, AssignorMember], dict[str, SubtopologySpec], int]


@st.composite
def groups(draw: st.DrawFn) -> Group:
    subtopologies = {f"s{i}": SubtopologySpec(draw(st.integers(0, 9)), draw(st.booleans()))
                     for i in range(draw(st.integers(0, 5)))}
    tasks = [(s, p) for s, spec in subtopologies.items() for p in range(spec.number_of_tasks)]
    strays: list[Task] = [("gone", 0), ("s0", 99), ("s1", -1)]  # not in the topology: ignored
    n = draw(st.integers(0, 12))
    processes = draw(st.integers(1, max(n, 1)))
    rng = random.Random(draw(st.integers(0, 2**32)))
    p_active, p_standby, p_offsets = (draw(st.sampled_from([0.0, 0.1, 0.5, 1.0])) for _ in range(3))
    members = {}
    for i in range(n):
        pool = tasks + strays
        active = frozenset(t for t in pool if rng.random() < p_active / max(n, 1) * 2)
        standby = frozenset(t for t in pool if rng.random() < p_standby / 3)
        offsets = {t: rng.choice([0, 5, 5, 1000, rng.randrange(-3, 10**6)]) for t in pool if rng.random() < p_offsets / 2}
        process = f"p{rng.randrange(processes)}" if draw(st.booleans()) else f"p{i % processes}"
        members[f"m{rng.randrange(1000):03d}-{i}"] = AssignorMember(process, active, standby, offsets)
    return members, subtopologies, draw(st.integers(0, 3))


def both(members: dict[str, AssignorMember], subtopologies: dict[str, SubtopologySpec],
         replicas: int) -> dict[str, TasksTuple]:
    try:
        expected = oracle.assign(members, subtopologies, replicas)
    except AssignorError:
        with pytest.raises(AssignorError):
            assign(members, subtopologies, replicas)
        return {}
    got = assign(members, subtopologies, replicas)
    assert got == expected
    assert list(got) == list(expected)
    return got


@given(groups())
@settings(max_examples=1500)
def test_the_assignment_equals_the_oracles(group: Group) -> None:
    both(*group)


@given(groups())
@settings(max_examples=300)
def test_the_assignment_fed_back_with_a_member_more_equals_the_oracles(group: Group) -> None:
    members, subtopologies, replicas = group
    first = both(members, subtopologies, replicas)
    again = {m: AssignorMember(x.process_id, first[m].active, first[m].standby, x.task_offsets)
             for m, x in members.items() if m in first}
    again["zz-new"] = AssignorMember("p-new")
    both(again, subtopologies, replicas)


@pytest.mark.parametrize("per_process", [1, 7])
@pytest.mark.parametrize("replicas", [0, 1, 2])
def test_a_tenth_of_kafkas_benchmark_equals_the_oracle(per_process: int, replicas: int) -> None:
    """100 members, 20 subtopologies x 50 partitions (every other stateful); full with and without
    offsets, then incremental: the full result fed back, one member more."""
    subtopologies = {f"topic-{i:02d}": SubtopologySpec(50, i % 2 == 0) for i in range(20)}
    ids = [f"member-{i:03d}" for i in range(100)]
    rng = random.Random(per_process * 10 + replicas)
    offsets: dict[str, dict[Task, int]] = {m: {} for m in ids}
    for s in subtopologies:
        for p in range(50):
            for _ in range(2):
                offsets[rng.choice(ids)][(s, p)] = rng.randrange(10**6)
    for reported in (False, True):
        full = {m: AssignorMember(f"process-{i // per_process}", task_offsets=offsets[m] if reported else {})
                for i, m in enumerate(ids)}
        first = both(full, subtopologies, replicas)
        grown = {m: AssignorMember(full[m].process_id, first[m].active, first[m].standby, full[m].task_offsets)
                 for m in ids}
        grown["newMember"] = AssignorMember("process-newMember")
        both(grown, subtopologies, replicas)


@st.composite
def refine_inputs(draw: st.DrawFn) -> tuple[dict[str, WarmupMember], dict[str, TasksTuple], list[str], WarmupConfig]:
    members, subtopologies, replicas = draw(groups())
    rng = random.Random(draw(st.integers(0, 2**32)))
    current = oracle.assign(members, subtopologies, replicas) if members else {}
    grown = {m: AssignorMember(x.process_id, current[m].active, current[m].standby) for m, x in members.items()}
    for j in range(draw(st.integers(0, 4))):
        grown[f"new-{j}"] = AssignorMember(f"p-new-{j % 2}")
    target = oracle.assign(grown, subtopologies, replicas) if grown else {}
    tasks = [(s, p) for s, spec in subtopologies.items() for p in range(spec.number_of_tasks)]
    warm = {}
    for m, x in grown.items():
        if rng.random() < 0.1:
            continue  # in the target, not among the members
        held = current.get(m, TasksTuple())
        if rng.random() < 0.3:  # a task reported active twice, warm-ups running
            held = TasksTuple(held.active | {rng.choice(tasks)} if tasks else held.active, held.standby,
                              frozenset(t for t in tasks if rng.random() < 0.1))
        offsets = {t: rng.randrange(-1, 3000) for t in tasks if rng.random() < 0.4}
        ends = {t: rng.randrange(-1, 3000) for t in tasks if rng.random() < 0.3}
        warm[m] = WarmupMember(x.process_id, held, MemberTaskOffsets(offsets, ends, rng.random() < 0.8))
    if rng.random() < 0.2:
        warm["left"] = WarmupMember("p-left", TasksTuple(frozenset(tasks[:3])), MemberTaskOffsets({}, {}, True))
    stateful = [s for s, spec in subtopologies.items() if spec.stateful]
    config = WarmupConfig(draw(st.integers(0, 3)), draw(st.sampled_from([0, 100, 1000, 10_000])))
    return warm, target, stateful, config


@given(refine_inputs())
@settings(max_examples=800)
def test_the_warm_up_step_equals_the_oracles(
        inputs: tuple[dict[str, WarmupMember], dict[str, TasksTuple], list[str], WarmupConfig]) -> None:
    members, target, stateful, config = inputs
    expected = oracle.refine(members, target, stateful, config)
    got = refine(members, target, stateful, config)
    assert got == expected
    assert list(got) == list(expected)
