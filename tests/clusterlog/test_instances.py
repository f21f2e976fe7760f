"""Three sidecar instances sharing the log on an Apache Kafka 4.0 (`coordinator.log.storage=upstream`,
issue 27 points 4 and 6): each its own ports and data directory, the log partitions divided by the
instance group. When the instance coordinating a KIP-848 group is SIGKILLed, its partitions move to
the others and the group's members keep their ids, epochs and partitions, with no rebalance; offsets
committed before are fetched back from the new owner. When one is SIGSTOPped past its session
timeout, the others take its partitions (fencing its writers); the taker answers
COORDINATOR_LOAD_IN_PROGRESS until it has loaded them; resumed, the paused one answers nothing for
them and rejoins. Every instance presents the upstream broker at one shared address and lists every
instance. A fourth instance joining rebalances no client group, and a takeover replays the
partition from what the taker already read, reading only its tail. (Client groups consuming
through these events: test_instances_exactly_once.py.)
"""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.clusterlog.instance_support import (
    coordinator_of,
    divided,
    presented_alike,
    three_instances,
)
from tests.clusterlog.test_upstream_storage import (
    LOG_PARTITIONS,
    commit_offsets,
    commit_raw,
    fetch_offsets,
    upstream_instance,
)
from tests.durability.test_failover import (
    PARTITIONS,
    TOPIC,
    assert_members_kept_everything,
    consumers,
    describe,
    settle,
)
from tests.support.clients import make_member, owns_each_exactly_once, poll_until
from tests.support.kafka import KafkaBroker
from tests.support.metrics import scrape
from tests.support.server import ServerProcess, free_port, wait_until

pytestmark = pytest.mark.interop

GROUP = "k848"


def loaded(server: ServerProcess) -> bool:
    """The instance answers ConsumerGroupDescribe for GROUP (it has loaded the group's partition)."""
    try:
        asyncio.run(describe(server.port))
    except AssertionError:  # COORDINATOR_LOAD_IN_PROGRESS or NOT_COORDINATOR while it loads
        return False
    return True


@pytest.fixture
def instances(tmp_path: Path, kafka_broker: KafkaBroker) -> Iterator[list[ServerProcess]]:
    with three_instances(tmp_path, kafka_broker) as servers:
        yield servers


def test_a_sigkilled_instance_s_partitions_move_and_its_group_keeps_everything(
        instances: list[ServerProcess]) -> None:
    wait_until(lambda: presented_alike(instances), timeout=10, message="every instance presenting the same brokers")
    owner = coordinator_of(instances, GROUP, instances[0])
    assert owner is not None
    survivors = [s for s in instances if s is not owner]
    # A group of the same instance whose offsets alone are kept (GROUP's partition, by the hash).
    offsets_group = next(f"o{i}" for i in range(1000) if coordinator_of(instances, f"o{i}", owner) is owner)
    bootstrap = ",".join(s.bootstrap for s in instances)
    commit_offsets(bootstrap, offsets_group, {0: 5, 1: 6})
    members = consumers(bootstrap)
    try:
        before = settle(members, owner.port)
        assert owner.proc is not None
        owner.proc.kill()
        owner.proc.wait(10)
        wait_until(lambda: divided(survivors), timeout=60, message="the killed instance's partitions taken over")
        wait_until(lambda: presented_alike(survivors), timeout=10, message="the killed instance no longer presented")
        new_owner = coordinator_of(survivors, GROUP, survivors[0])
        assert new_owner is not None and new_owner is not owner
        poll_until(members, lambda: loaded(new_owner), message="the new owner serving the group")
        assert_members_kept_everything(members, before, new_owner)
        assert fetch_offsets(",".join(s.bootstrap for s in survivors), offsets_group) == {0: 5, 1: 6}
    finally:
        for m in members:
            m.close()


@pytest.mark.slow
def test_a_paused_instance_is_fenced_answers_nothing_for_what_it_lost_and_rejoins(
        instances: list[ServerProcess]) -> None:
    paused = instances[0]
    group = next(f"g{i}" for i in range(1000) if coordinator_of(instances, f"g{i}", paused) is paused)
    # Divided means assigned; the instance answers COORDINATOR_LOAD_IN_PROGRESS until it has loaded.
    wait_until(lambda: commit_raw(paused.port, group, {0: 1}) == [0], timeout=30,
               message="the instance acknowledging the group's commits")
    assert paused.proc is not None
    paused.proc.send_signal(signal.SIGSTOP)
    others = instances[1:]
    try:
        wait_until(lambda: divided(others), timeout=60, message="the paused instance's partitions taken over")
        taker = coordinator_of(others, group, others[0])
        assert taker is not None and taker is not paused
        # Once the taker names itself, the partition is its own: assigned but not yet loaded, it
        # answers COORDINATOR_LOAD_IN_PROGRESS (as Kafka does), never NOT_COORDINATOR.
        wait_until(lambda: coordinator_of(others, group, taker) is taker, timeout=30,
                   message="the taker naming itself")
        seen: set[int] = set()

        def acknowledged() -> bool:
            codes = commit_raw(taker.port, group, {0: 2})
            seen.update(codes)
            return codes == [0]

        wait_until(acknowledged, timeout=30, message="the taker acknowledging the group's commits")
        assert seen <= {0, 14}, f"the taker answered {seen} while it loaded (14: COORDINATOR_LOAD_IN_PROGRESS)"
    finally:
        paused.proc.send_signal(signal.SIGCONT)
    # Resumed: its lease has run out and its writers are fenced; it refuses the group at once.
    codes = commit_raw(paused.port, group, {0: 3})
    assert codes == [16], f"the resumed instance answered {codes} (NOT_COORDINATOR is 16)"
    wait_until(lambda: divided(instances), timeout=60, message="the resumed instance rejoined with a share")
    assert fetch_offsets(",".join(s.bootstrap for s in others), group) == {0: 2}


def heartbeats(server: ServerProcess, api: str) -> float:
    return scrape(server.metrics_port).get(f'coordinator_requests_total{{api="{api}"}}', 0.0)


@pytest.mark.slow
def test_a_fourth_instance_takes_partitions_without_rebalancing_any_client_group(
        tmp_path: Path, kafka_broker: KafkaBroker, instances: list[ServerProcess]) -> None:
    bootstrap = ",".join(s.bootstrap for s in instances)
    modern = consumers(bootstrap)
    classic = [make_member(bootstrap, "classic-group", f"c{i}", [TOPIC]) for i in range(2)]
    members = modern + classic
    fourth: ServerProcess | None = None
    try:
        owner = coordinator_of(instances, GROUP, instances[0])
        assert owner is not None
        before = settle(modern, owner.port)
        poll_until(members, lambda: owns_each_exactly_once(classic, PARTITIONS), message="classic assignment")
        classic_before = {m.name: (m.consumer.memberid(), frozenset(m.assignment())) for m in classic}
        for m in members:
            m.revoked_events.clear()
            m.assigned_events.clear()
        topic = instances[0].overrides["coordinator.log.topic"]
        base = int(instances[0].overrides["sidecar.listener.base.port"])
        fourth = upstream_instance(tmp_path / "i4", kafka_broker, topic, base, free_port(),
                                   **{"sidecar.node.id": "1004"})
        fourth.start(wait=False)
        everyone = [*instances, fourth]
        poll_until(members, lambda: divided(everyone) and fourth.ready(), timeout=60,
                   message="the log partitions divided among four")
        # Every group is served again where FindCoordinator says, and its members heartbeat there.
        new_owner = coordinator_of(everyone, GROUP, fourth)
        classic_owner = coordinator_of(everyone, "classic-group", fourth)
        assert new_owner is not None and classic_owner is not None
        modern_at, classic_at = heartbeats(new_owner, "ConsumerGroupHeartbeat"), heartbeats(classic_owner, "Heartbeat")
        poll_until(members, lambda: heartbeats(new_owner, "ConsumerGroupHeartbeat") >= modern_at + 3 * len(modern)
                   and heartbeats(classic_owner, "Heartbeat") >= classic_at + 3 * len(classic),
                   message="members heartbeating their group's owner after the move")
        assert asyncio.run(describe(new_owner.port)) == before, "KIP-848 member ids, epochs or partitions changed"
        for m in members:
            assert not m.revoked_events and not m.assigned_events, f"{m.name} saw a rebalance"
        assert {m.name: (m.consumer.memberid(), frozenset(m.assignment())) for m in classic} == classic_before
    finally:
        for m in members:
            m.close()
        if fourth is not None:
            fourth.stop()


def log_end_offsets(broker: KafkaBroker, topic: str) -> int:
    """The log topic's high watermarks, summed over its partitions."""
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "watermarks"})
    try:
        return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                   for p in range(LOG_PARTITIONS))
    finally:
        consumer.close()


@pytest.mark.slow
def test_a_takeover_replays_the_partition_from_memory_and_reads_only_its_tail(
        kafka_broker: KafkaBroker, instances: list[ServerProcess]) -> None:
    owner = instances[0]
    group = next(f"t{i}" for i in range(1000) if coordinator_of(instances, f"t{i}", owner) is owner)
    for round_ in range(3):
        wait_until(lambda r=round_: commit_raw(owner.port, group, {p: 10 * r + p for p in range(PARTITIONS)})
                   == [0] * PARTITIONS, message="commits acknowledged")
    survivors = instances[1:]
    end = log_end_offsets(kafka_broker, owner.overrides["coordinator.log.topic"])
    wait_until(lambda: all(scrape(s.metrics_port).get("coordinator_log_tail_offsets", 0) >= end for s in survivors),
               timeout=30, message="every other instance's copies read through the log's end")
    assert owner.proc is not None
    owner.proc.kill()
    owner.proc.wait(10)
    wait_until(lambda: divided(survivors), timeout=60, message="the killed instance's partitions taken over")
    taker = next(s for s in survivors if coordinator_of(survivors, group, s) is s)
    offsets = {p: 20 + p for p in range(PARTITIONS)}
    wait_until(lambda: fetch_offsets(taker.bootstrap, group) == offsets, timeout=30,
               message="the group's offsets served by the taker")
    loads = [json.loads(line) for line in taker.log().splitlines() if '"cluster_log_loaded"' in line]
    assert loads[-1]["read"] == 0 and loads[-1]["records"] >= PARTITIONS, loads[-1]
