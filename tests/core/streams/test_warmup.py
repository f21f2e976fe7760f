"""The warm-up step: a stateful task moving to a member that lacks its state stays where it runs
while the newcomer warms up, within the group's budget; promoted once caught up; v0 members and
stateless tasks move at once. Hypothesis: the invariants, and that every warm-up ends."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from coordinator.core.errors import CoordinatorError, ErrorCode
from coordinator.core.streams import stall
from coordinator.core.streams.assignor import AssignorMember, SubtopologySpec, assign
from coordinator.core.streams.tasks import Task, TasksTuple
from coordinator.core.streams.warmup import (
    UNKNOWN_END_OFFSET,
    MemberTaskOffsets,
    WarmupConfig,
    WarmupMember,
    group_end_offsets,
    lag,
    preserves_active_task_count,
    refine,
)

T0, T1, T2 = ("0", 0), ("0", 1), ("0", 2)
CONFIG = WarmupConfig(num_warmup_replicas=2, acceptable_recovery_lag=100)


def offsets(offsets: dict[Task, int], ends: dict[Task, int] | None = None) -> MemberTaskOffsets:
    return MemberTaskOffsets(offsets, ends or {}, True)


def tasks(active: set[Task] | None = None, standby: set[Task] | None = None,
          warmup: set[Task] | None = None) -> TasksTuple:
    return TasksTuple(frozenset(active or ()), frozenset(standby or ()), frozenset(warmup or ()))


def scale_out(newcomer_offsets: MemberTaskOffsets, config: WarmupConfig = CONFIG,
              stateful: tuple[str, ...] = ("0",)) -> dict[str, TasksTuple]:
    """"a" ran T0 and T1; the target moves T1 to the new member "b"."""
    members = {"a": WarmupMember("pa", tasks({T0, T1})), "b": WarmupMember("pb", offsets=newcomer_offsets)}
    target = {"a": tasks({T0}, {T1}), "b": tasks({T1}, {T0})}
    return refine(members, target, stateful, config)


def test_a_stateful_task_stays_on_its_owner_while_the_newcomer_warms_up() -> None:
    refined = scale_out(offsets({}, {T1: 5000}))
    assert refined["a"] == tasks({T0, T1})  # keeps processing T1; its standby of T1 is dropped
    assert refined["b"] == tasks(set(), {T0}, {T1})


def test_the_newcomer_is_promoted_once_its_lag_is_within_the_acceptable_recovery_lag() -> None:
    assert scale_out(offsets({T1: 4900}, {T1: 5000})) == {"a": tasks({T0}, {T1}), "b": tasks({T1}, {T0})}
    still_behind = scale_out(offsets({T1: 4899}, {T1: 5000}))
    assert still_behind["b"].warmup == {T1}


def test_an_end_offset_the_newcomer_did_not_report_is_taken_from_the_group() -> None:
    members = {"a": WarmupMember("pa", tasks({T0, T1}), offsets({}, {T1: 5000})),
               "b": WarmupMember("pb", offsets=offsets({T1: 4990}))}
    refined = refine(members, {"a": tasks({T0}), "b": tasks({T1})}, ["0"], CONFIG)
    assert refined["b"] == tasks({T1})


@pytest.mark.parametrize("case", ["v0", "stateless", "off", "same-process", "owner-left"])
def test_tasks_move_at_once_when_there_is_nothing_to_wait_for(case: str) -> None:
    newcomer = WarmupMember("pa" if case == "same-process" else "pb",
                            offsets=MemberTaskOffsets() if case == "v0" else offsets({}))
    members = {"a": WarmupMember("pa", tasks({T0, T1})), "b": newcomer}
    target = {"a": tasks({T0}), "b": tasks({T1})}
    if case == "owner-left":
        target = {"b": tasks({T0, T1})}
    config = WarmupConfig(0, 100) if case == "off" else CONFIG
    refined = refine(members, target, [] if case == "stateless" else ["0"], config)
    assert refined == target


def test_the_budget_bounds_warm_ups_and_running_ones_keep_theirs() -> None:
    members = {"a": WarmupMember("pa", tasks({T0, T1, T2})),
               "b": WarmupMember("pb", tasks(warmup={T2}), offsets({}))}
    target = {"a": tasks(), "b": tasks({T0, T1, T2})}
    refined = refine(members, target, ["0"], WarmupConfig(1, 100))
    assert refined["b"].warmup == {T2}  # already warming up: it keeps the one slot
    assert refined["a"].active == {T0, T1, T2} and refined["b"].active == set()


def test_duplicate_task_offsets_are_an_invalid_request_and_leave_the_old_ones() -> None:
    before = offsets({T0: 1})
    with pytest.raises(CoordinatorError) as refused:
        before.update([("0", 0, 5), ("0", 0, 6)], None)
    assert refused.value.code == ErrorCode.INVALID_REQUEST
    assert refused.value.message == "Task offsets contain a duplicate entry for subtopology 0 and partition 0."
    assert before.update(None, [("0", 0, 9)]) == MemberTaskOffsets({T0: 1}, {T0: 9}, True)
    assert MemberTaskOffsets().update(None, None).reported is False


def test_lags_that_go_backwards_only_delay_the_promotion() -> None:
    caught_up = offsets({T1: 4950}, {T1: 5000})
    behind_again = caught_up.update([("0", 1, 10)], None)  # the store was wiped: offsets went back
    assert scale_out(caught_up)["b"].active == {T1}
    assert scale_out(behind_again)["b"].warmup == {T1}


def test_an_end_offset_of_long_max_value_or_below_zero_is_unknown() -> None:
    empty = WarmupMember("pb", offsets=offsets({T1: 0}, {T1: UNKNOWN_END_OFFSET}))
    assert lag(empty, T1, {}) is None  # not caught up: its lag is unknown, not 2**63 - 1
    assert scale_out(empty.offsets)["b"].warmup == {T1}
    assert lag(empty, T1, {T1: 40}) == 40  # another member's known end counts instead
    unknown = [WarmupMember("p", offsets=offsets({}, {T1: e})) for e in (UNKNOWN_END_OFFSET, -1, 7)]
    assert group_end_offsets(unknown) == {T1: 7}


def test_a_stalled_move_goes_ahead_without_a_warm_up() -> None:
    empty = offsets({T1: 0}, {T1: UNKNOWN_END_OFFSET})
    members = {"a": WarmupMember("pa", tasks({T0, T1})), "b": WarmupMember("pb", offsets=empty)}
    target = {"a": tasks({T0}), "b": tasks({T1})}
    assert refine(members, target, ["0"], CONFIG, frozenset({("b", T1)})) == target


@st.composite
def moving_groups(draw: st.DrawFn) -> tuple[dict[str, WarmupMember], dict[str, TasksTuple], list[str], WarmupConfig]:
    rng = random.Random(draw(st.integers(0, 2**32)))
    subtopologies = {str(i): SubtopologySpec(draw(st.integers(1, 8)), rng.random() < 0.7)
                     for i in range(draw(st.integers(1, 3)))}
    all_tasks = [(s, p) for s, spec in subtopologies.items() for p in range(spec.number_of_tasks)]
    n = draw(st.integers(1, 7))
    ids = [f"m{i}" for i in range(n)]
    owner = {t: rng.choice([*ids, None]) for t in all_tasks}
    members = {}
    for i, member_id in enumerate(ids):
        current = tasks({t for t in all_tasks if owner[t] == member_id})
        reported = rng.random() < 0.7
        offs = {t: rng.randrange(0, 1000) for t in all_tasks if rng.random() < 0.5} if reported else {}
        ends = {t: rng.randrange(500, 1500) for t in all_tasks if rng.random() < 0.5} if reported else {}
        members[member_id] = WarmupMember(f"p{i % draw(st.integers(1, n))}", current,
                                          MemberTaskOffsets(offs, ends, reported))
    stay = [m for m in ids if rng.random() < 0.8] or ids[:1]
    new = [f"n{i}" for i in range(draw(st.integers(0, 3)))]
    for j, member_id in enumerate(new):
        members[member_id] = WarmupMember(f"q{j}", offsets=offsets({}))
    assignor_members = {m: AssignorMember(members[m].process_id, members[m].current.active) for m in [*stay, *new]}
    target = assign(assignor_members, subtopologies, draw(st.integers(0, 1)))
    config = WarmupConfig(draw(st.integers(0, 3)), draw(st.integers(0, 300)))
    return members, target, [s for s, spec in subtopologies.items() if spec.stateful], config


def process_roles(members: dict[str, WarmupMember], assignment: dict[str, TasksTuple]) -> Counter[tuple[str, Task]]:
    held: Counter[tuple[str, Task]] = Counter()
    for member_id, t in assignment.items():
        for task in [*t.active, *t.standby, *t.warmup]:
            held[(members[member_id].process_id, task)] += 1
    return held


@given(moving_groups())
@settings(max_examples=400)
def test_refined_assignments_keep_every_invariant(
        group: tuple[dict[str, WarmupMember], dict[str, TasksTuple], list[str], WarmupConfig]) -> None:
    members, target, stateful, config = group
    refined = refine(members, target, stateful, config)
    assert refine(members, target, stateful, config) == refined  # deterministic
    assert set(refined) == set(target) and preserves_active_task_count(target, refined)
    actives = Counter(t for a in refined.values() for t in a.active)
    assert set(actives.values()) <= {1} and set(actives) == {t for a in target.values() for t in a.active}
    warmups = sum(len(a.warmup) for a in refined.values())
    event(f"warm-ups: {warmups}")
    assert warmups <= config.num_warmup_replicas  # the budget
    assert set(process_roles(members, refined).values()) <= {1}  # one role per process
    for member_id, t in refined.items():
        if not members[member_id].offsets.reported:  # v0: its tasks come to it at once
            assert target[member_id].active <= t.active
        assert {task for task in t.active - target[member_id].active if task[0] not in stateful} == set()
        for task in t.active - target[member_id].active:  # held back only where it runs now
            assert task in members[member_id].current.active


@given(moving_groups(), st.integers(0, 2**32))
@settings(max_examples=200)
def test_every_warm_up_ends_promoted_or_dropped_and_the_group_reaches_its_target(
        group: tuple[dict[str, WarmupMember], dict[str, TasksTuple], list[str], WarmupConfig], seed: int) -> None:
    """Members reconcile to each refined assignment; a warm-up restores a random amount each step
    (at least half the acceptable lag, so restoration makes progress). Within a bounded number of
    steps there is no warm-up left and the group runs exactly its target."""
    members, target, stateful, config = group
    rng = random.Random(seed)
    members = {m: w for m, w in members.items() if m in target}
    steps = 0
    while True:
        refined = refine(members, target, stateful, config)
        if refined == {m: TasksTuple(t.active, t.standby) for m, t in target.items()}:
            event(f"steps to the target: {min(steps, 5)}{'+' if steps >= 5 else ''}")
            break
        steps += 1
        assert steps <= 1000, "a warm-up never ended"
        ends = {}
        for member in members.values():
            ends.update(member.offsets.end_offsets)
        for member_id, t in refined.items():
            member = members[member_id]
            progressed = dict(member.offsets.offsets)
            for task in t.warmup:
                end = member.offsets.end_offsets.get(task, ends.get(task, 1000))
                progressed[task] = min(end, progressed.get(task, 0) + config.acceptable_recovery_lag // 2 + 1
                                       + rng.randrange(0, 50))
            end_offsets = {**member.offsets.end_offsets, **{task: ends.get(task, 1000) for task in t.warmup}}
            members[member_id] = WarmupMember(member.process_id, t, MemberTaskOffsets(
                progressed, end_offsets, member.offsets.reported))


def track_moves(moves: dict[stall.Move, stall.Progress], members: dict[str, WarmupMember],
                target: dict[str, TasksTuple], refined: dict[str, TasksTuple], now: int,
                bound: int) -> dict[stall.Move, stall.Progress]:
    """What the heartbeat does after each refinement: the moves' lags as the newcomers reported them."""
    ends = group_end_offsets(members.values())
    return stall.track(
        moves, [(m, task) for m, t in refined.items() for task in t.warmup],
        lambda move: lag(members[move[0]], move[1], ends),
        lambda move: move[1] in target[move[0]].active and move[1] not in members[move[0]].current.active,
        now, bound)


REPORTS = ["progress", "unknown-end", "missing", "backwards"]


@given(moving_groups(), st.integers(0, 2**32))
@settings(max_examples=200)
def test_every_warm_up_ends_whatever_the_newcomers_report(
        group: tuple[dict[str, WarmupMember], dict[str, TasksTuple], list[str], WarmupConfig], seed: int) -> None:
    """As above, but each warm-up reports one way throughout: restoring, offset 0 with end
    Long.MAX_VALUE (an empty changelog), no offset at all, or lags jumping back and forth. With the
    stall rule (time passing between steps), no warm-up lasts and the group reaches its target."""
    members, target, stateful, config = group
    rng = random.Random(seed)
    members = {m: w for m, w in members.items() if m in target}
    bound, now, steps = 10, 0, 0
    moves: dict[stall.Move, stall.Progress] = {}
    kind: dict[tuple[str, Task], str] = {}
    while True:
        refined = refine(members, target, stateful, config, stall.stalled(moves, now, bound))
        if refined == {m: TasksTuple(t.active, t.standby) for m, t in target.items()}:
            event(f"steps to the target: {min(steps, 5)}{'+' if steps >= 5 else ''}")
            break
        steps += 1
        assert steps <= 2000, "a warm-up never ended"
        for member_id, t in refined.items():
            member = members[member_id]
            offs, ends = dict(member.offsets.offsets), dict(member.offsets.end_offsets)
            for task in t.warmup:
                how = kind.setdefault((member_id, task), rng.choice(REPORTS))
                event(f"report: {how}")
                end = 1000
                if how == "progress":
                    offs[task], ends[task] = min(end, offs.get(task, 0) + rng.randrange(0, 300)), end
                elif how == "unknown-end":
                    offs[task], ends[task] = 0, UNKNOWN_END_OFFSET
                elif how == "missing":
                    offs.pop(task, None)
                    ends.pop(task, None)
                else:
                    offs[task], ends[task] = rng.randrange(0, end + 1), end
            members[member_id] = WarmupMember(member.process_id, t,
                                              MemberTaskOffsets(offs, ends, member.offsets.reported))
        moves = track_moves(moves, members, target, refined, now, bound)
        now += rng.randrange(1, 6)
