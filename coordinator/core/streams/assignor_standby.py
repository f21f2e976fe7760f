"""The sticky task assignor's standby pass (`core/streams/assignor.py` says how, as Kafka does it):
``num.standby.replicas`` of each stateful task, to previous holders first, the rest to the least
loaded process that does not hold the task."""

from __future__ import annotations

import heapq
from operator import itemgetter

from .assignor_state import AssignmentState


def assign_standby(state: AssignmentState, tasks: list[int]) -> None:
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


def _standby_one_member_each(state: AssignmentState, tasks: list[int]) -> None:
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
