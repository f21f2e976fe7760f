"""Kafka's sticky task assignor: every task active once, standbys on other processes, balance,
stickiness, determinism (Hypothesis over random groups and previous assignments)."""

from __future__ import annotations

import random
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator.core.streams.assignor import AssignorMember, SubtopologySpec, assign
from coordinator.core.streams.tasks import Task, TasksTuple


@st.composite
def groups(draw: st.DrawFn) -> tuple[dict[str, AssignorMember], dict[str, SubtopologySpec], int]:
    subtopologies = {str(i): SubtopologySpec(draw(st.integers(0, 12)), draw(st.booleans()))
                     for i in range(draw(st.integers(1, 4)))}
    tasks = [(s, p) for s, spec in subtopologies.items() for p in range(spec.number_of_tasks)]
    n = draw(st.integers(1, 9))
    processes = draw(st.integers(1, n))
    rng = random.Random(draw(st.integers(0, 2**32)))
    # A previous assignment as a live group has one (each task active on at most one member) but
    # otherwise anything: unbalanced, partial, standbys anywhere, offsets reported for any task.
    owner = {t: rng.randrange(-1, n) for t in tasks}
    members = {}
    for i in range(n):
        active = frozenset(t for t in tasks if owner[t] == i)
        standby = frozenset(t for t in tasks if rng.random() < 0.2) - active
        offsets = {t: rng.randrange(0, 1000) for t in tasks if rng.random() < 0.2}
        members[f"m{i}"] = AssignorMember(f"p{i % processes}", active, standby, offsets)
    return members, subtopologies, draw(st.integers(0, 2))


def active_owners(assignment: dict[str, TasksTuple]) -> Counter[Task]:
    return Counter(t for a in assignment.values() for t in a.active)


@given(groups())
@settings(max_examples=300)
def test_every_task_is_active_exactly_once_and_no_process_holds_a_task_twice(
        group: tuple[dict[str, AssignorMember], dict[str, SubtopologySpec], int]) -> None:
    members, subtopologies, replicas = group
    assignment = assign(members, subtopologies, replicas)
    all_tasks = {(s, p) for s, spec in subtopologies.items() for p in range(spec.number_of_tasks)}
    owners = active_owners(assignment)
    assert set(owners) == all_tasks and set(owners.values()) <= {1}
    held: dict[str, list[Task]] = {}
    for member_id, tasks in assignment.items():
        held.setdefault(members[member_id].process_id, []).extend([*tasks.active, *tasks.standby])
    for tasks in held.values():
        assert len(tasks) == len(set(tasks))
    processes = len(held) if held else len({m.process_id for m in members.values()})
    standbys = Counter(t for a in assignment.values() for t in a.standby)
    for task in all_tasks:
        stateful = subtopologies[task[0]].stateful
        expected = min(replicas, len({m.process_id for m in members.values()}) - 1) if stateful else 0
        assert standbys[task] == expected, (task, processes)


@given(groups())
@settings(max_examples=300)
def test_active_tasks_are_balanced_over_members(
        group: tuple[dict[str, AssignorMember], dict[str, SubtopologySpec], int]) -> None:
    """Kafka's balance: no member above the active quota (tasks / members, rounded up) and processes
    loaded alike per member (a process runs one member per stream thread: Kafka balances the load
    per thread over processes, not member by member, so two members of one process may differ by
    more than one task when stickiness kept one of them full)."""
    members, subtopologies, replicas = group
    assignment = assign(members, subtopologies, replicas)
    counts = [len(a.active) for a in assignment.values()]
    total = sum(counts)
    assert max(counts) <= -(-total // len(members))
    per_process: dict[str, list[int]] = {}
    for member_id, tasks in assignment.items():
        per_process.setdefault(members[member_id].process_id, []).append(len(tasks.active))
    loads = [sum(c) / len(c) for c in per_process.values()]
    assert max(loads) - min(loads) <= 1


@given(groups())
@settings(max_examples=200)
def test_members_keep_their_tasks_up_to_a_fair_share_and_the_same_input_gives_the_same_output(
        group: tuple[dict[str, AssignorMember], dict[str, SubtopologySpec], int]) -> None:
    """Stickiness as Kafka's quotas give it: a member keeps its active tasks up to the fair share
    (floor of tasks / members). (Not a fixed point: the quota shrinks as members fill up, so which
    member may keep a task above the share depends on the order tasks are visited, as in Kafka.)"""
    members, subtopologies, replicas = group
    first = assign(members, subtopologies, replicas)
    reordered = dict(reversed(list(members.items())))
    assert assign(reordered, subtopologies, replicas) == first
    existing = {(s, p) for s, spec in subtopologies.items() for p in range(spec.number_of_tasks)}
    share = len(existing) // len(members)
    for member_id, member in members.items():
        kept = first[member_id].active & member.active
        assert len(kept) >= min(len(member.active & existing), share)
    fed_back = {m: AssignorMember(members[m].process_id, first[m].active, first[m].standby) for m in members}
    again = assign(fed_back, subtopologies, replicas)
    moved = sum(len(first[m].active - again[m].active) for m in members)
    assert moved <= len(members)  # at most the remainder's tasks change hands


def test_a_new_member_takes_only_its_share_and_everyone_else_keeps_theirs() -> None:
    subtopologies = {"0": SubtopologySpec(12, True)}
    two = {m: AssignorMember(f"p-{m}") for m in ("a", "b")}
    before = assign(two, subtopologies, 1)
    three = {m: AssignorMember(f"p-{m}", before[m].active, before[m].standby) for m in two}
    three["c"] = AssignorMember("p-c")
    after = assign(three, subtopologies, 1)
    assert [len(after[m].active) for m in "abc"] == [4, 4, 4]
    for m in "ab":
        assert after[m].active <= before[m].active  # nothing moved between the old members
    assert after["c"].active == (before["a"].active | before["b"].active) - after["a"].active - after["b"].active


def test_a_restarted_member_gets_back_the_tasks_whose_state_it_reported() -> None:
    """KAFKA-20719: fresh member ids and no previous assignment; the reported offsets are the only
    stickiness signal, and they win over the range-like default."""
    subtopologies = {"0": SubtopologySpec(4, True)}
    members = {"x": AssignorMember("p1", task_offsets={("0", 2): 10, ("0", 3): 10}),
               "y": AssignorMember("p2", task_offsets={("0", 0): 10, ("0", 1): 10})}
    assignment = assign(members, subtopologies, 0)
    assert assignment["x"].active == {("0", 2), ("0", 3)}
    assert assignment["y"].active == {("0", 0), ("0", 1)}


def test_stateless_tasks_get_no_standbys_and_a_lone_process_gets_none() -> None:
    subtopologies = {"0": SubtopologySpec(3, False), "1": SubtopologySpec(3, True)}
    lone = assign({"a": AssignorMember("p"), "b": AssignorMember("p")}, subtopologies, 2)
    assert all(not a.standby for a in lone.values())
    spread = assign({m: AssignorMember(m) for m in "abc"}, subtopologies, 1)
    assert {t[0] for a in spread.values() for t in a.standby} == {"1"}
