"""Three sidecar instances sharing the log on an Apache Kafka 4.0 (`coordinator.log.storage=upstream`,
issue 27 points 4 and 6): each its own ports and data directory, the log partitions divided by the
instance group. When the instance coordinating a KIP-848 group is SIGKILLed, its partitions move to
the others and the group's members keep their ids, epochs and partitions, with no rebalance; offsets
committed before are fetched back from the new owner. When one is SIGSTOPped past its session
timeout, the others take its partitions (fencing its writers); the taker answers
COORDINATOR_LOAD_IN_PROGRESS until it has loaded them; resumed, the paused one answers nothing for
them and rejoins. Every instance presents the upstream broker at one shared address and lists every
instance, so confluent-kafka (classic and KIP-848) and aiokafka groups consume everything exactly
once in the committed view, with no member rebalanced and the classic group keeping its generation,
while the instance coordinating the classic group is SIGKILLed, while it is SIGSTOPped past its
lease and resumed (fenced, then rejoining), while a fourth instance joins, and while the upstream
broker restarts.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition
from kio.schema.find_coordinator.v3.request import FindCoordinatorRequest
from kio.schema.metadata.v12.request import MetadataRequest
from kio.static.primitive import i8

from protocol.build import build
from protocol.private import DESCRIBE_GROUP_GENERATIONS
from protocol.schemas import request_schema
from tests.clusterlog.test_upstream_storage import (
    LOG_PARTITIONS,
    commit_offsets,
    commit_raw,
    ensure_topic,
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
from tests.sidecar.conftest import free_base_port
from tests.support.clients import Member, make_member, owns_each_exactly_once, poll_until, produce
from tests.support.kafka import KafkaBroker
from tests.support.metrics import scrape
from tests.support.server import ServerProcess, free_port, wait_until
from tests.support.wire import WireClient

pytestmark = pytest.mark.interop

GROUP = "k848"


def owned(server: ServerProcess) -> frozenset[int]:
    """The partitions the instance's last instance-group assignment gave it (from its log)."""
    last: frozenset[int] = frozenset()
    for line in server.log().splitlines():
        if line.startswith("{") and '"instance_group_assignment"' in line:
            last = frozenset(json.loads(line)["owned"])
    return last


def divided(servers: list[ServerProcess]) -> bool:
    shares = [owned(s) for s in servers]
    return all(shares) and sum(len(s) for s in shares) == LOG_PARTITIONS \
        and frozenset().union(*shares) == frozenset(range(LOG_PARTITIONS))


async def _find(port: int, group: str) -> tuple[int, int, int]:
    client = await WireClient.connect(port)
    try:
        response = await client.request(FindCoordinatorRequest(key=group, key_type=i8(0)))
    finally:
        await client.close()
    return int(response.error_code), int(response.node_id), int(response.port)


def coordinator_of(servers: list[ServerProcess], group: str, asked: ServerProcess) -> ServerProcess | None:
    code, _, port = asyncio.run(_find(asked.port, group))
    return next((s for s in servers if s.port == port), None) if code == 0 else None


async def _brokers(port: int) -> dict[int, tuple[str, int]]:
    client = await WireClient.connect(port)
    try:
        response = await client.request(MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                                        include_topic_authorized_operations=False))
    finally:
        await client.close()
    return {int(b.node_id): (b.host, int(b.port)) for b in response.brokers}


def brokers(server: ServerProcess) -> dict[int, tuple[str, int]]:
    """node id -> (host, port) in the instance's Metadata answer."""
    return asyncio.run(_brokers(server.port))


def presented_alike(servers: list[ServerProcess]) -> bool:
    """Every instance's Metadata names the same brokers: the upstream broker at the one shared
    address, and every instance's own node (so losing one leaves a client other brokers it knows)."""
    everyone = {1: ("127.0.0.1", int(servers[0].overrides["sidecar.listener.base.port"]) + 1)} | {
        int(s.overrides["sidecar.node.id"]): ("127.0.0.1", s.port) for s in servers}
    return all(brokers(s) == everyone for s in servers)


async def _generations(port: int, group: str) -> tuple[int, str, int, dict[str, int]]:
    client = await WireClient.connect(port)
    try:
        answer = await client.request(build(request_schema(DESCRIBE_GROUP_GENERATIONS, 0), {"groups": [group]}))
    finally:
        await client.close()
    [described] = answer.groups
    return (int(described.error_code), described.group_state, int(described.generation_id),
            {m.member_id: int(m.generation_id) for m in described.members})


def generations(server: ServerProcess, group: str) -> tuple[int, str, int, dict[str, int]]:
    """A classic group as its coordinator holds it: error, state, generation, each member's generation
    (the private DescribeGroupGenerations)."""
    return asyncio.run(_generations(server.port, group))


def loaded(server: ServerProcess) -> bool:
    """The instance answers ConsumerGroupDescribe for GROUP (it has loaded the group's partition)."""
    try:
        asyncio.run(describe(server.port))
    except AssertionError:  # COORDINATOR_LOAD_IN_PROGRESS or NOT_COORDINATOR while it loads
        return False
    return True


@pytest.fixture
def instances(tmp_path: Path, kafka_broker: KafkaBroker) -> Iterator[list[ServerProcess]]:
    ensure_topic(kafka_broker, TOPIC, PARTITIONS)
    log_topic = f"coordinator-log-{uuid.uuid4().hex[:8]}"
    # One base port for all: the instances share each broker's listener port (SO_REUSEPORT), as
    # instances on several machines share one advertised host behind a load balancer.
    base = free_base_port()
    servers = [upstream_instance(tmp_path / f"i{n}", kafka_broker, log_topic, base, free_port(),
                                 **{"sidecar.node.id": str(1000 + n)}) for n in (1, 2, 3)]
    try:
        for server in servers:
            server.start(wait=False)
        for server in servers:
            server.wait_ready(60)
        wait_until(lambda: divided(servers), timeout=60, message="the log partitions divided among three")
        yield servers
    finally:
        for server in servers:
            if server.proc is not None and server.proc.poll() is None:
                server.proc.send_signal(signal.SIGCONT)
            server.stop()


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
