"""Streams member reconciliation (Kafka's CurrentAssignmentBuilder): an active task is revoked
before it is assigned elsewhere, epochs move as Kafka moves them, role changes happen in place;
and a whole group driven by heartbeats converges to any target without running a task twice."""

from __future__ import annotations

import random

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator.core.errors import CoordinatorError, ErrorCode
from coordinator.core.streams.member import MemberState, StreamsGroupMember
from coordinator.core.streams.reconciliation import check_member_epoch, ownership, reconcile
from coordinator.core.streams.tasks import EMPTY, Task, TasksTuple, TasksWithEpochs

T0, T1, T2 = ("0", 0), ("0", 1), ("0", 2)


def member(member_id: str, process: str, epoch: int, active: dict[Task, int] | None = None,
           standby: set[Task] | None = None, warmup: set[Task] | None = None,
           state: MemberState = MemberState.STABLE) -> StreamsGroupMember:
    return StreamsGroupMember(member_id=member_id, process_id=process, member_epoch=epoch,
                              previous_member_epoch=epoch - 1, state=state,
                              assigned=TasksWithEpochs(active or {}, frozenset(standby or ()),
                                                       frozenset(warmup or ())))


def tasks(active: set[Task] | None = None, standby: set[Task] | None = None,
          warmup: set[Task] | None = None) -> TasksTuple:
    return TasksTuple(frozenset(active or ()), frozenset(standby or ()), frozenset(warmup or ()))


def test_an_active_task_is_revoked_before_it_is_assigned_elsewhere() -> None:
    a = member("a", "pa", 1, {T0: 1, T1: 1})
    b = member("b", "pb", 0)
    target = {"a": tasks({T0}), "b": tasks({T1})}
    # a must give T1 up first: it stays at its epoch until a heartbeat shows T1 gone.
    a = reconcile(a, 2, target["a"], ownership([a, b]), None)
    assert (a.state, a.member_epoch, a.previous_member_epoch) == (MemberState.UNREVOKED_TASKS, 1, 1)
    assert a.assigned.active == {T0: 1} and a.pending_revocation.active == {T1: 1}
    # b moves to the new epoch but does not get T1 while a holds it.
    b = reconcile(b, 2, target["b"], ownership([a, b]), tasks())
    assert (b.state, b.member_epoch, dict(b.assigned.active)) == (MemberState.UNRELEASED_TASKS, 2, {})
    # A heartbeat without task lists proves nothing; one that still lists T1 neither.
    assert reconcile(a, 2, target["a"], ownership([a, b]), None) is a
    assert reconcile(a, 2, target["a"], ownership([a, b]), tasks({T0, T1})) is a
    a = reconcile(a, 2, target["a"], ownership([a, b]), tasks({T0}))
    assert (a.state, a.member_epoch, a.previous_member_epoch) == (MemberState.STABLE, 2, 1)
    assert a.pending_revocation.is_empty()
    b = reconcile(b, 2, target["b"], ownership([a, b]), tasks())
    assert (b.state, b.member_epoch, dict(b.assigned.active)) == (MemberState.STABLE, 2, {T1: 2})


def test_kept_active_tasks_keep_the_epoch_they_were_granted_at() -> None:
    a = member("a", "pa", 3, {T0: 1})
    a = reconcile(a, 4, tasks({T0, T2}), ownership([a]), tasks({T0}))
    assert a.assigned.active == {T0: 1, T2: 4} and a.member_epoch == 4


def test_a_warm_up_is_promoted_in_place_once_the_owner_released_the_task() -> None:
    owner = member("a", "pa", 2, {T0: 1, T1: 1})
    newcomer = member("b", "pb", 2, warmup={T1})
    target = {"a": tasks({T0}), "b": tasks({T1})}
    owner = reconcile(owner, 3, target["a"], ownership([owner, newcomer]), None)
    newcomer = reconcile(newcomer, 3, target["b"], ownership([owner, newcomer]), tasks(warmup={T1}))
    # Not revoked: the warm-up keeps restoring until the active task can be granted.
    assert newcomer.state == MemberState.UNRELEASED_TASKS and newcomer.assigned.warmup == {T1}
    assert newcomer.pending_revocation.is_empty()
    owner = reconcile(owner, 3, target["a"], ownership([owner, newcomer]), tasks({T0}))
    newcomer = reconcile(newcomer, 3, target["b"], ownership([owner, newcomer]), tasks(warmup={T1}))
    assert newcomer.assigned == TasksWithEpochs({T1: 3}) and newcomer.state == MemberState.STABLE


def test_an_active_task_demoted_to_standby_gets_its_standby_at_once() -> None:
    a = member("a", "pa", 1, {T0: 1, T1: 1})
    a = reconcile(a, 2, tasks({T0}, {T1}), ownership([a]), None)
    assert a.state == MemberState.UNREVOKED_TASKS
    assert a.assigned.standby == {T1} and a.pending_revocation.active == {T1: 1}


def test_standby_and_warm_up_swap_roles_without_a_revocation() -> None:
    a = member("a", "pa", 1, standby={T0}, warmup={T1})
    a = reconcile(a, 2, tasks(standby={T1}, warmup={T0}), ownership([a]), None)
    assert (a.state, a.member_epoch) == (MemberState.STABLE, 2)
    assert a.assigned.standby == {T1} and a.assigned.warmup == {T0}


def test_a_process_never_runs_a_task_in_two_roles_while_its_members_hand_it_over() -> None:
    thread1 = member("t1", "p", 1, standby={T0})
    thread2 = member("t2", "p", 1)
    target = {"t1": tasks(), "t2": tasks({T0})}
    thread2 = reconcile(thread2, 2, target["t2"], ownership([thread1, thread2]), tasks())
    assert thread2.state == MemberState.UNRELEASED_TASKS and not thread2.assigned.active
    thread1 = reconcile(thread1, 2, target["t1"], ownership([thread1, thread2]), tasks())
    thread2 = reconcile(thread2, 2, target["t2"], ownership([thread1, thread2]), tasks())
    assert thread2.assigned.active == {T0: 2}


def test_a_member_in_an_unknown_state_is_fenced_unless_it_owns_nothing() -> None:
    stranger = member("a", "pa", 5, {T0: 5}, state=MemberState.UNKNOWN)
    for owned in (None, tasks({T0})):
        with pytest.raises(CoordinatorError) as fenced:
            reconcile(stranger, 6, tasks({T1}), ownership([stranger]), owned)
        assert fenced.value.code == ErrorCode.FENCED_MEMBER_EPOCH
    restarted = reconcile(stranger, 6, tasks({T1}), ownership([]), tasks())
    assert restarted.assigned.active == {T1: 6} and restarted.member_epoch == 6


def test_epoch_checks_accept_a_lost_response_and_fence_the_rest() -> None:
    a = msgspec.structs.replace(member("a", "pa", 5, {T0: 5}), previous_member_epoch=4)
    check_member_epoch(a, 0, None)
    check_member_epoch(a, 5, tasks({T1}))
    check_member_epoch(a, 4, tasks({T0}))  # the response that bumped it to 5 was lost
    check_member_epoch(a, 4, None)
    for epoch, owned in ((6, None), (3, None), (4, tasks({T1}))):
        with pytest.raises(CoordinatorError) as fenced:
            check_member_epoch(a, epoch, owned)
        assert fenced.value.code == ErrorCode.FENCED_MEMBER_EPOCH


@st.composite
def handovers(draw: st.DrawFn) -> tuple[list[StreamsGroupMember], dict[str, TasksTuple], int]:
    rng = random.Random(draw(st.integers(0, 2**32)))
    all_tasks = [("0", p) for p in range(draw(st.integers(1, 8)))] + [("1", p) for p in range(draw(st.integers(0, 4)))]
    n = draw(st.integers(1, 6))
    processes = draw(st.integers(1, n))
    ids = [f"m{i}" for i in range(n)]

    def spread() -> tuple[dict[str, set[Task]], dict[str, set[Task]], dict[str, set[Task]]]:
        """One valid assignment: each task active once, replicas on processes not holding it."""
        active: dict[str, set[Task]] = {m: set() for m in ids}
        standby: dict[str, set[Task]] = {m: set() for m in ids}
        warmup: dict[str, set[Task]] = {m: set() for m in ids}
        for task in all_tasks:
            owner = rng.choice(ids)
            active[owner].add(task)
            used = {ids.index(owner) % processes}
            for replicas in (standby, warmup):
                other = rng.choice(ids)
                if ids.index(other) % processes not in used and rng.random() < 0.4:
                    replicas[other].add(task)
                    used.add(ids.index(other) % processes)
        return active, standby, warmup

    active, standby, warmup = spread()
    members = [member(m, f"p{i % processes}", 1, dict.fromkeys(active[m], 1), standby[m], warmup[m])
               for i, m in enumerate(ids)]
    new_active, new_standby, new_warmup = spread()
    target = {m: tasks(new_active[m], new_standby[m], new_warmup[m]) for m in ids}
    return members, target, rng.randrange(2**32)


@given(handovers())
@settings(max_examples=300)
def test_a_group_converges_to_its_target_and_no_task_ever_runs_twice(
        case: tuple[list[StreamsGroupMember], dict[str, TasksTuple], int]) -> None:
    """Members heartbeat in random order; each reports what it runs (the assigned tasks of its last
    response) or, sometimes, no lists. At every moment each task is active on at most one member
    and no process holds a task in two roles; in the end every member is STABLE at the target
    epoch holding exactly its target."""
    members, target, seed = case
    rng = random.Random(seed)
    group = {m.member_id: m for m in members}
    for _ in range(200):
        if all(m.is_reconciled_to(2) and m.assigned.tasks() == target[i] for i, m in group.items()):
            return
        member_id = rng.choice(sorted(group))
        current = group[member_id]
        owned = current.assigned.tasks() if rng.random() < 0.8 else None
        group[member_id] = reconcile(current, 2, target[member_id], ownership(group.values()), owned)
        running: dict[Task, str] = {}
        holder: dict[tuple[str, Task], str] = {}
        for m in group.values():
            for task in [*m.assigned.active, *m.pending_revocation.active]:
                assert task not in running, f"{task} active on {running[task]} and {m.member_id}"
                running[task] = m.member_id
            # Two members of one process never hold one task (one member may, in place, while a
            # demoted active task waits for its revocation).
            for task in m.assigned.tasks().all_tasks() | m.pending_revocation.tasks().all_tasks():
                assert holder.setdefault((m.process_id, task), m.member_id) == m.member_id
        for m in group.values():
            assert m.member_epoch in (1, 2)
    raise AssertionError(f"did not converge: {group}")


def test_an_empty_target_is_reached_by_revoking_everything() -> None:
    a = member("a", "pa", 1, {T0: 1}, {T1})
    a = reconcile(a, 2, EMPTY, ownership([a]), None)
    assert a.state == MemberState.UNREVOKED_TASKS
    a = reconcile(a, 2, EMPTY, ownership([a]), tasks())
    assert a.is_reconciled_to(2) and a.assigned.is_empty()
