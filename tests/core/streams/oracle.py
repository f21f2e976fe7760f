"""The streams task assignor and the warm-up step as they were before they were made faster
(commit 6e70613), kept verbatim as the oracle the fast ones must equal on every input
(``test_fast_equals_oracle.py``). Not used by the coordinator."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Mapping

from coordinator.core.streams.assignor import AssignorError, AssignorMember, SubtopologySpec
from coordinator.core.streams.tasks import NO_TASKS, Task, TasksTuple
from coordinator.core.streams.warmup import WarmupConfig, WarmupMember, group_end_offsets, lag


def _per_member(tasks: int, members: int) -> int:
    return 0 if members == 0 else -(-tasks // members)


class _Process:
    """Kafka's ``ProcessState``: the members of one process and the tasks they were given (tasks
    are ints here, see ``assign``)."""

    __slots__ = ("active", "capacity", "counts", "heap", "pid", "standby", "task_count", "tasks")

    def __init__(self, pid: str) -> None:
        self.pid = pid
        self.capacity = 0
        self.task_count = 0
        self.counts: dict[str, int] = {}
        self.tasks: set[int] = set()
        self.active: dict[str, list[int]] = {}
        self.standby: dict[str, list[int]] = {}
        self.heap: list[tuple[int, str]] | None = None

    def load(self) -> float:
        return self.task_count / self.capacity

    def least_member_count(self) -> int:
        heap = self.heap
        return heap[0][0] if heap is not None else min(self.counts.values())

    def add_member(self, member_id: str) -> None:
        self.counts[member_id] = 0
        self.active[member_id] = []
        self.standby[member_id] = []
        self.capacity += 1

    def add(self, member_id: str, task: int, active: bool) -> int:
        self.heap = None
        self.task_count += 1
        self.tasks.add(task)
        (self.active if active else self.standby)[member_id].append(task)
        count = self.counts[member_id] + 1
        self.counts[member_id] = count
        return count

    def add_to_least_loaded(self, task: int, active: bool) -> int:
        heap = self.heap
        if heap is None:
            heap = self.heap = [(count, member) for member, count in self.counts.items()]
            heapq.heapify(heap)
        member = heap[0][1]
        self.task_count += 1
        self.tasks.add(task)
        (self.active if active else self.standby)[member].append(task)
        count = self.counts[member] + 1
        self.counts[member] = count
        heapq.heapreplace(heap, (count, member))
        return count


class _State:
    def __init__(self, members: Mapping[str, AssignorMember], task_id: Callable[[Task], int | None],
                 bases: Mapping[str, tuple[int, int]], total_active: int, total: int, standbys: int) -> None:
        """``bases``: subtopology -> (its first task's int, its number of tasks)."""
        self.standbys = standbys
        self.processes: dict[str, _Process] = {}
        self.process_of: dict[str, _Process] = {}
        self.prev_active: dict[int, str] = {}
        candidates: dict[int, list[tuple[int, int, str]]] = {}
        for member_id in sorted(members):
            member = members[member_id]
            process = self.processes.get(member.process_id)
            if process is None:
                process = self.processes[member.process_id] = _Process(member.process_id)
            process.add_member(member_id)
            self.process_of[member_id] = process
            for subtopology, partition in member.active:
                base = bases.get(subtopology)
                if base is not None and 0 <= partition < base[1]:
                    self.prev_active[base[0] + partition] = member_id
            offsets = member.task_offsets
            for task in member.standby:
                base = bases.get(task[0])
                if base is not None and 0 <= task[1] < base[1]:
                    candidates.setdefault(base[0] + task[1], []).append((0, -offsets.get(task, 0), member_id))
            for task, offset in offsets.items():
                tid = task_id(task)
                if tid is not None and task not in member.standby:
                    candidates.setdefault(tid, []).append((1, -offset, member_id))
        # Previous standbys first, then members that only reported offsets; most caught up first.
        self.prev_standby = {tid: [c[0][2]] if len(c) == 1 else [m for _, _, m in sorted(c)]
                             for tid, c in candidates.items()}
        n = len(members)
        self.active_members, self.total_active = n, total_active
        self.total_members, self.total = n, total
        self.active_quota = _per_member(total_active, n)
        self.total_quota = _per_member(total, n)

    def counted(self, count: int, active: bool) -> None:
        """Kafka's ``maybeUpdateActiveTasksPerMember`` / ``maybeUpdateTotalTasksPerMember``."""
        if active and count == self.active_quota:
            self.active_members -= 1
            self.total_active -= count
            self.active_quota = _per_member(self.total_active, self.active_members)
        if count == self.total_quota:
            self.total_members -= 1
            self.total -= count
            self.total_quota = _per_member(self.total, self.total_members)

    def least_loaded_previous(self, members: list[str] | None, standby_of: int | None) -> str | None:
        """Kafka's ``findPrevMemberWithLeastLoad``: the first candidate, replaced only by one whose
        process and member are both less loaded; for a standby, skip processes holding the task."""
        if not members:
            return None
        best: str | None = None
        best_process = best_member = 0.0
        for member_id in members:
            process = self.process_of[member_id]
            if standby_of is not None and standby_of in process.tasks:
                continue
            process_load, member_load = process.load(), process.counts[member_id]
            if best is None or (process_load < best_process and member_load < best_member):
                best, best_process, best_member = member_id, process_load, member_load
        return best


def assign(members: Mapping[str, AssignorMember], subtopologies: Mapping[str, SubtopologySpec],
           num_standby_replicas: int) -> dict[str, TasksTuple]:
    """The target assignment: member id -> its active and standby tasks.

    Inside, a task is an int, ``subtopology index x stride + partition`` with subtopologies in
    sorted order, so the (subtopology, partition) order is the ints' order and a task is hashed
    and compared as an int (a tuple's hash is recomputed at every lookup); tasks of subtopologies
    or partitions the topology does not have are ignored."""
    sub_ids = sorted(subtopologies)
    counts = [subtopologies[s].number_of_tasks for s in sub_ids]
    if not members:
        if any(counts):
            raise AssignorError("No process available to assign active tasks.")
        return {}
    stride = max(counts, default=0) or 1
    index = {s: i for i, s in enumerate(sub_ids)}

    def task_id(task: Task) -> int | None:
        i = index.get(task[0])
        if i is None or not 0 <= task[1] < counts[i]:
            return None
        return i * stride + task[1]

    # Kafka's orders: by (partition, subtopology) for the sticky passes, (subtopology, partition)
    # (the ints' order) for the range-like ones.
    by_partition = [i * stride + p for p in range(stride) for i in range(len(sub_ids)) if p < counts[i]]
    stateful_ids = [i for i, s in enumerate(sub_ids) if subtopologies[s].stateful]
    stateful_by_partition = [i * stride + p for p in range(stride) for i in stateful_ids if p < counts[i]]
    total = len(by_partition) + len(stateful_by_partition) * num_standby_replicas
    bases = {s: (i * stride, counts[i]) for i, s in enumerate(sub_ids)}
    state = _State(members, task_id, bases, len(by_partition), total, num_standby_replicas)
    _assign_active(state, by_partition)
    if num_standby_replicas > 0:
        stateful_by_partition.reverse()
        _assign_standby(state, stateful_by_partition)
    name_of: list[Task] = [("", 0)] * (len(sub_ids) * stride)
    for i, (s, n) in enumerate(zip(sub_ids, counts, strict=True)):
        for p in range(n):
            name_of[i * stride + p] = (s, p)
    result: dict[str, TasksTuple] = {}
    for member_id in members:
        process = state.process_of[member_id]
        result[member_id] = TasksTuple(frozenset([name_of[t] for t in process.active[member_id]]),
                                       frozenset([name_of[t] for t in process.standby[member_id]]))
    return result


def _process_heap(state: _State) -> list[tuple[float, int, str, _Process]]:
    heap = [_process_key(p) for p in state.processes.values()]
    heapq.heapify(heap)
    return heap


def _process_key(process: _Process) -> tuple[float, int, str, _Process]:
    """Least loaded first; among equally loaded processes (Kafka: any), the one whose least loaded
    member has the fewest tasks, so a process balanced on average but not within is evened out."""
    return process.load(), process.least_member_count(), process.pid, process


def _assign_active(state: _State, tasks: list[int]) -> None:
    """``tasks`` in (partition, subtopology) order."""
    rest: list[int] = []
    prev_active, process_of = state.prev_active, state.process_of
    for task in tasks:  # 1. back to the member that ran it
        member_id = prev_active.get(task)
        if member_id is not None:
            process = process_of[member_id]
            if process.counts[member_id] < state.active_quota:
                count = process.add(member_id, task, True)
                if count == state.active_quota or count == state.total_quota:
                    state.counted(count, True)
                continue
        rest.append(task)
    remaining: list[int] = []
    for task in rest:  # 2. to a member that holds its state
        member_id = state.least_loaded_previous(state.prev_standby.get(task), None)
        if member_id is not None:
            process = process_of[member_id]
            if process.counts[member_id] < state.active_quota:
                state.counted(process.add(member_id, task, True), True)
                continue
        remaining.append(task)
    remaining.sort()
    heap = _process_heap(state)
    for task in remaining:  # 3. range-like over the least loaded processes
        process = heap[0][3]
        count = process.add_to_least_loaded(task, True)
        if count == state.active_quota or count == state.total_quota:
            state.counted(count, True)
        heapq.heapreplace(heap, _process_key(process))


def _assign_standby(state: _State, tasks: list[int]) -> None:
    """``tasks``: the stateful ones in reversed (partition, subtopology) order."""
    to_least_loaded: list[tuple[int, int]] = []
    for task in tasks:
        for placed in range(state.standbys):
            member_id = state.prev_active.get(task)
            if member_id is not None:
                process = state.process_of[member_id]
                if task not in process.tasks and process.counts[member_id] < state.total_quota:
                    state.counted(process.add(member_id, task, False), False)
                    continue
            member_id = state.least_loaded_previous(state.prev_standby.get(task), task)
            if member_id is not None:
                process = state.process_of[member_id]
                if process.counts[member_id] < state.total_quota:
                    state.counted(process.add(member_id, task, False), False)
                    continue
            to_least_loaded.append((task, state.standbys - placed))
            break
    to_least_loaded.sort(reverse=True)
    heap = _process_heap(state)
    for task, remaining in to_least_loaded:
        for _ in range(remaining):
            if not _standby_to_least_loaded(state, heap, task):
                break  # not enough processes without this task: Kafka logs it and goes on


def _standby_to_least_loaded(state: _State, heap: list[tuple[float, int, str, _Process]], task: int) -> bool:
    popped: list[_Process] = []
    found = False
    while heap:
        process = heapq.heappop(heap)[3]
        popped.append(process)
        if task not in process.tasks:
            state.counted(process.add_to_least_loaded(task, False), False)
            found = True
            break
    for process in popped:
        heapq.heappush(heap, _process_key(process))
    return found


def refine(members: Mapping[str, WarmupMember], target: Mapping[str, TasksTuple], stateful: Iterable[str],
           config: WarmupConfig) -> dict[str, TasksTuple]:
    """The assignment members reconcile toward: the target, with stateful moves to members that are
    not caught up held back on their owner and warmed up within the budget. See the module doc."""
    if config.num_warmup_replicas <= 0:
        return {m: TasksTuple(t.active, t.standby) for m, t in target.items()}
    stateful_ids = frozenset(stateful)
    owner: dict[Task, str] = {}
    for member_id in sorted(members, reverse=True):  # a task reported twice: the lowest id counts
        for task in members[member_id].current.active:
            owner[task] = member_id
    ends = group_end_offsets(members.values())
    held: list[tuple[int, Task, str, str]] = []
    for newcomer in sorted(target):
        incoming = members.get(newcomer)
        if incoming is None or not incoming.offsets.reported:
            continue
        for task in target[newcomer].active:
            current = owner.get(task)
            if current is None or current == newcomer or current not in target or task[0] not in stateful_ids:
                continue
            if members[current].process_id == incoming.process_id:
                continue
            task_lag = lag(incoming, task, ends)
            if task_lag is not None and task_lag <= config.acceptable_recovery_lag:
                continue  # caught up: promoted now
            held.append((0 if task in incoming.current.warmup else 1, task, newcomer, current))
    if not held:
        return {m: TasksTuple(t.active, t.standby) for m, t in target.items()}
    active = {m: set(t.active) for m, t in target.items()}
    standby = {m: set(t.standby) for m, t in target.items()}
    warmup: dict[str, set[Task]] = {}
    process_members: dict[str, list[str]] = {}
    for member_id in target:
        if member_id in members:
            process_members.setdefault(members[member_id].process_id, []).append(member_id)
    budget = config.num_warmup_replicas
    for _, task, newcomer, current in sorted(held):
        active[newcomer].discard(task)
        active[current].add(task)
        for member_id in process_members[members[current].process_id]:
            standby[member_id].discard(task)
        if budget > 0:
            warmup.setdefault(newcomer, set()).add(task)
            budget -= 1
    return {m: TasksTuple(frozenset(active[m]), frozenset(standby[m]), frozenset(warmup.get(m, NO_TASKS)))
            for m in target}
