"""Drivers for real client libraries in tests: confluent-kafka consumers polled round-robin with a
deadline, their assignments and rebalance callbacks recorded."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

COORDINATOR_LOSS: dict[str, Any] = {"fetch.wait.max.ms": 100, "retry.backoff.ms": 500}
"""Settings for a confluent-kafka consumer that commits while its coordinator is SIGKILLed,
restarted or replaced by a standby, against a librdkafka livelock (2.16; confluentinc/librdkafka#3645).

An OffsetCommit in flight when its coordinator dies fails, marks the coordinator dead (which clears
the coordinator broker handle's address, so this happens whether the coordinator comes back at the
same address or another) and is queued for a retry on that handle. When FindCoordinator answers,
the handle's address is set again, and the change closes its connection and fails every request in
its output queue: the commit fails again, marks the coordinator dead again and is queued again,
never sent (a retry of a request never sent is not counted, and OffsetCommit has no overall
timeout). Meanwhile no heartbeat reaches the new coordinator, so the member's session runs out. It
gets out only when FindCoordinator answers while the commit still waits out its retry backoff
(retry queues are not failed). FindCoordinator goes to a broker on the connection that carries the
consumer's long-poll Fetch, and a node answers a connection's requests in order (Kafka's rule), so
with librdkafka's defaults (Fetch waits 500 ms, retries back off 100 ms) the answer nearly always
comes after the backoff: in tests/shards/test_clients_across_shard_kill.py a KIP-848 group stayed
stuck 3 to 46 s after its shard was back. A Fetch wait well inside the backoff lets the first answer
after the restart end the loop. The cost: an idle consumer fetches ten times a second, and its other
retries back off longer."""


@dataclass
class Member:
    """A confluent-kafka consumer with its rebalance history."""

    name: str
    consumer: Consumer
    assigned_events: list[set[int]] = field(default_factory=list)
    revoked_events: list[set[int]] = field(default_factory=list)
    consumed: list[tuple[int, int, bytes | None]] = field(default_factory=list)
    closed: bool = False

    def assignment(self) -> set[int]:
        return {tp.partition for tp in self.consumer.assignment()}

    def revoked(self) -> set[int]:
        return set().union(*self.revoked_events) if self.revoked_events else set()

    def close(self) -> None:
        if not self.closed:
            self.consumer.close()
            self.closed = True


def make_member(bootstrap: str, group: str, name: str, topics: Iterable[str], **config: Any) -> Member:
    settings: dict[str, Any] = {
        "bootstrap.servers": bootstrap, "group.id": group, "client.id": name,
        "auto.offset.reset": "earliest", "enable.auto.commit": False,
        "topic.metadata.refresh.interval.ms": 1000,
    }
    if config.get("group.protocol", "classic") == "classic":
        # Consumer-group (KIP-848) timeouts are the broker's; librdkafka refuses these there.
        settings.update({"session.timeout.ms": 10000, "heartbeat.interval.ms": 300})
    settings.update(config)
    member = Member(name, Consumer(settings))

    def on_assign(consumer: Consumer, partitions: list[TopicPartition]) -> None:
        member.assigned_events.append({tp.partition for tp in partitions})

    def on_revoke(consumer: Consumer, partitions: list[TopicPartition]) -> None:
        member.revoked_events.append({tp.partition for tp in partitions})

    member.consumer.subscribe(list(topics), on_assign=on_assign, on_revoke=on_revoke)
    return member


def poll_until(members: list[Member], condition: Callable[[], bool], timeout: float = 45.0,
               message: str = "condition") -> None:
    """Poll every open member in turn until `condition()` holds; fail at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        for member in members:
            if member.closed:
                continue
            msg = member.consumer.poll(0.05)
            if msg is not None and not msg.error():
                member.consumed.append((msg.partition(), msg.offset(), msg.key()))
        if condition():
            return
        if time.monotonic() > deadline:
            state = {m.name: sorted(m.assignment()) for m in members if not m.closed}
            raise AssertionError(f"timed out waiting for {message}; assignments: {state}")


def owns_each_exactly_once(members: list[Member], partitions: int) -> bool:
    live = [m for m in members if not m.closed]
    owned = [p for m in live for p in m.assignment()]
    return sorted(owned) == list(range(partitions)) and all(m.assignment() for m in live)


def produce(bootstrap: str, topic: str, count: int, partitions: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": False, "linger.ms": 5})
    for i in range(count):
        producer.produce(topic, key=str(i).encode(), value=f"value-{i}".encode(), partition=i % partitions)
    assert producer.flush(30) == 0
