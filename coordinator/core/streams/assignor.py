"""Kafka's sticky task assignor for streams groups (``StickyTaskAssignor``, name ``sticky``),
deterministic.

Input: the members (process id, the tasks each holds now, the task offsets it reported), the
subtopologies (number of tasks, stateful or not) and ``num.standby.replicas``. Output: each
member's active and standby tasks; the assignor never places warm-ups (``warmup.py`` does).

How, as Kafka does it:

- Quotas: ``ceil(active tasks / members)`` active tasks per member and ``ceil((active + stateful x
  standby replicas) / members)`` tasks per member; when a member reaches a quota it leaves the
  divisor and the quota is recomputed, so the remainder spreads evenly.
- Active tasks (sorted by partition, then subtopology): back to the member that holds it, if below
  the active quota; then to the least loaded of the members that hold it as a standby (or, Apache
  trunk's KAFKA-20719, reported offsets for it: the state is on their disk), if below the quota;
  the rest (sorted by subtopology, then partition: range-like) to the least loaded member of the
  least loaded process.
- Standby tasks of stateful subtopologies, ``num.standby.replicas`` of each: to the previous active
  owner, then to previous standby holders, if their process does not hold the task and they are
  below the total quota; the rest to the least loaded process that does not hold the task
  (KAFKA-20899: every process is tried). A process never holds a task twice; a standby that finds
  no such process is not placed (Kafka logs that capacity is missing).

Kafka breaks ties by hash-map and heap order; here every tie is broken by process id and member
id, so the same input always gives the same assignment (a new coordinator after a failover
computes what the old one would have).

How it is fast enough (Kafka's benchmark shapes, 1,000 members and 15,000 tasks, are timed by
``bench/streams_assignor_bench.py``; BENCHMARKS.md has the numbers): tasks, members and processes
are list indexes (ids sorted, so comparing indexes breaks ties as comparing ids would), the task
table is built once per topology, the sticky passes keep the quotas in locals, and the range-like
passes serve processes level by level of load instead of through a heap of processes. The code
before this (tests/core/streams/oracle.py) is kept as the oracle: the tests hold the two equal
on every input.
"""

from __future__ import annotations

import functools
import heapq
import math
from bisect import insort
from collections.abc import Callable, Mapping
from itertools import repeat
from operator import itemgetter

import msgspec

from .tasks import NO_TASKS, Task, TasksTuple


class AssignorMember(msgspec.Struct, frozen=True):
    """What the assignor knows of a member (Kafka's ``MemberAssignmentState`` and metadata)."""

    process_id: str
    active: frozenset[Task] = NO_TASKS
    standby: frozenset[Task] = NO_TASKS
    task_offsets: Mapping[Task, int] = msgspec.field(default_factory=dict)
    """Changelog offset sums the member reported (v1 only); state it has on disk."""


class SubtopologySpec(msgspec.Struct, frozen=True):
    number_of_tasks: int
    stateful: bool


class AssignorError(Exception):
    """No member can take a task (an empty group): Kafka's ``TaskAssignorException``."""


def _per_member(tasks: int, members: int) -> int:
    return 0 if members == 0 else -(-tasks // members)


class _Tasks:
    """The topology's tasks as ints: ``subtopology index x stride + partition``, subtopologies in
    sorted order, so the ints' order is the (subtopology, partition) order and a task is hashed and
    compared as an int in the loops (a tuple's hash is recomputed at every lookup). Read-only once
    built: ``_tasks`` keeps the last few, a group's topology being the same at every assignment."""

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
def _tasks_of(shape: tuple[tuple[str, int, bool], ...]) -> _Tasks:
    return _Tasks(shape)


def _tasks(subtopologies: Mapping[str, SubtopologySpec]) -> _Tasks:
    return _tasks_of(tuple((s, subtopologies[s].number_of_tasks, subtopologies[s].stateful)
                           for s in sorted(subtopologies)))


class _Assignment:
    """Kafka's ``LocalState`` and ``ProcessState``s, as flat lists indexed by ints: member ``i`` is
    the i-th member id in sorted order, process ``p`` the p-th process id in sorted order, so
    comparing indexes breaks ties as comparing the ids would (what the module doc promises)."""

    def __init__(self, members: Mapping[str, AssignorMember], tasks: _Tasks, standbys: int) -> None:
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

    def results(self, members: Mapping[str, AssignorMember], tasks: _Tasks) -> dict[str, TasksTuple]:
        name = tasks.names.__getitem__
        index = {m: i for i, m in enumerate(self.member_ids)}
        result: dict[str, TasksTuple] = {}
        for member_id in members:
            i = index[member_id]
            active, standby = self.active[i], self.standby[i]
            result[member_id] = TasksTuple(frozenset(map(name, active)) if active else NO_TASKS,
                                           frozenset(map(name, standby)) if standby else NO_TASKS)
        return result


def assign(members: Mapping[str, AssignorMember], subtopologies: Mapping[str, SubtopologySpec],
           num_standby_replicas: int) -> dict[str, TasksTuple]:
    """The target assignment: member id -> its active and standby tasks. Tasks of subtopologies or
    partitions the topology does not have are ignored."""
    if not members:
        if any(s.number_of_tasks for s in subtopologies.values()):
            raise AssignorError("No process available to assign active tasks.")
        return {}
    tasks = _tasks(subtopologies)
    state = _Assignment(members, tasks, num_standby_replicas)
    _assign_active(state, tasks)
    if num_standby_replicas > 0:
        _assign_standby(state, tasks.stateful_by_partition[::-1])
    return state.results(members, tasks)


def _assign_active(state: _Assignment, tasks: _Tasks) -> None:
    """Tasks in (partition, subtopology) order. The loops keep the state in locals and inline
    Kafka's quota updates (``maybeUpdateActiveTasksPerMember`` / ``maybeUpdateTotalTasksPerMember``:
    a member reaching a quota leaves its divisor)."""
    member_count, process_count, process_of = state.member_count, state.process_count, state.process_of
    active, owner, member_heap = state.active, state.owner, state.member_heap
    aq, am, ta = state.active_quota, state.active_members, state.total_active
    tq, tm, tt = state.total_quota, state.total_members, state.total
    rest = tasks.by_partition
    if state.prev_active:  # 1. back to the member that ran it
        rest = []
        previous = state.prev_active.get
        for t in tasks.by_partition:
            i = previous(t)
            if i is not None:
                count = member_count[i]
                if count < aq:
                    count += 1
                    member_count[i] = count
                    active[i].append(t)
                    owner[t] = process_of[i]
                    if count == aq:
                        am -= 1
                        ta -= count
                        aq = -(-ta // am) if am else 0
                    if count == tq:
                        tm -= 1
                        tt -= count
                        tq = -(-tt // tm) if tm else 0
                    continue
            rest.append(t)
        for i, count in enumerate(member_count):  # nothing was given before: the processes' counts
            if count:
                process_count[process_of[i]] += count
    remaining = rest
    if state.prev_standby:  # 2. to a member that holds its state
        remaining = []
        candidates_of = state.prev_standby.get
        least_loaded_previous = state.least_loaded_previous()
        for t in rest:
            candidates = candidates_of(t)
            if candidates is not None:
                i = candidates[0][2] if len(candidates) == 1 else least_loaded_previous(candidates, -1)
                count = member_count[i]
                if count < aq:
                    count += 1
                    member_count[i] = count
                    p = process_of[i]
                    process_count[p] += 1
                    member_heap[p] = None
                    active[i].append(t)
                    owner[t] = p
                    if count == aq:
                        am -= 1
                        ta -= count
                        aq = -(-ta // am) if am else 0
                    if count == tq:
                        tm -= 1
                        tt -= count
                        tq = -(-tt // tm) if tm else 0
                    continue
            remaining.append(t)
    remaining = tasks.ordered if remaining is tasks.by_partition else sorted(remaining)
    if remaining and state.processes == len(member_count):  # 3. (one member per process)
        aq, am, ta, tq, tm, tt = _range_like_one_member_each(state, remaining, (aq, am, ta, tq, tm, tt))
    elif remaining:  # 3. range-like over the least loaded processes
        levels, level_heap = state.process_levels()
        scale, processes = state.scale, state.processes
        single, heaps, members, replace = state.single, state.member_heap, len(member_count), heapq.heapreplace
        bucket: list[int] = []
        level = served = 0
        for t in remaining:
            while served == len(bucket):
                level = heapq.heappop(level_heap)
                bucket = levels.pop(level)
                bucket.sort()
                served = 0
            p = bucket[served] % processes
            served += 1
            i = single[p]
            if i >= 0:
                least = count = member_count[i] + 1
                member_count[i] = count
            else:
                ranked = heaps[p] or state.member_heap_of(p)
                i = ranked[0] % members
                count = member_count[i] + 1
                member_count[i] = count
                replace(ranked, count * members + i)
                least = ranked[0] // members
            process_count[p] += 1
            active[i].append(t)
            owner[t] = p
            if count == tq:  # (the active quota is not read after this last active pass)
                tm -= 1
                tt -= count
                tq = -(-tt // tm) if tm else 0
            up = level + scale[p]
            found = levels.get(up)
            if found is None:
                levels[up] = [least * processes + p]
                heapq.heappush(level_heap, up)
            else:
                found.append(least * processes + p)
    state.active_quota, state.active_members, state.total_active = aq, am, ta
    state.total_quota, state.total_members, state.total = tq, tm, tt


def _range_like_one_member_each(state: _Assignment, remaining: list[int],
                                quotas: tuple[int, int, int, int, int, int]) -> tuple[int, int, int, int, int, int]:
    """Step 3 of ``_assign_active`` where every process has one member (Kafka Streams' default of
    one stream thread per instance, and the benchmark's first shape): a process's level is its
    member's count, so a whole level is served at once, its processes in order, each given the
    next task and all moving up one level together. Returns the quotas as updated task by task
    (the active quota is not read after this last active pass: only the total quota is kept)."""
    aq, am, ta, tq, tm, tt = quotas
    levels, level_heap = state.process_levels()
    processes, single = state.processes, state.single
    member_count, process_count, active, owner = state.member_count, state.process_count, state.active, state.owner
    done = 0
    while done < len(remaining):
        level = heapq.heappop(level_heap)
        bucket = levels.pop(level)
        bucket.sort()  # level x processes + p: by process
        served = [sub - level * processes for sub in bucket[:len(remaining) - done]]
        count = level + 1
        for p, t in zip(served, remaining[done:done + len(served)], strict=True):
            i = single[p]
            member_count[i] = count
            process_count[p] = count
            active[i].append(t)
            owner[t] = p
        done += len(served)
        for _ in served:  # Kafka's total quota updates, one per task given, all at this count
            if count != tq:
                break  # it changes only when a count meets it: nothing more at this count
            tm -= 1
            tt -= count
            tq = -(-tt // tm) if tm else 0
        if count in levels:
            levels[count].extend([count * processes + p for p in served])
        else:
            levels[count] = [count * processes + p for p in served]
            heapq.heappush(level_heap, count)
    return aq, am, ta, tq, tm, tt


def _assign_standby(state: _Assignment, tasks: list[int]) -> None:
    """``tasks``: the stateful ones in reversed (partition, subtopology) order."""
    member_count, process_count, process_of = state.member_count, state.process_count, state.process_of
    standby, owner, held, member_heap = state.standby, state.owner, state.standby_held, state.member_heap
    processes, replicas = state.processes, state.standbys
    tq, tm, tt = state.total_quota, state.total_members, state.total
    to_least_loaded: list[int]
    """Tasks, highest first, each as many times as it has standbys left to place."""
    if not state.prev_active and not state.prev_standby:
        to_least_loaded = sorted(tasks, reverse=True)
        if replicas > 1:
            to_least_loaded = [t for t in to_least_loaded for _ in range(replicas)]
    else:
        unplaced: list[tuple[int, int]] = []
        previous, candidates_of = state.prev_active.get, state.prev_standby.get
        least_loaded_previous = state.least_loaded_previous()
        for t in tasks:
            placed = 0
            while placed < replicas:
                placed += 1
                i = previous(t)
                if i is not None:
                    p = process_of[i]
                    if (owner[t] == p or t * processes + p in held) or member_count[i] >= tq:
                        i = None
                if i is None:
                    candidates = candidates_of(t)
                    if candidates is None:
                        pass
                    elif len(candidates) == 1:  # mostly: its previous standby, inline
                        i = candidates[0][2]
                        p = process_of[i]
                        if (owner[t] == p or t * processes + p in held) or member_count[i] >= tq:
                            i = None
                    else:
                        i = least_loaded_previous(candidates, t)
                        if i < 0 or member_count[i] >= tq:
                            i = None
                if i is None:
                    unplaced.append((t, replicas - placed + 1))
                    break
                count = member_count[i] + 1
                member_count[i] = count
                p = process_of[i]
                process_count[p] += 1
                member_heap[p] = None
                standby[i].append(t)
                held.add(t * processes + p)
                if count == tq:
                    tm -= 1
                    tt -= count
                    tq = -(-tt // tm) if tm else 0
        unplaced.sort(key=itemgetter(0), reverse=True)  # a task is there once
        to_least_loaded = [t for t, left in unplaced for _ in range(left)]
    if to_least_loaded and processes == len(member_count):
        _standby_one_member_each(state, to_least_loaded)
    elif to_least_loaded:
        # The least loaded process that does not hold the task (KAFKA-20899: every one is tried),
        # in the order of ``process_levels``; the ones passed over keep their place.
        levels, level_heap = state.process_levels()
        scale = state.scale
        single, heaps, members, replace = state.single, state.member_heap, len(member_count), heapq.heapreplace
        bucket: list[int] = []
        level = served = 0
        failed = -1
        for t in to_least_loaded:
            if t == failed:
                continue  # not enough processes without this task: Kafka logs it and goes on
            while served == len(bucket):
                level = heapq.heappop(level_heap)
                bucket = levels.pop(level, [])  # [] where the level was emptied (_first_without)
                bucket.sort()
                served = 0
            p = bucket[served] % processes
            at = level
            if owner[t] == p or t * processes + p in held:
                nxt = served + 1  # mostly the next process of the level does not hold it
                q = bucket[nxt] % processes if nxt < len(bucket) else -1
                if q >= 0 and owner[t] != q and t * processes + q not in held:
                    del bucket[nxt]
                    p = q
                else:
                    p, at = _first_without(t, bucket, served + 1, level, levels, owner, held, processes)
                    if p < 0:
                        failed = t
                        continue
            else:
                served += 1
            i = single[p]
            if i >= 0:
                least = count = member_count[i] + 1
                member_count[i] = count
            else:
                ranked = heaps[p] or state.member_heap_of(p)
                i = ranked[0] % members
                count = member_count[i] + 1
                member_count[i] = count
                replace(ranked, count * members + i)
                least = ranked[0] // members
            process_count[p] += 1
            standby[i].append(t)
            held.add(t * processes + p)
            # (Kafka updates the quotas here too; nothing reads them after this last pass.)
            up = at + scale[p]
            found = levels.get(up)
            if found is None:
                levels[up] = [least * processes + p]
                heapq.heappush(level_heap, up)
            else:
                found.append(least * processes + p)
    state.total_quota, state.total_members, state.total = tq, tm, tt


def _standby_one_member_each(state: _Assignment, tasks: list[int]) -> None:
    """The least-loaded standby placement where every process has one member: a process's level is
    its member's count, so the processes served from a level all move up one, appended together
    when the level is done (or before a search past the level, which must see them there)."""
    levels, level_heap = state.process_levels()
    processes, single, member_count, process_count = state.processes, state.single, state.member_count, state.process_count
    standby, owner, held = state.standby, state.owner, state.standby_held
    bucket: list[int] = []
    up: list[int] = []
    level = served = 0
    failed = -1
    for t in tasks:
        if t == failed:
            continue  # not enough processes without this task: Kafka logs it and goes on
        while served == len(bucket):
            if up:
                _up_to(levels, level_heap, level + 1, up, processes)
                up = []
            level = heapq.heappop(level_heap)
            bucket = levels.pop(level, [])  # [] where the level was emptied (_first_without)
            bucket.sort()
            served = 0
        p = bucket[served] - level * processes
        if owner[t] == p or t * processes + p in held:
            nxt = served + 1  # mostly the next process of the level does not hold it
            q = bucket[nxt] - level * processes if nxt < len(bucket) else -1
            if q >= 0 and owner[t] != q and t * processes + q not in held:
                del bucket[nxt]
                p = q
            else:
                if up:
                    _up_to(levels, level_heap, level + 1, up, processes)
                    up = []
                p, at = _first_without(t, bucket, served + 1, level, levels, owner, held, processes)
                if p < 0:
                    failed = t
                    continue
                if at != level:  # from a level above: it moves up from there
                    i = single[p]
                    member_count[i] = process_count[p] = at + 1
                    standby[i].append(t)
                    held.add(t * processes + p)
                    _up_to(levels, level_heap, at + 1, [p], processes)
                    continue
        else:
            served += 1
        i = single[p]
        member_count[i] = process_count[p] = level + 1
        standby[i].append(t)
        held.add(t * processes + p)
        up.append(p)


def _up_to(levels: dict[int, list[int]], level_heap: list[int], level: int, served: list[int],
           processes: int) -> None:
    """One-member processes served onto ``level`` (its count): their entries there."""
    subs = [level * processes + p for p in served]
    found = levels.get(level)
    if found is None:
        levels[level] = subs
        heapq.heappush(level_heap, level)
    else:
        found.extend(subs)


def _first_without(t: int, bucket: list[int], start: int, level: int, levels: dict[int, list[int]],
                   owner: list[int], held: set[int], processes: int) -> tuple[int, int]:
    """The first process in level order that does not hold task t, taken out of its level: the rest
    of the level being served from ``start``, then the levels waiting above, lowest first (a level
    left empty leaves ``levels``; its entry in the heap of levels then finds nothing). (process, its
    level), or (-1, -1) when every process holds the task.

    Sorting the waiting levels costs little where this path is frequent: it is taken when the
    least loaded process holds the task, often only with few processes, which have few distinct
    levels. (Walking the heap of levels instead visits the entries emptied here, which pile up
    when the process that holds the tasks stays least loaded: two processes, one with every active
    task, were 400 times slower.)"""
    for j in range(start, len(bucket)):
        p = bucket[j] % processes
        if owner[t] != p and t * processes + p not in held:
            del bucket[j]
            return p, level
    for above in sorted(levels):
        waiting = levels[above]
        waiting.sort()
        for j, sub in enumerate(waiting):
            p = sub % processes
            if owner[t] != p and t * processes + p not in held:
                del waiting[j]
                if not waiting:
                    del levels[above]
                return p, above
    return -1, -1
