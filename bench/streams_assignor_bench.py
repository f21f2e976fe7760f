"""Time the streams task assignor (and the warm-up step) at Kafka's JMH scale and print the numbers.

Kafka's ``StreamsStickyAssignorBenchmark`` at 1,000 members: 100 subtopologies x 100 partitions
(10,000 active tasks), every other subtopology stateful, one standby replica (5,000 standby
tasks); members one per process or 50 per process; "full" (no previous assignment) and
"incremental" (the full result as each member's current tasks, plus one new member in a process of
its own); task offsets none, or "owned and dormant" (each stateful task reported by the member
round-robin "owning" it and, with a lower offset sum, by the next member: Kafka's
``createTaskOffsets`` with one dormant replica). Kafka reports 0.12-2.6 ms for these (JMH,
average time, one thread).

Also timed: ``warmup.refine`` (the warm-up step a coordinator runs whenever members report offsets)
after a scale-out by 100 members in processes of their own (every member reports offsets, the new
ones are caught up on nothing, so every stateful move is held back and the budget of 2 warm-ups
decides). The one-new-member incremental case moves only stateless tasks in this layout.

Printed per scenario: the best and the median of ``--repeat`` runs of ``assign`` alone, in CPU time
of this process (the inputs are built beforehand), and how many active tasks changed owner against the previous assignment.

Run: ``.venv/bin/python bench/streams_assignor_bench.py [--repeat N] [--members N]``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from functools import partial

from coordinator.core.streams.assignor import AssignorMember, SubtopologySpec, assign
from coordinator.core.streams.tasks import Task, TasksTuple
from coordinator.core.streams.warmup import MemberTaskOffsets, WarmupConfig, WarmupMember, refine

SUBTOPOLOGIES = 100
PARTITIONS = 100
STANDBYS = 1


def subtopologies() -> dict[str, SubtopologySpec]:
    return {f"topic-{i:03d}_subtopology": SubtopologySpec(PARTITIONS, i % 2 == 0) for i in range(SUBTOPOLOGIES)}


def owned_and_dormant(member_ids: list[str], subs: dict[str, SubtopologySpec]) -> dict[str, dict[Task, int]]:
    offsets: dict[str, dict[Task, int]] = {m: {} for m in member_ids}
    index = 0
    for sub in sorted(subs):
        if not subs[sub].stateful:
            continue
        for partition in range(subs[sub].number_of_tasks):
            for replica in (0, 1):
                offsets[member_ids[(index + replica) % len(member_ids)]][(sub, partition)] = (2 - replica) * 1_000_000 + index
            index += 1
    return offsets


def timed(fn: Callable[[], object], repeat: int) -> tuple[float, float]:
    runs = []
    for _ in range(repeat):
        start = time.process_time()  # CPU time: the machine may be shared, wall time would count others
        fn()
        runs.append((time.process_time() - start) * 1000)
    return min(runs), statistics.median(runs)


def moved(before: dict[str, TasksTuple], after: dict[str, TasksTuple]) -> int:
    return sum(len(after[m].active - before.get(m, TasksTuple()).active) for m in after)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--members", type=int, default=1000)
    args = parser.parse_args()
    subs = subtopologies()
    total_active = sum(s.number_of_tasks for s in subs.values())
    total_standby = sum(s.number_of_tasks for s in subs.values() if s.stateful) * STANDBYS
    print(f"{args.members} members, {total_active} active + {total_standby} standby tasks, best / median of "
          f"{args.repeat} runs")
    for per_process in (1, 50):
        for reported in ("none", "owned+dormant"):
            n = args.members
            ids = [f"member-{i:04d}" for i in range(n)]
            offsets = owned_and_dormant(ids, subs) if reported != "none" else {m: {} for m in ids}
            full = {m: AssignorMember(f"process-{i // per_process}", task_offsets=offsets[m]) for i, m in enumerate(ids)}
            best, median = timed(partial(assign, full, subs, STANDBYS), args.repeat)
            print(f"  full        {per_process:>2}/process offsets={reported:<13} {best:7.1f} / {median:7.1f} ms")
            # Incremental: n - 1 members hold the full result of n - 1, a new member joins.
            ids = ids[:-1]
            offsets = owned_and_dormant(ids, subs) if reported != "none" else {m: {} for m in ids}
            setup = {m: AssignorMember(f"process-{i // per_process}") for i, m in enumerate(ids)}
            previous = assign(setup, subs, STANDBYS)
            members = {m: AssignorMember(setup[m].process_id, previous[m].active, previous[m].standby, offsets[m])
                       for m in ids}
            members["newMember"] = AssignorMember("process-newMember")
            result = assign(members, subs, STANDBYS)
            best, median = timed(partial(assign, members, subs, STANDBYS), args.repeat)
            print(f"  incremental {per_process:>2}/process offsets={reported:<13} {best:7.1f} / {median:7.1f} ms"
                  f"   ({moved(previous, result)} active tasks move)")
            if reported == "owned+dormant":
                grown = dict(members)
                for j in range(100):
                    grown[f"new-{j:03d}"] = AssignorMember(f"process-new-{j:03d}")
                target = assign(grown, subs, STANDBYS)
                warm = {m: WarmupMember(grown[m].process_id, previous.get(m, TasksTuple()),
                                        MemberTaskOffsets(dict(grown[m].task_offsets), {}, True)) for m in grown}
                stateful = [s for s, spec in subs.items() if spec.stateful]
                config = WarmupConfig(2, 10000)
                refined = refine(warm, target, stateful, config)
                held = sum(len(refined[m].active - target[m].active) for m in refined)
                warmups = sum(len(t.warmup) for t in refined.values())
                best, median = timed(partial(refine, warm, target, stateful, config), args.repeat)
                print(f"  warm-up step, +100 members                      {best:7.1f} / {median:7.1f} ms"
                      f"   ({moved(previous, target)} moves, {held} held back, {warmups} warm-ups)")

if __name__ == "__main__":
    main()
