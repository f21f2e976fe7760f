"""Zero-infrastructure end to end: real producers write keyed messages, a consumer group reads them
while committing, and a member restarted mid-way resumes from its committed offsets.

Exactly-once is asserted on the committed view: a message counts as consumed once the commit that
covers it succeeded (a commit refused during a rebalance is retried while the partition is still
owned; otherwise the next owner delivers the message again from the last commit).
Every produced (partition, offset) must be consumed exactly once in that view: a partition owned by
two members at once, or a lost commit, would break it.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from tests.support.server import ServerProcess

pytestmark = pytest.mark.interop

TOPIC = "keyed"
PARTITIONS = 6
TOTAL = 10_000


@pytest.fixture
def server(tmp_path):
    process = ServerProcess(tmp_path / "data", overrides={"topics": f"{TOPIC}:{PARTITIONS}",
                                                          "group.consumer.heartbeat.interval.ms": "500",
                                                          "group.consumer.min.heartbeat.interval.ms": "500"})
    process.start()
    try:
        yield process
    finally:
        process.stop()


def produce_with_both_clients(bootstrap: str) -> dict[tuple[int, int], bytes]:
    """Half with confluent-kafka, half with aiokafka; returns (partition, offset) -> key."""
    written: dict[tuple[int, int], bytes] = {}
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": False, "linger.ms": 10,
                         "compression.type": "lz4"})

    def delivered(err, msg) -> None:
        assert err is None, err
        written[(msg.partition(), msg.offset())] = msg.key()

    for i in range(TOTAL // 2):
        producer.produce(TOPIC, key=f"ck-{i}".encode(), value=f"v{i}".encode(), on_delivery=delivered)
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0

    async def aio() -> None:
        from aiokafka import AIOKafkaProducer

        aio_producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=10, compression_type="gzip")
        await aio_producer.start()
        try:
            futures = [await aio_producer.send(TOPIC, key=f"aio-{i}".encode(), value=b"v") for i in range(TOTAL // 2)]
            for i, future in enumerate(futures):
                meta = await future
                written[(meta.partition, meta.offset)] = f"aio-{i}".encode()
        finally:
            await aio_producer.stop()

    asyncio.run(aio())
    assert len(written) == TOTAL
    return written


class CommittingMember:
    def __init__(self, bootstrap: str, name: str, protocol_config: dict[str, str]) -> None:
        self.name = name
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "e2e", "client.id": name,
                                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                                  **protocol_config})
        self.consumer.subscribe([TOPIC])
        self.committed: list[tuple[int, int, bytes]] = []
        self.pending: list[tuple[int, int, bytes]] = []
        self.last_error: str | None = None

    def step(self) -> None:
        """Consume a batch, then commit everything pending for partitions still owned.

        A commit refused during a rebalance (the request or one partition) is retried on the next
        step; pending messages of a partition that moved away are dropped, because its next owner
        starts from the last successful commit and will deliver them again."""
        self.pending.extend((m.partition(), m.offset(), m.key())
                            for m in self.consumer.consume(num_messages=500, timeout=0.05) if not m.error())
        owned = {tp.partition for tp in self.consumer.assignment()}
        self.pending = [entry for entry in self.pending if entry[0] in owned]
        if not self.pending:
            return
        ends: dict[int, int] = {}
        for partition, offset, _ in self.pending:
            ends[partition] = max(ends.get(partition, 0), offset + 1)
        try:
            results = self.consumer.commit(offsets=[TopicPartition(TOPIC, p, o) for p, o in ends.items()],
                                           asynchronous=False)
        except KafkaException as exc:
            self.last_error = str(exc)
            return
        # A synchronous commit raises only when the request failed as a whole; a partition the
        # coordinator refused (e.g. STALE_MEMBER_EPOCH while the member's epoch moves on) comes
        # back with its own error and stays pending.
        refused = {tp.partition for tp in results or () if tp.error is not None}
        if refused:
            self.last_error = "; ".join(str(tp.error) for tp in results or () if tp.error is not None)
        self.committed.extend(entry for entry in self.pending if entry[0] not in refused)
        self.pending = [entry for entry in self.pending if entry[0] in refused]

    def close(self) -> None:
        self.consumer.close()


PROTOCOL_CONFIG = {
    "classic": {"partition.assignment.strategy": "cooperative-sticky", "session.timeout.ms": "10000",
                "heartbeat.interval.ms": "300"},
    "consumer": {"group.protocol": "consumer"},
}


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_every_message_consumed_exactly_once_across_a_restart(server: ServerProcess, protocol: str) -> None:
    written = produce_with_both_clients(server.bootstrap)
    config = PROTOCOL_CONFIG[protocol]
    members = [CommittingMember(server.bootstrap, f"m{i}", config) for i in range(3)]
    finished: list[CommittingMember] = []
    restarted = False
    successor: CommittingMember | None = None
    deadline = time.monotonic() + 90
    try:
        while True:
            if successor is not None:
                # The others hold still (paused, still polling so the group can rebalance) until the
                # successor owns partitions, so it takes part instead of racing them to the end.
                if successor.consumer.assignment():
                    for member in members:
                        member.consumer.resume(member.consumer.assignment())
                    successor = None
                else:
                    for member in members[:-1]:
                        member.consumer.pause(member.consumer.assignment())
            for member in members:
                member.step()
            consumed = sum(len(m.committed) for m in members + finished)
            if not restarted and consumed >= TOTAL // 3:
                # Stop a member mid-way and start its successor under the same name.
                leaving = members.pop(0)
                leaving.close()
                finished.append(leaving)
                successor = CommittingMember(server.bootstrap, leaving.name, config)
                members.append(successor)
                restarted = True
            if consumed >= TOTAL:
                break
            assert time.monotonic() < deadline, (
                f"only {consumed} of {TOTAL} consumed; "
                + "; ".join(f"{m.name}: owns {sorted(tp.partition for tp in m.consumer.assignment())}, "
                            f"pending {len(m.pending)}, last error {m.last_error}" for m in members))
    finally:
        for member in members:
            member.close()
    everyone = members + finished
    seen = [(p, o) for m in everyone for p, o, _ in m.committed]
    twice = sorted({entry for entry in seen if seen.count(entry) > 1}) if len(seen) != len(set(seen)) else []
    assert not twice, "committed twice: " + "; ".join(
        f"{entry} by {[m.name for m in everyone if any((p, o) == entry for p, o, _ in m.committed)]}"
        for entry in twice[:5])
    lost = set(written) - set(seen)
    assert not lost, f"{len(lost)} messages lost, in partitions {sorted({p for p, _ in lost})}"
    keys = {(p, o): k for m in everyone for p, o, k in m.committed}
    assert keys == written
    assert restarted
    assert all(m.committed for m in members), "a member took no part: " + ", ".join(
        f"{m.name} committed {len(m.committed)}" for m in everyone)
