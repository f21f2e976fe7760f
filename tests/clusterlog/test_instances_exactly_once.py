"""Client groups through three sidecar instances sharing the log on an Apache Kafka 4.0
(`coordinator.log.storage=upstream`, issue 27 point 6): confluent-kafka (classic and KIP-848) and
aiokafka groups consume everything exactly once in the committed view, with no member rebalanced
and the classic group keeping its generation, while the instance coordinating the classic group is
SIGKILLed, while it is SIGSTOPped past its lease and resumed (fenced, then rejoining), while a
fourth instance joins, and while the upstream broker restarts.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition

from tests.clusterlog.instance_support import (
    coordinator_of,
    divided,
    generations,
    owned,
    three_instances,
)
from tests.clusterlog.test_upstream_storage import commit_raw, ensure_topic, upstream_instance
from tests.durability.test_failover import PARTITIONS
from tests.support.clients import Member, make_member, owns_each_exactly_once, poll_until, produce
from tests.support.kafka import KafkaBroker
from tests.support.server import ServerProcess, free_port

pytestmark = pytest.mark.interop


@pytest.fixture
def instances(tmp_path: Path, kafka_broker: KafkaBroker) -> Iterator[list[ServerProcess]]:
    with three_instances(tmp_path, kafka_broker) as servers:
        yield servers


def commit_positions(members: list[Member]) -> None:
    """Each member commits what it has consumed; a commit refused while its coordinator moves
    (retriable) is tried again on the next call."""
    for member in members:
        if member.consumed:
            with contextlib.suppress(KafkaException):
                member.consumer.commit(asynchronous=False)


def committed_ends(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        return {tp.partition: tp.offset for tp in
                consumer.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=10)}
    finally:
        consumer.close()


class AioMember(threading.Thread):
    """An aiokafka (classic) group member in its own thread: what it consumed, the assignments and
    revocations it saw; it commits its positions after each batch of at most 10 (a commit refused
    while the coordinator moves is tried again with the next batch)."""

    def __init__(self, bootstrap: str, group: str, name: str, topic: str) -> None:
        super().__init__(name=name, daemon=True)
        self.bootstrap, self.group, self.topic = bootstrap, group, topic
        self.consumed: list[tuple[int, int]] = []
        self.assigned_events: list[set[int]] = []
        self.revoked_events: list[set[int]] = []
        self.failure: BaseException | None = None
        self.stopping = threading.Event()

    def run(self) -> None:
        try:
            asyncio.run(self._consume())
        except BaseException as exc:  # reported by the test thread
            self.failure = exc

    async def _consume(self) -> None:
        from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
        from aiokafka.errors import KafkaError

        member = self

        class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
            async def on_partitions_revoked(self, revoked: Any) -> None:
                if revoked and not member.stopping.is_set():
                    member.revoked_events.append({tp.partition for tp in revoked})

            async def on_partitions_assigned(self, assigned: Any) -> None:
                member.assigned_events.append({tp.partition for tp in assigned})

        consumer = AIOKafkaConsumer(bootstrap_servers=self.bootstrap, group_id=self.group, client_id=self.name,
                                    enable_auto_commit=False, auto_offset_reset="earliest",
                                    heartbeat_interval_ms=300, session_timeout_ms=30000, retry_backoff_ms=100,
                                    metadata_max_age_ms=1000, max_poll_records=10)
        consumer.subscribe([self.topic], listener=Listener())
        await consumer.start()
        try:
            while not self.stopping.is_set():
                batches = await consumer.getmany(timeout_ms=100)
                for tp, records in batches.items():
                    self.consumed += [(tp.partition, r.offset) for r in records]
                if self.consumed:
                    with contextlib.suppress(KafkaError):
                        await consumer.commit()
                # Paced so the group is still consuming and committing when its coordinator dies.
                await asyncio.sleep(0.05)
        finally:
            await consumer.stop()


class ThreeGroups:
    """A confluent-kafka classic group, a confluent-kafka KIP-848 group and an aiokafka group
    consuming one topic of 600 messages through the instances: `consume_half` runs them to the
    middle, `assert_exactly_once` waits for every group to commit the topic's end and checks that
    each consumed every message exactly once, with no member rebalanced (what an event must not
    disturb in the committed view)."""

    groups = ("eo-classic", "eo-modern", "eo-aio")

    def __init__(self, broker: KafkaBroker, bootstrap: str, classic_session_ms: int = 30000) -> None:
        self.topic = f"eo-{uuid.uuid4().hex[:8]}"
        ensure_topic(broker, self.topic, PARTITIONS)
        self.bootstrap = bootstrap
        self.classic = [make_member(bootstrap, "eo-classic", f"c{i}", [self.topic],
                                    **{"session.timeout.ms": classic_session_ms}) for i in range(2)]
        self.modern = [make_member(bootstrap, "eo-modern", f"m{i}", [self.topic], **{"group.protocol": "consumer"})
                       for i in range(2)]
        self.members = self.classic + self.modern
        self.aio = [AioMember(bootstrap, "eo-aio", f"a{i}", self.topic) for i in range(2)]
        for a in self.aio:
            a.start()
        self.aio_events: list[tuple[int, int]] = []

    def _aio_assigned(self) -> bool:
        last = [a.assigned_events[-1] for a in self.aio if a.assigned_events]
        return len(last) == len(self.aio) and sorted(p for ps in last for p in ps) == list(range(PARTITIONS))

    def consume_half(self) -> None:
        poll_until(self.members, lambda: owns_each_exactly_once(self.classic, PARTITIONS)
                   and owns_each_exactly_once(self.modern, PARTITIONS) and self._aio_assigned(),
                   message="the three groups assigned")
        for m in self.members:
            m.revoked_events.clear()
            m.assigned_events.clear()
        self.aio_events = [(len(a.assigned_events), len(a.revoked_events)) for a in self.aio]
        # Produced once every group is settled: a record read before a group's first assignments
        # settle is read again by the member that takes its partition (at least once, as in Kafka).
        produce(self.bootstrap, self.topic, 600, PARTITIONS)
        poll_until(self.members, lambda: sum(len(m.consumed) for m in self.members) >= 600
                   and sum(len(a.consumed) for a in self.aio) >= 300, timeout=60,
                   message="half of what the groups must consume")
        commit_positions(self.members)
        assert sum(len(a.consumed) for a in self.aio) < 600, "the aiokafka group finished before the event"

    def poll(self, condition: Any, timeout: float = 60, message: str = "") -> None:
        """Wait for a condition while the confluent-kafka members keep polling (and committing)."""
        def polled() -> bool:
            commit_positions(self.members)
            return bool(condition())
        poll_until(self.members, polled, timeout=timeout, message=message)

    def aio_exactly_once(self) -> bool:
        seen = [record for a in self.aio for record in a.consumed]
        return sorted(seen) == [(p, o) for p in range(PARTITIONS) for o in range(100)]

    def aio_rebalanced(self) -> bool:
        return [(len(a.assigned_events), len(a.revoked_events)) for a in self.aio] != self.aio_events

    def assert_everything_committed(self, bootstrap: str, timeout: float = 90) -> None:
        """Every group commits the topic's end, and every message was consumed (at least once)."""
        ends = {p: 100 for p in range(PARTITIONS)}

        def done() -> bool:
            commit_positions(self.members)
            try:
                return all(committed_ends(bootstrap, g, self.topic) == ends for g in self.groups)
            except KafkaException:  # retriable while a group's partition moves: asked again
                return False

        try:
            poll_until(self.members, done, timeout=timeout,
                       message="every message consumed and committed by every group")
        except AssertionError:
            state = {g: committed_ends(bootstrap, g, self.topic) for g in self.groups}
            counts = {m.name: len({(p, o) for p, o, _ in m.consumed}) for m in self.members}
            counts |= {a.name: len(set(a.consumed)) for a in self.aio}
            raise AssertionError(f"committed {state}, consumed {counts}") from None
        everything = {(p, o) for p in range(PARTITIONS) for o in range(100)}
        for group in (self.classic, self.modern):
            assert {(p, o) for m in group for p, o, _ in m.consumed} == everything, "a message never consumed"
        assert {record for a in self.aio for record in a.consumed} == everything, "aiokafka missed a message"
        assert all(a.failure is None for a in self.aio), [a.failure for a in self.aio]

    def assert_exactly_once(self, bootstrap: str, timeout: float = 90) -> None:
        """Everything committed, each message consumed once by each group, no member rebalanced."""
        self.assert_everything_committed(bootstrap, timeout)
        everything = {(p, o) for p in range(PARTITIONS) for o in range(100)}
        for group in (self.classic, self.modern):
            seen = [(p, o) for m in group for p, o, _ in m.consumed]
            twice = {m.name: sorted({(p, o) for p, o, _ in m.consumed if seen.count((p, o)) > 1}) for m in group}
            assert set(seen) == everything and len(seen) == len(everything), \
                f"consumed twice or not at all: missing {len(everything - set(seen))}, twice {twice}"
        for m in self.members:
            assert not m.revoked_events and not m.assigned_events, f"{m.name} was rebalanced by the event"
        assert self.aio_exactly_once(), "aiokafka consumed twice or not at all"
        assert not self.aio_rebalanced(), "an aiokafka member was rebalanced by the event"

    def close(self) -> None:
        for a in self.aio:
            a.stopping.set()
        for a in self.aio:
            a.join(30)
        for m in self.members:
            m.close()


@pytest.mark.slow
def test_groups_consume_everything_once_in_the_committed_view_while_their_coordinator_is_killed(
        kafka_broker: KafkaBroker, instances: list[ServerProcess]) -> None:
    # Clients start from one instance that stays; they take broker N's address from every instance
    # they talk to (the coordinators answer Metadata too), and it is the same address everywhere.
    victim = coordinator_of(instances, "eo-classic", instances[0])
    assert victim is not None and victim.proc is not None
    groups = ThreeGroups(kafka_broker, next(s.bootstrap for s in instances if s is not victim))
    try:
        groups.consume_half()
        held = generations(victim, "eo-classic")
        assert held[:2] == (0, "Stable") and len(held[3]) == 2, held
        victim.proc.kill()
        victim.proc.wait(10)
        groups.assert_exactly_once(",".join(s.bootstrap for s in instances if s is not victim))
        # The classic group kept its generation and every member its own across the SIGKILL.
        new_owner = coordinator_of(instances, "eo-classic", next(s for s in instances if s is not victim))
        assert new_owner is not None and new_owner is not victim
        assert generations(new_owner, "eo-classic") == held
    finally:
        groups.close()


@pytest.mark.slow
def test_groups_consume_everything_once_in_the_committed_view_while_their_coordinator_is_paused(
        kafka_broker: KafkaBroker, instances: list[ServerProcess]) -> None:
    paused = coordinator_of(instances, "eo-classic", instances[0])
    assert paused is not None and paused.proc is not None
    others = [s for s in instances if s is not paused]
    groups = ThreeGroups(kafka_broker, others[0].bootstrap)
    try:
        groups.consume_half()
        held = generations(paused, "eo-classic")
        paused.proc.send_signal(signal.SIGSTOP)
        try:
            # Past its lease (coordinator.log.session.timeout.ms): the others take its partitions.
            groups.poll(lambda: divided(others), message="the paused instance's partitions taken over")
            taker = coordinator_of(others, "eo-classic", others[0])
            assert taker is not None and taker is not paused
            groups.assert_exactly_once(",".join(s.bootstrap for s in others))
        finally:
            paused.proc.send_signal(signal.SIGCONT)
        # Resumed: fenced, it acknowledges nothing for the group it lost, and rejoins with a share.
        codes = commit_raw(paused.port, "eo-classic", {0: 0})
        assert codes == [16], f"the resumed instance answered {codes} (NOT_COORDINATOR is 16)"
        groups.poll(lambda: divided(instances), message="the resumed instance rejoined with a share")
        assert committed_ends(",".join(s.bootstrap for s in instances), "eo-classic", groups.topic) \
            == {p: 100 for p in range(PARTITIONS)}
        owner = coordinator_of(instances, "eo-classic", others[0])
        assert owner is not None and generations(owner, "eo-classic") == held
    finally:
        groups.close()


@pytest.mark.slow
def test_groups_consume_everything_once_in_the_committed_view_while_a_fourth_instance_joins(
        tmp_path: Path, kafka_broker: KafkaBroker, instances: list[ServerProcess]) -> None:
    groups = ThreeGroups(kafka_broker, instances[0].bootstrap)
    fourth: ServerProcess | None = None
    try:
        groups.consume_half()
        held = generations(coordinator_of(instances, "eo-classic", instances[0]) or instances[0], "eo-classic")
        topic = instances[0].overrides["coordinator.log.topic"]
        base = int(instances[0].overrides["sidecar.listener.base.port"])
        fourth = upstream_instance(tmp_path / "i4", kafka_broker, topic, base, free_port(),
                                   **{"sidecar.node.id": "1004"})
        fourth.start(wait=False)
        everyone = [*instances, fourth]
        groups.poll(lambda: divided(everyone) and fourth is not None and fourth.ready(),
                    message="the log partitions divided among four")
        assert owned(fourth), "the fourth instance took no partition"
        groups.assert_exactly_once(",".join(s.bootstrap for s in everyone))
        owner = coordinator_of(everyone, "eo-classic", fourth)
        assert owner is not None and generations(owner, "eo-classic") == held
    finally:
        groups.close()
        if fourth is not None:
            fourth.stop()


@pytest.mark.slow
def test_groups_consume_everything_once_in_the_committed_view_while_the_upstream_broker_restarts(
        kafka_broker: KafkaBroker, instances: list[ServerProcess]) -> None:
    # librdkafka ends a classic member's session itself after session.timeout.ms without an
    # answered Heartbeat. The instances answer Heartbeats (no log write) until their lease on the
    # log runs out, 0.9 x coordinator.log.session.timeout.ms (6 s here) into the outage; past it
    # another instance may own the group, so they answer NOT_COORDINATOR until the upstream is
    # back and has given the partitions back. A JVM restart takes 10 to 35 s on this shared
    # machine: the classic members get 60 s (librdkafka's default is 45 s).
    groups = ThreeGroups(kafka_broker, instances[0].bootstrap, classic_session_ms=60000)
    try:
        groups.consume_half()
        owner = coordinator_of(instances, "eo-classic", instances[0])
        assert owner is not None
        held = generations(owner, "eo-classic")
        # Down for the time a JVM takes to restart: nothing is committed or fetched meanwhile; the
        # instances' Metadata answers describe the topic as the clients know it (partitions without
        # leaders), so no group takes it for gone.
        stopped = time.monotonic()
        kafka_broker.stop()
        kafka_broker.start()
        down_s = time.monotonic() - stopped
        everyone = ",".join(s.bootstrap for s in instances)
        try:
            groups.assert_exactly_once(everyone, timeout=120)
        except AssertionError as exc:
            raise AssertionError(f"{exc} (the upstream was down {down_s:.1f} s)") from None
        owner = coordinator_of(instances, "eo-classic", instances[0])
        assert owner is not None
        assert generations(owner, "eo-classic") == held
        assert all("Traceback" not in s.log() for s in instances)
    finally:
        groups.close()
