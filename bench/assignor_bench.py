"""Time the server-side assignors at Kafka's benchmark scale and print the numbers.

Scenarios (members x partitions), each for ``uniform`` and ``range``:

- 1,000 members x 100,000 partitions as 100 topics x 1,000 partitions and as 1 topic x 100,000,
  homogeneous (everyone subscribes to everything);
- 1,000 members x 100,000 partitions, heterogeneous: members are in 10 subscription groups;
  group g subscribes to the topics t with t % 10 in {g, g+1, g+2} (mod 10), so every topic has
  300 subscribers, every member 30 topics, and subscriptions overlap in a ring;
- 10 members x 1,000 partitions (10 topics x 100), homogeneous and heterogeneous (same ring);

each "full" (no current assignment) and "incremental" (the full result as current assignment,
plus one new member). Printed: the best of several runs of ``assign`` alone (building the
GroupSpec is timed separately), and the number of partitions that changed owner.

Run: ``.venv/bin/python bench/assignor_bench.py [--repeat N] [--profile SCENARIO]``.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time
from collections.abc import Callable
from dataclasses import dataclass
from uuid import UUID

from coordinator.core.assignors import (
    GroupAssignment,
    GroupSpec,
    MemberSubscriptionSpec,
    PartitionAssignor,
    RangeAssignor,
    SubscribedTopicMetadata,
    TopicMetadata,
    UniformAssignor,
)


@dataclass(frozen=True)
class Shape:
    label: str
    members: int
    topics: int
    partitions_per_topic: int
    heterogeneous: bool


SHAPES = [
    Shape("1000 members, 100 topics x 1000 partitions, homogeneous", 1000, 100, 1000, False),
    Shape("1000 members, 1 topic x 100000 partitions, homogeneous", 1000, 1, 100_000, False),
    Shape("1000 members, 100 topics x 1000 partitions, heterogeneous", 1000, 100, 1000, True),
    Shape("10 members, 10 topics x 100 partitions, homogeneous", 10, 10, 100, False),
    Shape("10 members, 10 topics x 100 partitions, heterogeneous", 10, 10, 100, True),
]


def topic_id(index: int) -> UUID:
    return UUID(int=(index + 1) * 0x9E3779B97F4A7C15 % (1 << 128))


def subscriptions(shape: Shape) -> list[frozenset[UUID]]:
    topics = [topic_id(t) for t in range(shape.topics)]
    if not shape.heterogeneous:
        everything = frozenset(topics)
        return [everything] * shape.members
    groups = [
        frozenset(topics[t] for t in range(shape.topics) if (t - g) % 10 in (0, 1, 2))
        for g in range(10)
    ]
    return [groups[m % 10] for m in range(shape.members)]


def build(shape: Shape) -> tuple[dict[str, frozenset[UUID]], SubscribedTopicMetadata]:
    subs = subscriptions(shape)
    members = {f"member-{m:05d}": subs[m] for m in range(shape.members)}
    describer = SubscribedTopicMetadata(
        {
            topic_id(t): TopicMetadata(f"topic-{t}", shape.partitions_per_topic)
            for t in range(shape.topics)
        }
    )
    return members, describer


def spec_of(
    members: dict[str, frozenset[UUID]], current: GroupAssignment | None = None
) -> GroupSpec:
    current = current or {}
    return GroupSpec(
        {
            member_id: MemberSubscriptionSpec(topics, current.get(member_id, {}))
            for member_id, topics in members.items()
        }
    )


def best_of(repeat: int, run: Callable[[], GroupAssignment]) -> tuple[float, GroupAssignment]:
    best = float("inf")
    result: GroupAssignment = {}
    for _ in range(repeat):
        start = time.perf_counter()
        result = run()
        best = min(best, time.perf_counter() - start)
    return best, result


def moved(before: GroupAssignment, after: GroupAssignment) -> int:
    return sum(
        len(partitions - after.get(member_id, {}).get(t, frozenset()))
        for member_id, assigned in before.items()
        for t, partitions in assigned.items()
    )


def run_shape(shape: Shape, assignor: PartitionAssignor, repeat: int) -> None:
    members, describer = build(shape)

    start = time.perf_counter()
    spec = spec_of(members)
    spec_s = time.perf_counter() - start
    full_s, full = best_of(repeat, lambda: assignor.assign(spec, describer))

    # One member joins, subscribed like member 0.
    grown = {**members, "member-new": members["member-00000"]}
    incremental_spec = spec_of(grown, full)
    incremental_s, incremental = best_of(
        repeat, lambda: assignor.assign(incremental_spec, describer)
    )
    print(
        f"  {assignor.name:<8} full {full_s * 1e3:9.1f} ms   "
        f"incremental {incremental_s * 1e3:9.1f} ms (moved {moved(full, incremental):>6})   "
        f"GroupSpec {spec_s * 1e3:6.1f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement (best shown)")
    parser.add_argument(
        "--profile",
        metavar="N",
        type=int,
        help="profile uniform on shape N (0-based) from scratch and incrementally instead",
    )
    args = parser.parse_args()

    if args.profile is not None:
        shape = SHAPES[args.profile]
        members, describer = build(shape)
        uniform = UniformAssignor()
        spec = spec_of(members)
        profiler = cProfile.Profile()
        profiler.enable()
        full = uniform.assign(spec, describer)
        uniform.assign(spec_of({**members, "member-new": members["member-00000"]}, full), describer)
        profiler.disable()
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)
        return

    for shape in SHAPES:
        print(shape.label)
        for assignor in (UniformAssignor(), RangeAssignor()):
            run_shape(shape, assignor, args.repeat)


if __name__ == "__main__":
    main()
