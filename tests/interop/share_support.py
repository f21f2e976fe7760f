"""What the share group interop tests share, in either mode: a coordinator serving share groups with
a 2-partition topic of its own, and confluent-kafka's ``ShareConsumer`` driven until a condition.

Modes (``MODES``): ``embedded``, the coordinator's own data plane holds the topic; ``sidecar``, the
coordinator in front of the session's Apache Kafka 4.0 broker (``kafka_broker``, which serves no
share groups), the topic created there under a name of its own (tests share that broker). Records
are produced through the coordinator in both (in sidecar mode it forwards them to the broker).
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.sidecar.conftest import free_base_port, sidecar_process
from tests.support.clients import produce
from tests.support.server import ServerProcess

MODES = ("embedded", "sidecar")
SIDECAR_TWIN_SLOW = ("embedded", pytest.param("sidecar", marks=pytest.mark.slow))
"""For a scenario whose sidecar path other default tests already drive (the five consumers, the
failover, tests/sidecar/test_share_groups.py): its sidecar twin runs with ``-m slow``, so the
default suite stays within its ten minutes."""
PARTITIONS = 2

Delivery = tuple[int, int]  # (partition, offset)


@dataclass
class ShareSetup:
    mode: str
    server: ServerProcess
    topic: str

    @property
    def bootstrap(self) -> str:
        return self.server.bootstrap

    def produce(self, count: int, partitions: int = PARTITIONS) -> None:
        """``count`` records, round-robin over the first ``partitions`` (record i to i % partitions)."""
        produce(self.server.bootstrap, self.topic, count, partitions)

    def consumer(self, group: str = "q", **config: str) -> ShareConsumer:
        return share_consumer(self.bootstrap, self.topic, group, **config)


@contextlib.contextmanager
def share_setup(mode: str, tmp_path: Path, request: pytest.FixtureRequest,
                overrides: dict[str, str]) -> Iterator[ShareSetup]:
    """A running coordinator in ``mode`` serving a fresh 2-partition topic, stopped at the end."""
    if mode == "embedded":
        server = ServerProcess(tmp_path / "data", overrides={"topics": f"orders:{PARTITIONS}", **overrides})
        topic = "orders"
    else:
        broker = request.getfixturevalue("kafka_broker")  # skips with the reason without KAFKA_HOME
        topic = f"orders-{uuid.uuid4().hex[:8]}"
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)])[topic].result(30)
        server = sidecar_process(tmp_path / "sidecar", broker.bootstrap, free_base_port(), **overrides)
    try:
        server.start()
        yield ShareSetup(mode, server, topic)
    finally:
        server.stop()


def share_consumer(bootstrap: str, topic: str, group: str = "q", **config: str) -> ShareConsumer:
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, **config})
    consumer.subscribe([topic])
    return consumer


def consume_until(consumer: ShareConsumer, done: Callable[[], bool], seen: list[Delivery], timeout: float = 60.0,
                  on_message: Callable[[object], None] | None = None) -> None:
    """Poll (librdkafka's poll blocks up to 0.5 s for records: no sleep) until ``done()``."""
    deadline = time.monotonic() + timeout
    while not done() and time.monotonic() < deadline:
        for message in consumer.poll(0.5):
            assert message.error() is None, message.error()
            seen.append((message.partition(), message.offset()))
            if on_message is not None:
                on_message(message)


def all_records(count: int, partitions: int = PARTITIONS) -> set[Delivery]:
    """Every (partition, offset) that ``ShareSetup.produce(count)`` writes to a fresh topic."""
    per = Counter(i % partitions for i in range(count))
    return {(p, o) for p, n in per.items() for o in range(n)}
