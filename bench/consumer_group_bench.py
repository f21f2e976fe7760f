"""KIP-848 consumer groups through the pure core: what a heartbeat costs, and the uniform assignor at
Kafka's benchmark scale. Prints numbers; asserts nothing about time.

1. Steady-state ConsumerGroupHeartbeat: every member reconciled, heartbeats carry only the epoch
   (what librdkafka sends between rebalances). ``CoordinatorShard.handle`` per request, for groups of
   10, 100 and 1,000 members. No records are written on this path; the session timer is re-armed.
2. Joins: one member joining a group of N (the group epoch bump runs the assignor synchronously
   inside the heartbeat, as Kafka 4.x does), then the full reconciliation round that follows; and
   the same joins arriving in runtime batches (the assignor runs once per group and batch).
3. The uniform assignor at 1,000 members x 100,000 partitions (100 topics x 1,000) and at
   10 x 1,000 (10 topics x 100): ``assign`` alone, full and incremental (one member added), and the
   whole target computation inside the heartbeat of the joining member.

Run: ``.venv/bin/python bench/consumer_group_bench.py [--quick]``.
"""

from __future__ import annotations

import argparse
import time
from uuid import UUID

from coordinator.core.assignors import (
    GroupSpec,
    MemberSubscriptionSpec,
    SubscribedTopicMetadata,
    TopicMetadata,
    UniformAssignor,
)
from coordinator.core.config import GroupConfig
from coordinator.core.consumer.group import ConsumerGroup
from coordinator.core.events import TargetAssignmentComputed
from coordinator.core.requests import (
    ConsumerGroupHeartbeat,
    HeartbeatTopicPartitions,
    TopicsChanged,
)
from coordinator.core.shard import CoordinatorShard
from coordinator.core.topics import TopicInfo

NOW = 1_000_000


class Bench:
    """A shard with topics; members join and reconcile as real clients do."""

    def __init__(self, topics: int, partitions: int) -> None:
        self.shard = CoordinatorShard(GroupConfig(), stopwatch=time.perf_counter_ns)
        self.topics = [TopicInfo(UUID(int=i + 1), f"t{i}", partitions) for i in range(topics)]
        self.names = tuple(t.name for t in self.topics)
        self.shard.handle(TopicsChanged(tuple(self.topics), snapshot=True), NOW)
        self.ref = 0
        self.epochs: dict[str, int] = {}
        self.last_events: list[object] = []

    def send(self, member: str, epoch: int, **fields: object) -> object:
        self.ref += 1
        result = self.shard.handle(ConsumerGroupHeartbeat(self.ref, "g", member, epoch, **fields), NOW)  # type: ignore[arg-type]
        self.last_events = result.events
        response = result.replies[0].response
        assert response.error_code == 0, response  # type: ignore[attr-defined]
        self.epochs[member] = response.member_epoch  # type: ignore[attr-defined]
        return response

    def join(self, member: str) -> object:
        return self.send(member, 0, rebalance_timeout_ms=300_000, subscribed_topic_names=self.names,
                         subscribed_topic_regex="", topic_partitions=())

    def settle(self) -> int:
        """Heartbeat (acknowledging revocations) until the group is Stable; returns the heartbeats sent."""
        sent = 0
        group = self.group()
        for _ in range(10):
            if group.state_name == "Stable":
                return sent
            for member_id in list(group.members):
                member = group.members[member_id]
                owned = tuple(HeartbeatTopicPartitions(t, tuple(sorted(p))) for t, p in member.assigned_partitions.items())
                self.send(member_id, member.member_epoch, topic_partitions=owned)
                sent += 1
        raise AssertionError(f"did not settle: {group.state_name}")

    def group(self) -> ConsumerGroup:
        group = self.shard.group("g")
        assert isinstance(group, ConsumerGroup)
        return group


def steady_heartbeats(members: int, rounds: int) -> None:
    bench = Bench(topics=10, partitions=max(members, 100))
    for i in range(members):
        bench.join(f"member-{i:05d}")
    bench.settle()
    ids = list(bench.group().members)
    requests = [ConsumerGroupHeartbeat(0, "g", m, bench.epochs[m]) for m in ids]
    handle = bench.shard.handle
    count = 0
    start = time.perf_counter()
    for _ in range(rounds):
        for request in requests:
            result = handle(request, NOW)
            count += 1
    elapsed = time.perf_counter() - start
    assert result.replies[0].response.error_code == 0 and not result.records  # type: ignore[attr-defined]
    print(f"  {members:>5} members: {elapsed / count * 1e6:6.2f} µs per heartbeat "
          f"({count / elapsed:,.0f} heartbeats/s on one core, {count} measured)")


def joins(members: int) -> None:
    bench = Bench(topics=10, partitions=100)
    start = time.perf_counter()
    for i in range(members):
        bench.join(f"member-{i:05d}")
    joined = time.perf_counter() - start
    start = time.perf_counter()
    sent = bench.settle()
    settled = time.perf_counter() - start
    print(f"  {members:>5} members joining one by one: {joined / members * 1e3:7.3f} ms per join "
          f"(each bumps the epoch and runs the assignor); then {sent} heartbeats to settle in {settled * 1e3:.0f} ms")


def batched_joins(members: int, batch: int) -> None:
    """Joins arriving ``batch`` at a time, as the runtime hands them over (``handle_batch``): the
    assignor runs once per batch instead of once per join."""
    bench = Bench(topics=10, partitions=100)
    start = time.perf_counter()
    computed = 0
    for first in range(0, members, batch):
        joins = []
        for i in range(first, min(first + batch, members)):
            bench.ref += 1
            joins.append(ConsumerGroupHeartbeat(
                bench.ref, "g", f"member-{i:05d}", 0, rebalance_timeout_ms=300_000, subscribed_topic_names=bench.names,
                subscribed_topic_regex="", topic_partitions=()))
        results = bench.shard.handle_batch(joins, NOW)
        for result in results:
            computed += sum(isinstance(e, TargetAssignmentComputed) for e in result.events)
            for reply in result.replies:
                assert reply.response.error_code == 0, reply.response  # type: ignore[attr-defined]
    joined = time.perf_counter() - start
    sent = bench.settle()
    print(f"  {members:>5} members joining in batches of {batch}: {joined / members * 1e3:7.3f} ms per join "
          f"({computed} target computations); then {sent} heartbeats to settle")


def assignor_scale(members: int, topics: int, partitions: int) -> None:
    ids = [UUID(int=i + 1) for i in range(topics)]
    metadata = SubscribedTopicMetadata({t: TopicMetadata(f"t{i}", partitions) for i, t in enumerate(ids)})
    subscribed = frozenset(ids)
    assignor = UniformAssignor()
    member_ids = [f"member-{i:05d}" for i in range(members)]
    spec = GroupSpec({m: MemberSubscriptionSpec(subscribed) for m in member_ids})
    start = time.perf_counter()
    full = assignor.assign(spec, metadata)
    full_ms = (time.perf_counter() - start) * 1e3
    current = {m: MemberSubscriptionSpec(subscribed, full[m]) for m in member_ids}
    current["member-new"] = MemberSubscriptionSpec(subscribed)
    start = time.perf_counter()
    incremental = assignor.assign(GroupSpec(current), metadata)
    incremental_ms = (time.perf_counter() - start) * 1e3
    moved = sum(len(p) for p in incremental["member-new"].values())
    label = f"{members} members x {topics * partitions:,} partitions ({topics} topics x {partitions})"
    print(f"  {label}: full {full_ms:8.1f} ms, incremental (+1 member, {moved} partitions move) {incremental_ms:8.1f} ms")

    # The same through the core: N members present, one more joins; its heartbeat runs the assignor.
    bench = Bench(topics, partitions)
    group_members = member_ids if members <= 1_000 else member_ids[:1_000]
    for m in group_members:
        bench.join(m)
    start = time.perf_counter()
    bench.join("member-new")
    join_ms = (time.perf_counter() - start) * 1e3
    group = bench.group()
    assigned = sum(len(p) for p in group.target("member-new").values())
    (computed,) = [e for e in bench.last_events if isinstance(e, TargetAssignmentComputed)]
    print(f"    through the core: the joining member's heartbeat {join_ms:8.1f} ms, of which the assignor "
          f"{computed.duration_ns / 1e6:.1f} ms (on the target the {len(group_members)} earlier joins built); "
          f"{assigned} partitions targeted to it")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smaller runs (smoke test)")
    args = parser.parse_args()
    print("Steady-state ConsumerGroupHeartbeat through CoordinatorShard.handle:")
    for members in (10, 100, 1_000):
        steady_heartbeats(members, rounds=(20 if args.quick else 200) if members < 1_000 else (2 if args.quick else 20))
    print("Joins:")
    for members in (10, 100) if args.quick else (10, 100, 500):
        joins(members)
    for members in (100,) if args.quick else (100, 500):
        batched_joins(members, 16)
    print("Uniform assignor:")
    assignor_scale(10, 10, 100)
    if args.quick:
        assignor_scale(100, 10, 1_000)
    else:
        assignor_scale(1_000, 100, 1_000)


if __name__ == "__main__":
    main()
