"""Real clients across a shard's SIGKILL (issue 14, point 6).

Two shards under the supervisor. Three groups whose ids land on different shards (Kafka's hash,
then partition % 2): a confluent-kafka KIP-848 group (`group.protocol=consumer`), a confluent-kafka
classic group and an aiokafka (classic) group, each one consumer that commits every message it
processes before it takes the next (retrying the commit while its coordinator is down). Messages
are produced in phases; in each phase after the first, a shard is SIGKILLed while every group is
consuming and committing, and the supervisor restarts it.

What must hold, whichever node serves a group's requests (every node while FindCoordinator answers
itself; the group's own node once groups are routed to their shard):
- every produced message is consumed exactly once by every group;
- the offsets committed before a kill are there after the restart, and at the end every group has
  committed every message;
- no consumer rebalanced: each saw one assignment of every partition and no revocation;
- FindCoordinator asked of each node gives the same answer for each group before and after the
  restarts.

The data plane lives on shard 0, so killing shard 0 also stops produce and fetch until it is back;
killing shard 1 takes down only its groups (once groups are routed to their shard).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from kio.index import load_request_schema

from protocol.build import build
from tests.shards.supervised import Supervised, create_topics, group_on_shard
from tests.support.clients import COORDINATOR_LOSS
from tests.support.server import wait_until
from tests.support.wire import WireClient

pytestmark = pytest.mark.interop

TOPIC = "orders"
PARTITIONS = 4
PER_PHASE = 60
WORK_S = 0.01
"""Each message's processing time: a phase takes long enough that a kill lands mid-stream."""
FIND_COORDINATOR = 10
SESSION_MS = 45000
"""Classic sessions (librdkafka's default): a restart on a loaded machine is not a lost session."""


REBALANCED = {KafkaError.UNKNOWN_MEMBER_ID, KafkaError.ILLEGAL_GENERATION, KafkaError.REBALANCE_IN_PROGRESS,
              KafkaError.FENCED_MEMBER_EPOCH, KafkaError.STALE_MEMBER_EPOCH}
"""Commit errors that say the member's id, generation or epoch is gone: a rebalance, not a restart."""


class Reader(threading.Thread):
    """One consumer of one group, in its own thread: what it consumed, assigned and revoked."""

    def __init__(self, name: str) -> None:
        super().__init__(name=name, daemon=True)
        self.consumed: list[tuple[int, int]] = []
        self.done: dict[int, int] = {}  # partition -> next offset, committed
        self.assigned: list[set[int]] = []
        self.revoked: list[set[int]] = []
        self.commit_errors: list[str] = []
        self.failure: BaseException | None = None
        self.stopping = threading.Event()
        self.lock = threading.Lock()

    def offsets(self) -> dict[int, int]:
        """partition -> next offset, as far as this consumer has committed."""
        with self.lock:
            return dict(self.done)

    def record(self, partition: int, offset: int) -> None:
        with self.lock:
            self.consumed.append((partition, offset))

    def committed(self, partition: int, offset: int) -> None:
        with self.lock:
            self.done[partition] = offset + 1

    def on_assigned(self, partitions: set[int]) -> None:
        self.assigned.append(partitions)

    def on_revoked(self, partitions: set[int]) -> None:
        if partitions and not self.stopping.is_set():  # not the consumer's own close
            self.revoked.append(partitions)

    def run(self) -> None:
        try:
            self.consume()
        except BaseException as exc:  # reported by the test thread
            self.failure = exc

    def consume(self) -> None:
        raise NotImplementedError


class ConfluentReader(Reader):
    def __init__(self, name: str, bootstrap: str, group: str, protocol: str) -> None:
        super().__init__(name)
        settings: dict[str, Any] = {
            "bootstrap.servers": bootstrap, "group.id": group, "client.id": name,
            "auto.offset.reset": "earliest", "enable.auto.commit": False, "group.protocol": protocol,
            "reconnect.backoff.max.ms": 500, "topic.metadata.refresh.interval.ms": 1000,
            **COORDINATOR_LOSS,  # this consumer commits while its coordinator is killed
        }
        if protocol == "classic":
            settings.update({"session.timeout.ms": SESSION_MS, "heartbeat.interval.ms": 300})
        self.consumer = Consumer(settings)

    def consume(self) -> None:
        consumer = self.consumer
        consumer.subscribe([TOPIC], on_assign=lambda _, tps: self.on_assigned({tp.partition for tp in tps}),
                           on_revoke=lambda _, tps: self.on_revoked({tp.partition for tp in tps}),
                           on_lost=lambda _, tps: self.on_revoked({tp.partition for tp in tps}))
        try:
            while not self.stopping.is_set():
                msg = consumer.poll(0.05)
                if msg is None or msg.error():
                    continue
                self.record(msg.partition(), msg.offset())
                self.stopping.wait(WORK_S)
                self.commit(msg)
        finally:
            consumer.close()

    def commit(self, msg: Any) -> None:
        """Commit this message before the next one; a coordinator that is down is waited out."""
        while not self.stopping.is_set():
            try:
                (result,) = self.consumer.commit(message=msg, asynchronous=False)
                error = result.error
            except KafkaException as exc:
                error = exc.args[0]
            if error is None:
                self.committed(msg.partition(), msg.offset())
                return
            self.commit_errors.append(error.name())
            if error.code() in REBALANCED:  # fail now: retrying would wait for a poll that serves the rebalance
                raise AssertionError(f"{self.name}: the coordinator forgot the member: {error}")
            self.stopping.wait(0.1)  # a retry backoff while the coordinator is down (heartbeats go on)


class AiokafkaReader(Reader):
    def __init__(self, name: str, bootstrap: str, group: str) -> None:
        super().__init__(name)
        self.bootstrap = bootstrap
        self.group = group

    def consume(self) -> None:
        asyncio.run(self._consume())

    async def _consume(self) -> None:
        from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
        from aiokafka.errors import (
            IllegalGenerationError,
            KafkaError,
            RebalanceInProgressError,
            UnknownMemberIdError,
        )

        reader = self

        class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
            async def on_partitions_revoked(self, revoked: Any) -> None:
                reader.on_revoked({tp.partition for tp in revoked})

            async def on_partitions_assigned(self, assigned: Any) -> None:
                reader.on_assigned({tp.partition for tp in assigned})

        consumer = AIOKafkaConsumer(bootstrap_servers=self.bootstrap, group_id=self.group, client_id=self.name,
                                    enable_auto_commit=False, auto_offset_reset="earliest",
                                    heartbeat_interval_ms=300, session_timeout_ms=SESSION_MS, retry_backoff_ms=100,
                                    metadata_max_age_ms=1000)
        consumer.subscribe([TOPIC], listener=Listener())
        await consumer.start()
        try:
            while not self.stopping.is_set():
                batches = await consumer.getmany(timeout_ms=50)
                for tp, records in batches.items():
                    for record in records:
                        self.record(tp.partition, record.offset)
                        await asyncio.sleep(WORK_S)
                        while not self.stopping.is_set():
                            try:
                                await consumer.commit({tp: record.offset + 1})
                                self.committed(tp.partition, record.offset)
                                break
                            except (IllegalGenerationError, UnknownMemberIdError, RebalanceInProgressError) as exc:
                                raise AssertionError(f"{self.name}: the coordinator forgot the member: {exc!r}") from exc
                            except KafkaError as exc:
                                self.commit_errors.append(type(exc).__name__)
                                await asyncio.sleep(0.1)  # a retry backoff while the coordinator is down
        finally:
            await consumer.stop()


def produce(bootstrap: str, start: int, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": False, "linger.ms": 5,
                         "reconnect.backoff.max.ms": 500})
    for i in range(start, start + count):
        producer.produce(TOPIC, key=str(i).encode(), partition=i % PARTITIONS)
    assert producer.flush(30) == 0


def committed(bootstrap: str, group: str) -> dict[int, int]:
    """What the group has committed, asked as a client would (FindCoordinator, then OffsetFetch)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        found = consumer.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=15)
    finally:
        consumer.close()
    return {tp.partition: tp.offset for tp in found if tp.offset >= 0}


async def find_coordinators(port: int, groups: list[str]) -> dict[str, tuple[int, int, int]]:
    """group -> (error, node id, port) from FindCoordinator v4 asked of the node at `port`."""
    client = await WireClient.connect(port)
    try:
        response = await client.request(build(load_request_schema(FIND_COORDINATOR, 4),
                                              {"key_type": 0, "coordinator_keys": groups}))
    finally:
        await client.close()
    return {c.key: (int(c.error_code), int(c.node_id), int(c.port)) for c in response.coordinators}


def expected(produced: int) -> dict[int, int]:
    """partition -> end offset after `produced` messages spread round-robin."""
    ends = {p: 0 for p in range(PARTITIONS)}
    for i in range(produced):
        ends[i % PARTITIONS] += 1
    return ends


def run_across_kills(tmp_path: Path, kills: list[int]) -> None:
    data = tmp_path / "data"
    create_topics(data, {TOPIC: PARTITIONS})
    groups = {"kip848": group_on_shard(1, 2, "kip848"), "classic": group_on_shard(0, 2, "classic"),
              "aiokafka": group_on_shard(1, 2, "aio")}
    server = Supervised(data).start()
    readers: list[Reader] = []
    try:
        bootstrap = server.bootstrap  # shard 0: the data plane's node
        readers = [ConfluentReader("kip848", bootstrap, groups["kip848"], "consumer"),
                   ConfluentReader("classic", bootstrap, groups["classic"], "classic"),
                   AiokafkaReader("aiokafka", bootstrap, groups["aiokafka"])]
        for reader in readers:
            reader.start()
        asked = {shard: asyncio.run(find_coordinators(server.shard_port(shard), list(groups.values())))
                 for shard in range(2)}
        assert all(error == 0 for answers in asked.values() for error, _, _ in answers.values()), asked

        def caught_up(ends: dict[int, int]) -> Callable[[], bool]:
            def check() -> bool:
                for reader in readers:
                    if reader.failure is not None:
                        raise AssertionError(f"{reader.name} failed") from reader.failure
                return all(reader.offsets() == ends for reader in readers)
            return check

        produced = 0
        for phase, kill in enumerate([None, *kills]):
            produce(bootstrap, produced, PER_PHASE)
            produced += PER_PHASE
            ends = expected(produced)
            if kill is not None:  # while every group is consuming and committing what was just produced
                floor = produced - PER_PHASE + 5
                wait_until(lambda floor=floor: all(sum(r.offsets().values()) >= floor for r in readers),
                           timeout=30, message=f"phase {phase}: every group consuming")
                acked = {reader.name: reader.offsets() for reader in readers}
                old = server.kill_shard(kill)
                server.wait_restarted(kill, old)
                after = {name: committed(bootstrap, group) for name, group in groups.items()}
                for name, offsets in acked.items():
                    assert all(after[name].get(p, 0) >= offset for p, offset in offsets.items()), \
                        f"{name}: acknowledged commits {offsets} lost across the SIGKILL of shard {kill}: {after[name]}"
                for shard in range(2):
                    answers = asyncio.run(find_coordinators(server.shard_port(shard), list(groups.values())))
                    assert answers == asked[shard], f"FindCoordinator at shard {shard} changed after shard {kill} restarted"
            try:
                wait_until(caught_up(ends), timeout=45, interval=0.05, message=f"phase {phase}: every group caught up")
            except AssertionError as exc:
                raise AssertionError(f"{exc}: ends {ends}; " + "; ".join(
                    f"{r.name} committed {r.offsets()} assigned {r.assigned} revoked {r.revoked} errors "
                    f"{r.commit_errors[-3:]}" for r in readers)) from None
            assert {name: committed(bootstrap, group) for name, group in groups.items()} == {name: ends for name in groups}
        for reader in readers:
            reader.stopping.set()
        for reader in readers:
            reader.join(30)
            assert reader.failure is None, f"{reader.name}: {reader.failure!r}"
    finally:
        for reader in readers:
            reader.stopping.set()
        server.stop()
    everything = sorted((p, o) for p, end in expected(produced).items() for o in range(end))
    for reader in readers:
        assert sorted(reader.consumed) == everything, f"{reader.name} did not consume every message exactly once"
        assert reader.assigned == [set(range(PARTITIONS))], f"{reader.name} was rebalanced: {reader.assigned}"
        assert reader.revoked == [], f"{reader.name} lost partitions before it closed: {reader.revoked}"


def test_three_groups_on_two_shards_consume_exactly_once_across_sigkills_of_shard_1_then_shard_0(tmp_path: Path) -> None:
    run_across_kills(tmp_path, [1, 0])


@pytest.mark.slow
def test_three_groups_consume_exactly_once_across_sigkills_of_each_shard(tmp_path: Path) -> None:
    run_across_kills(tmp_path, [0, 1, 0])
