"""The sticky task assignor's active pass (`core/streams/assignor.py` says how, as Kafka does it):
each active task back to its previous owner, then to a member with its state on disk, the rest
range-like to the least loaded processes."""

from __future__ import annotations

import heapq

from .assignor_state import AssignmentState, TaskTable


def assign_active(state: AssignmentState, tasks: TaskTable) -> None:
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


def _range_like_one_member_each(state: AssignmentState, remaining: list[int],
                                quotas: tuple[int, int, int, int, int, int]) -> tuple[int, int, int, int, int, int]:
    """Step 3 of ``assign_active`` where every process has one member (Kafka Streams' default of
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

