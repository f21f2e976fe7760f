"""Drivers for real client libraries in tests: confluent-kafka consumers polled round-robin with a
deadline, their assignments and rebalance callbacks recorded."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition


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
