"""Time the streams task assignor (and the warm-up step) at Kafka's JMH scale and print the numbers.

Kafka's ``StreamsStickyAssignorBenchmark`` at 1,000 members: 100 subtopologies x 100 partitions
(10,000 active tasks), every other subtopology stateful, one standby replica (5,000 standby
tasks); members one per process or 50 per process; "full" (no previous assignment) and
"incremental" (the full result as each member's current tasks, plus one new member in a process of
its own); task offsets none, or "owned and dormant" (each stateful task reported by the member
round-robin "owning" it and, with a lower offset sum, by the next member: Kafka's
``createTaskOffsets`` with one dormant replica). Kafka's published JMH figures for 1,000 members,
full, one member per process, no offsets: 0.12 ms and 2.39 ms (the smallest and, presumably, this
largest shape of its matrix; KAFKA-21060's review, another machine).

Also timed: ``warmup.refine`` (the warm-up step a coordinator runs whenever members report offsets)
after a scale-out by 100 members in processes of their own (every member reports offsets, the new
ones are caught up on nothing, so every stateful move is held back and the budget of 2 warm-ups
decides). The one-new-member incremental case moves only stateless tasks in this layout.

Printed per scenario: the best and the median of ``--repeat`` runs of ``assign`` alone, in CPU time
of this process (the inputs are built beforehand; the machine may be shared, wall time would count
the others), and how many active tasks changed owner against the previous assignment. With
``--before``, the code before the speed work (``tests/core/streams/oracle.py``, which the test suite
holds equal to the current code) is timed on the same inputs, runs alternating with the current
ones (ABBA), and the ratio is printed.

Run: ``.venv/bin/python bench/streams_assignor_bench.py [--repeat N] [--members N] [--before]``;
``bench/run`` includes it in its ``assignor`` section.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from coordinator.core.streams.assignor import AssignorMember, SubtopologySpec, assign
from coordinator.core.streams.tasks import Task, TasksTuple
from coordinator.core.streams.warmup import (
    MemberTaskOffsets,
    WarmupConfig,
    WarmupMember,
    refine,
)

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


def moved(before: dict[str, TasksTuple], after: dict[str, TasksTuple]) -> int:
    return sum(len(after[m].active - before.get(m, TasksTuple()).active) for m in after)


@dataclass
class Scenario:
    label: str
    run: Callable[[], object]
    """The current code on this scenario's inputs."""
    before: Callable[[], object]
    """The code before the speed work on the same inputs."""
    note: str = ""


def scenarios(n: int) -> Iterator[Scenario]:
    """Kafka's shapes at n members (inputs built here, outside the timing)."""
    from tests.core.streams import oracle

    subs = subtopologies()
    for per_process in (1, 50):
        for reported in ("none", "owned+dormant"):
            ids = [f"member-{i:04d}" for i in range(n)]
            offsets = owned_and_dormant(ids, subs) if reported != "none" else {m: {} for m in ids}
            full = {m: AssignorMember(f"process-{i // per_process}", task_offsets=offsets[m]) for i, m in enumerate(ids)}
            shape = f"{per_process:>2}/process offsets={reported:<13}"
            yield Scenario(f"full        {shape}", partial(assign, full, subs, STANDBYS),
                           partial(oracle.assign, full, subs, STANDBYS))
            # Incremental: n - 1 members hold the full result of n - 1, a new member joins.
            ids = ids[:-1]
            offsets = owned_and_dormant(ids, subs) if reported != "none" else {m: {} for m in ids}
            setup = {m: AssignorMember(f"process-{i // per_process}") for i, m in enumerate(ids)}
            previous = assign(setup, subs, STANDBYS)
            members = {m: AssignorMember(setup[m].process_id, previous[m].active, previous[m].standby, offsets[m])
                       for m in ids}
            members["newMember"] = AssignorMember("process-newMember")
            result = assign(members, subs, STANDBYS)
            yield Scenario(f"incremental {shape}", partial(assign, members, subs, STANDBYS),
                           partial(oracle.assign, members, subs, STANDBYS), f"{moved(previous, result)} active tasks move")
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
                yield Scenario(f"warm-up step, {per_process:>2}/process, +100 members  ",
                               partial(refine, warm, target, stateful, config),
                               partial(oracle.refine, warm, target, stateful, config),
                               f"{moved(previous, target)} moves, {held} held back, {warmups} warm-ups")


@dataclass
class Measured:
    label: str
    best_ms: float
    median_ms: float
    before_best_ms: float | None
    before_median_ms: float | None
    note: str


def cpu_ms(fn: Callable[[], object]) -> float:
    start = time.process_time()  # CPU time: the machine may be shared, wall time would count others
    fn()
    return (time.process_time() - start) * 1000


def measure(scenario: Scenario, repeat: int, before: bool) -> Measured:
    runs: list[float] = []
    old: list[float] = []
    for r in range(repeat):
        if before and r % 2 == 1:  # ABBA: neither side always runs first
            old.append(cpu_ms(scenario.before))
        runs.append(cpu_ms(scenario.run))
        if before and r % 2 == 0:
            old.append(cpu_ms(scenario.before))
    return Measured(scenario.label, min(runs), statistics.median(runs), min(old) if old else None,
                    statistics.median(old) if old else None, scenario.note)


def run(n: int, repeat: int, before: bool) -> Iterator[Measured]:
    for scenario in scenarios(n):
        yield measure(scenario, repeat, before)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--members", type=int, default=1000)
    parser.add_argument("--before", action="store_true", help="also time the code before the speed work, alternating")
    args = parser.parse_args()
    subs = subtopologies()
    total_active = sum(s.number_of_tasks for s in subs.values())
    total_standby = sum(s.number_of_tasks for s in subs.values() if s.stateful) * STANDBYS
    print(f"{args.members} members, {total_active} active + {total_standby} standby tasks, best / median of "
          f"{args.repeat} runs, CPU ms; load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    for m in run(args.members, args.repeat, args.before):
        line = f"  {m.label} {m.best_ms:7.1f} / {m.median_ms:7.1f} ms"
        if m.before_best_ms is not None and m.before_median_ms is not None:
            line += (f"   before {m.before_best_ms:7.1f} / {m.before_median_ms:7.1f} ms"
                     f" ({m.before_median_ms / m.median_ms:.1f}x)")
        print(line + (f"   ({m.note})" if m.note else ""), flush=True)
    print(f"  load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
