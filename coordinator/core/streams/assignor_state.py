"""The sticky task assignor's working state (`core/streams/assignor.py` is the assignor): the
topology's tasks as ints (`TaskTable`, built once per topology) and Kafka's ``LocalState`` and
``ProcessState``s as flat lists indexed by ints (`AssignmentState`), which the active and standby
passes (`assignor_active.py`, `assignor_standby.py`) fill in."""

from __future__ import annotations

import functools
import heapq
import math
from bisect import insort
from collections.abc import Callable, Mapping
from itertools import repeat
from typing import TYPE_CHECKING

from .tasks import NO_TASKS, Task, TasksTuple

if TYPE_CHECKING:
    from .assignor import AssignorMember, SubtopologySpec


def _per_member(tasks: int, members: int) -> int:
    return 0 if members == 0 else -(-tasks // members)


class TaskTable:
    """The topology's tasks as ints: ``subtopology index x stride + partition``, subtopologies in
    sorted order, so the ints' order is the (subtopology, partition) order and a task is hashed and
    compared as an int in the loops (a tuple's hash is recomputed at every lookup). Read-only once
    built: ``task_table`` keeps the last few, a group's topology being the same at every assignment."""

    __slots__ = ("by_partition", "id_of", "names", "ordered", "stateful_by_partition")

    def __init__(self, shape: tuple[tuple[str, int, bool], ...]) -> None:
        sub_ids = [s for s, _, _ in shape]
        counts = [n for _, n, _ in shape]
        stride = max(counts, default=0) or 1
        placeholder: Task = ("", 0)
        self.names: list[Task] = [placeholder] * (len(sub_ids) * stride)
        """int -> (subtopology, partition); the placeholder where a subtopology has fewer tasks."""
        self.id_of: dict[Task, int] = {}
        """(subtopology, partition) -> int, for the tasks the topology has (members may name others)."""
        for i, (s, n) in enumerate(zip(sub_ids, counts, strict=True)):
            if n > 0:
                block = [(s, p) for p in range(n)]
                self.names[i * stride:i * stride + n] = block
                self.id_of.update(zip(block, range(i * stride, i * stride + n), strict=True))
        # Kafka's orders: by (partition, subtopology) for the sticky passes, (subtopology, partition)
        # (the ints' order) for the range-like ones.
        self.by_partition = [i * stride + p for p in range(stride) for i in range(len(sub_ids)) if p < counts[i]]
        stateful = [i for i, (_, _, s) in enumerate(shape) if s]
        self.stateful_by_partition = [i * stride + p for p in range(stride) for i in stateful if p < counts[i]]
        self.ordered = sorted(self.by_partition)


@functools.lru_cache(maxsize=16)
def _tasks_of(shape: tuple[tuple[str, int, bool], ...]) -> TaskTable:
    return TaskTable(shape)


def task_table(subtopologies: Mapping[str, SubtopologySpec]) -> TaskTable:
    return _tasks_of(tuple((s, subtopologies[s].number_of_tasks, subtopologies[s].stateful)
                           for s in sorted(subtopologies)))


class AssignmentState:
    """Kafka's ``LocalState`` and ``ProcessState``s, as flat lists indexed by ints: member ``i`` is
    the i-th member id in sorted order, process ``p`` the p-th process id in sorted order, so
    comparing indexes breaks ties as comparing the ids would (what the module doc promises)."""

    def __init__(self, members: Mapping[str, AssignorMember], tasks: TaskTable, standbys: int) -> None:
        self.member_ids = mids = sorted(members)
        n = len(mids)
        process_ids = sorted({members[m].process_id for m in mids})
        rank = {pid: p for p, pid in enumerate(process_ids)}
        self.process_of = [rank[members[m].process_id] for m in mids]
        self.processes = len(process_ids)
        self.process_members: list[list[int]] = [[] for _ in process_ids]
        for i, p in enumerate(self.process_of):
            self.process_members[p].append(i)
        self.capacity = [len(m) for m in self.process_members]
        self.single = [m[0] if len(m) == 1 else -1 for m in self.process_members]
        """Per process, its member when it has one (the loops give it the task inline), else -1."""
        self.member_count = [0] * n
        """Tasks (active and standby) each member was given so far."""
        self.process_count = [0] * len(process_ids)
        self.member_heap: list[list[int] | None] = [None] * len(process_ids)
        """Per process, its members as ``count x members + i`` (least loaded, then lowest id first);
        None when a sticky pass changed a count since it was built."""
        self.active: list[list[int]] = [[] for _ in mids]
        self.standby: list[list[int]] = [[] for _ in mids]
        self.owner = [-1] * len(tasks.names)
        """The process each task was given to as an active task."""
        self.standby_held: set[int] = set()
        """``task x processes + p`` for each standby given to process p."""
        self.standbys = standbys
        total_active = len(tasks.by_partition)
        total = total_active + len(tasks.stateful_by_partition) * standbys
        self.active_members, self.total_active, self.active_quota = n, total_active, _per_member(total_active, n)
        self.total_members, self.total, self.total_quota = n, total, _per_member(total, n)
        self.prev_active: dict[int | None, int] = {}
        """Task -> the member that reported it active (the highest id when two did)."""
        self.prev_standby: dict[int, list[tuple[int, int, int]]] = {}
        """Task -> (0 for a previous standby, 1 for reported offsets only; minus the offset sum;
        member), kept sorted: Kafka's candidate order (previous standbys first, then members
        that only reported offsets; most caught up first), ties by member id."""
        id_of = tasks.id_of.get
        for i, member_id in enumerate(mids):
            member = members[member_id]
            if member.active:
                self.prev_active.update(zip(map(id_of, member.active), repeat(i)))
            if member.standby or member.task_offsets:
                self._candidates(i, member, id_of)
        self.prev_active.pop(None, None)

    def _candidates(self, i: int, member: AssignorMember, id_of: Callable[[Task], int | None]) -> None:
        candidates = self.prev_standby
        get = candidates.get
        standby, offsets = member.standby, member.task_offsets
        reported = offsets.get if offsets else None
        for task in standby:
            t = id_of(task)
            if t is not None:
                entry = (0, -reported(task, 0) if reported else 0, i)
                found = get(t)
                if found is None:
                    candidates[t] = [entry]
                else:
                    insort(found, entry)
        if standby:
            for task, offset in offsets.items():
                if task not in standby:
                    t = id_of(task)
                    if t is not None:
                        entry = (1, -offset, i)
                        found = get(t)
                        if found is None:
                            candidates[t] = [entry]
                        else:
                            insort(found, entry)
        else:  # the common case, without the lookup in an empty set (a tuple is hashed each time)
            for task, offset in offsets.items():
                t = id_of(task)
                if t is not None:
                    entry = (1, -offset, i)
                    found = get(t)
                    if found is None:
                        candidates[t] = [entry]
                    else:
                        insort(found, entry)

    def least_loaded_previous(self) -> Callable[[list[tuple[int, int, int]], int], int]:
        """Kafka's ``findPrevMemberWithLeastLoad`` over a task's candidates: the first one, replaced
        only by one whose process and member are both less loaded (loads as Kafka compares them,
        doubles); for a standby (``standby_of`` >= 0), processes holding the task are skipped. -1
        when there is none. A closure over the state's lists: called once or twice per task."""
        process_of, process_count, capacity, member_count = (
            self.process_of, self.process_count, self.capacity, self.member_count)
        owner, held, processes = self.owner, self.standby_held, self.processes

        def least_loaded(candidates: list[tuple[int, int, int]], standby_of: int) -> int:
            if len(candidates) == 1:
                i = candidates[0][2]
                if standby_of >= 0:
                    p = process_of[i]
                    if owner[standby_of] == p or standby_of * processes + p in held:
                        return -1
                return i
            best, best_process, best_member = -1, 0.0, 0
            for _, _, i in candidates:
                p = process_of[i]
                if standby_of >= 0 and (owner[standby_of] == p or standby_of * processes + p in held):
                    continue
                if best < 0:
                    best, best_process, best_member = i, process_count[p] / capacity[p], member_count[i]
                elif member_count[i] < best_member:  # both loads must be lower: the int test first
                    process_load = process_count[p] / capacity[p]
                    if process_load < best_process:
                        best, best_process, best_member = i, process_load, member_count[i]
            return best

        return least_loaded

    def process_levels(self) -> tuple[dict[int, list[int]], list[int]]:
        """The processes in Kafka's heap order, as load levels: level -> the processes on it as
        ``least member count x processes + p``, and a heap of the levels.

        The order: least loaded first, then (Kafka: any order) the one whose least loaded member has
        the fewest tasks, so a process balanced on average but not within is evened out; then by
        process id. A load is compared exactly, as the level ``count x (lcm of capacities /
        capacity)``; Kafka and the code before compared ``count / capacity`` as doubles, which order
        the same while tasks x members^2 < 2^52, far beyond any group.

        Why levels and not a heap of processes: the range-like passes serve the least loaded process
        and only its load changes, upward, to a level above the one being served. So each level is
        complete when its turn comes, is sorted once (a C sort of ints) and served in order, and a
        served process is appended to its next level: no heap operation on a thousand processes per
        task, the same order."""
        lcm = math.lcm(*self.capacity)
        self.scale = scale = [lcm // c for c in self.capacity]
        counts, n, processes = self.member_count, len(self.member_ids), self.processes
        levels: dict[int, list[int]] = {}
        for p, members in enumerate(self.process_members):
            member_heap = self.member_heap[p]
            if member_heap is not None:
                least = member_heap[0] // n
            elif len(members) == 1:
                least = counts[members[0]]
            else:
                least = min([counts[i] for i in members])
            level = self.process_count[p] * scale[p]
            found = levels.get(level)
            if found is None:
                levels[level] = [least * processes + p]
            else:
                found.append(least * processes + p)
        heap = list(levels)
        heapq.heapify(heap)
        return levels, heap

    def member_heap_of(self, p: int) -> list[int]:
        """Process p's members as ``count x members + i``, least loaded (then lowest id) first,
        built anew (a sticky pass changed a count since the last one)."""
        n = len(self.member_ids)
        heap = self.member_heap[p] = [self.member_count[i] * n + i for i in self.process_members[p]]
        heapq.heapify(heap)
        return heap

    def results(self, members: Mapping[str, AssignorMember], tasks: TaskTable) -> dict[str, TasksTuple]:
        name = tasks.names.__getitem__
        index = {m: i for i, m in enumerate(self.member_ids)}
        result: dict[str, TasksTuple] = {}
        for member_id in members:
            i = index[member_id]
            active, standby = self.active[i], self.standby[i]
            result[member_id] = TasksTuple(frozenset(map(name, active)) if active else NO_TASKS,
                                           frozenset(map(name, standby)) if standby else NO_TASKS)
        return result
