"""What one member joining a big KIP-848 group costs the pure core, with the incremental target
(``coordinator.core.consumer.incremental``) and with the full uniform assignor, side by side.

Shape: one topic (the 50,000-member scale row uses 100 partitions per group), a group of ``N``
members already Stable; then newcomers join one at a time, and after each join every member that
is not reconciled to the new epoch heartbeats (with its owned partitions) until the group is
Stable again, as real members do on their next interval. Per join it prints the core time of the
joining heartbeat (of which the target computation, from the ``TargetAssignmentComputed`` event),
the time of the heartbeats that follow until Stable (acknowledgements and the epoch catch-up of
every member), how many of those there were and how many records the join wrote in all.

The two modes run interleaved, several rounds each, in one process, so their ratio survives a
noisy machine; the best round of each is printed. Prints numbers; asserts nothing about time.

Run: ``PYTHONPATH=. .venv/bin/python bench/join_cost_bench.py [--quick]``.
"""

from __future__ import annotations

import argparse
import gc
import os
import time
from dataclasses import dataclass
from uuid import UUID

from coordinator.core.config import GroupConfig
from coordinator.core.consumer.group import ConsumerGroup
from coordinator.core.consumer.registration import ConsumerGroupType
from coordinator.core.events import TargetAssignmentComputed
from coordinator.core.requests import (
    ConsumerGroupHeartbeat,
    HeartbeatTopicPartitions,
    TopicsChanged,
)
from coordinator.core.shard import CoordinatorShard
from coordinator.core.topics import TopicInfo

NOW = 1_000_000


@dataclass
class Cost:
    join_s: float = 0.0
    target_s: float = 0.0
    settle_s: float = 0.0
    heartbeats: int = 0
    records: int = 0

    def add(self, other: Cost) -> None:
        self.join_s += other.join_s
        self.target_s += other.target_s
        self.settle_s += other.settle_s
        self.heartbeats += other.heartbeats
        self.records += other.records


class Group:
    def __init__(self, partitions: int, incremental: bool) -> None:
        self.shard = CoordinatorShard(GroupConfig(), stopwatch=time.perf_counter_ns)
        consumer = self.shard.types["consumer"]
        assert isinstance(consumer, ConsumerGroupType)
        consumer.targets.incremental = incremental
        self.shard.handle(TopicsChanged((TopicInfo(UUID(int=1), "t", partitions),), snapshot=True), NOW)
        self.ref = 0

    def group(self) -> ConsumerGroup:
        group = self.shard.group("g")
        assert isinstance(group, ConsumerGroup)
        return group

    def send(self, req: ConsumerGroupHeartbeat) -> tuple[int, float]:
        """Records written and the target computation's time (0 if none)."""
        result = self.shard.handle(req, NOW)
        response = result.replies[0].response
        assert response.error_code == 0, response  # type: ignore[attr-defined]
        target_ns = sum(e.duration_ns for e in result.events if isinstance(e, TargetAssignmentComputed))
        return len(result.records), target_ns / 1e9

    def join(self, member: str) -> Cost:
        self.ref += 1
        req = ConsumerGroupHeartbeat(self.ref, "g", member, 0, rebalance_timeout_ms=300_000,
                                     subscribed_topic_names=("t",), subscribed_topic_regex="", topic_partitions=())
        start = time.perf_counter()
        records, target_s = self.send(req)
        return Cost(join_s=time.perf_counter() - start, target_s=target_s, records=records)

    def settle(self, cost: Cost) -> Cost:
        group = self.group()
        for _ in range(10):
            if group.state_name == "Stable":
                return cost
            epoch = group.group_epoch
            for member_id, member in list(group.members.items()):
                if member.is_reconciled_to(epoch):
                    continue
                self.ref += 1
                owned = tuple(HeartbeatTopicPartitions(t, tuple(sorted(p))) for t, p in member.assigned_partitions.items())
                req = ConsumerGroupHeartbeat(self.ref, "g", member_id, member.member_epoch, topic_partitions=owned)
                start = time.perf_counter()
                records, _ = self.send(req)
                cost.settle_s += time.perf_counter() - start
                cost.heartbeats += 1
                cost.records += records
        raise AssertionError(f"did not settle: {group.state_name}")


def build(members: int, partitions: int, incremental: bool) -> Group:
    g = Group(partitions, incremental)
    for i in range(members):
        g.join(f"member-{i:06d}")
    g.settle(Cost())
    return g


def measure(members: int, partitions: int, joins: int, incremental: bool) -> Cost:
    g = build(members, partitions, incremental)
    total = Cost()
    gc.collect()
    gc.disable()  # the server freezes its long-lived state (runtime/gc_policy.py); collections here are noise
    try:
        for i in range(joins):
            total.add(g.settle(g.join(f"newcomer-{i:06d}")))
    finally:
        gc.enable()
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smaller runs (smoke test)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    shapes = [(50, 100, 50), (500, 1_000, 20)] if not args.quick else [(50, 100, 10), (200, 400, 5)]
    print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")
    for members, partitions, joins in shapes:
        best: dict[bool, Cost] = {}
        for _ in range(args.rounds):
            for incremental in (False, True):
                cost = measure(members, partitions, joins, incremental)
                old = best.get(incremental)
                if old is None or cost.join_s + cost.settle_s < old.join_s + old.settle_s:
                    best[incremental] = cost
        print(f"{joins} members joining a group of {members} (one topic, {partitions} partitions), per join:")
        for incremental in (False, True):
            c = best[incremental]
            label = "incremental target" if incremental else "full assignor     "
            print(f"  {label}: join heartbeat {c.join_s / joins * 1e6:7.1f} µs (target {c.target_s / joins * 1e6:6.1f} µs), "
                  f"then {c.heartbeats / joins:5.1f} heartbeats to Stable {c.settle_s / joins * 1e6:7.1f} µs; "
                  f"{c.records / joins:5.1f} records; all told {(c.join_s + c.settle_s) / joins * 1e6:7.1f} µs")
        full, inc = best[False], best[True]
        print(f"  ratio full/incremental: join heartbeat {full.join_s / inc.join_s:.2f}x, "
              f"target {full.target_s / max(inc.target_s, 1e-12):.2f}x, "
              f"all told {(full.join_s + full.settle_s) / (inc.join_s + inc.settle_s):.2f}x")
    print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")


if __name__ == "__main__":
    main()
