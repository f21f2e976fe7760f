"""Share groups with a real share consumer (confluent-kafka's ``ShareConsumer``, librdkafka's
KIP-932 client) against the embedded server process: consumers share partitions, acknowledge each
record once, release and reject, die holding records (given back as their connection closes), and
a restarted coordinator hands out nothing it was told was acknowledged."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import AcknowledgeType, ShareConsumer

from tests.support.clients import produce
from tests.support.server import ServerProcess, http_get, running_server, wait_until

Delivery = tuple[int, int]  # (partition, offset)


def share_consumer(bootstrap: str, group: str = "q", **config: str) -> ShareConsumer:
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, **config})
    consumer.subscribe(["orders"])
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


def all_records(count: int, partitions: int = 2) -> set[Delivery]:
    per = Counter(i % partitions for i in range(count))
    return {(p, o) for p, n in per.items() for o in range(n)}


@pytest.fixture
def server(tmp_path: Path):
    with running_server(tmp_path, overrides={"topics": "orders:2", "share.auto.offset.reset": "earliest",
                                             "group.share.record.lock.duration.ms": "2000",
                                             # a SIGKILLed member keeps its share of the partitions
                                             # until its session ends: short, so the test is too
                                             "group.share.session.timeout.ms": "6000",
                                             "group.share.heartbeat.interval.ms": "1000"}) as instance:
        yield instance


def test_three_consumers_share_two_partitions_and_get_each_record_exactly_once(server: ServerProcess) -> None:
    count = 3000
    produce(server.bootstrap, "orders", count, 2)
    seen: list[list[Delivery]] = [[], [], []]
    total = lambda: sum(len(s) for s in seen)  # noqa: E731
    consumers = [share_consumer(server.bootstrap) for _ in seen]
    threads = [threading.Thread(target=consume_until, args=(c, lambda: total() >= count, s)) for c, s in zip(consumers, seen, strict=True)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for c in consumers:
        c.commit_sync()  # the last poll's records are acknowledged (implicit mode) only at the next call
        c.close()
    everything = [d for s in seen for d in s]
    assert len(everything) == count and set(everything) == all_records(count)  # none twice, none missing

    # The coordinator is SIGKILLed and restarted: nothing acknowledged is delivered again. New records
    # prove the group is served; none of the old ones may come with them.
    server.kill()
    server.start()
    produce(server.bootstrap, "orders", 20, 2)
    after: list[Delivery] = []
    again = share_consumer(server.bootstrap)
    consume_until(again, lambda: len(after) >= 20, after)
    again.close()
    assert sorted(after) == sorted({(p, o + count // 2) for p, o in all_records(20)})


def test_released_records_come_back_and_rejected_ones_are_archived(server: ServerProcess) -> None:
    count = 300
    produce(server.bootstrap, "orders", count, 2)
    consumer = share_consumer(server.bootstrap, "explicit", **{"share.acknowledgement.mode": "explicit"})
    decided: dict[Delivery, AcknowledgeType] = {}
    seen: list[Delivery] = []

    def decide(message: object) -> None:
        d = (message.partition(), message.offset())  # type: ignore[attr-defined]
        if d in decided:  # a redelivery: only released records may come back
            assert decided[d] == AcknowledgeType.RELEASE, f"{d} came back after {decided[d]}"
            decided[d] = AcknowledgeType.ACCEPT
        else:
            decided[d] = (AcknowledgeType.RELEASE if d[1] % 3 == 0 else
                          AcknowledgeType.REJECT if d[1] % 3 == 1 else AcknowledgeType.ACCEPT)
        consumer.acknowledge(message, decided[d])

    consume_until(consumer, lambda: len(decided) == count and AcknowledgeType.RELEASE not in decided.values(),
                  seen, on_message=decide)
    consumer.commit_sync()
    consumer.close()
    deliveries = Counter(seen)
    assert set(deliveries) == all_records(count)
    assert all(deliveries[d] == (2 if d[1] % 3 == 0 else 1) for d in deliveries), deliveries.most_common(3)


HOLDER = textwrap.dedent("""
    import json, sys
    from confluent_kafka import ShareConsumer
    consumer = ShareConsumer({"bootstrap.servers": sys.argv[1], "group.id": "held",
                              "share.acknowledgement.mode": "explicit"})
    consumer.subscribe(["orders"])
    held = []
    while not held:
        held = [(m.partition(), m.offset()) for m in consumer.poll(0.5) if m.error() is None]
    print(json.dumps(held), flush=True)
    sys.stdin.read()  # hold them (unacknowledged) until killed
""")


def share_metric(server: ServerProcess, name: str, labels: str = "") -> float:
    """One sample of /metrics (0 when absent)."""
    status, body = http_get(server.metrics_port, "/metrics")
    assert status == 200
    wanted = f"{name}{{{labels}}}" if labels else name
    for line in body.decode().splitlines():
        if line.startswith(wanted + " "):
            return float(line.split()[-1])
    return 0.0


def test_records_held_by_a_consumer_killed_with_sigkill_come_back_at_once_not_after_the_lock(
        tmp_path: Path) -> None:
    # A lock far longer than the test: only the closed connection can give the records back.
    overrides = {"topics": "orders:2", "share.auto.offset.reset": "earliest",
                 "group.share.record.lock.duration.ms": "120000", "group.share.session.timeout.ms": "6000",
                 "group.share.heartbeat.interval.ms": "1000"}
    with running_server(tmp_path, overrides=overrides) as server:
        produce(server.bootstrap, "orders", 100, 2)
        released = share_metric(server, "coordinator_share_records_released_total")
        with subprocess.Popen([sys.executable, "-c", HOLDER, server.bootstrap], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True) as holder:
            try:
                assert holder.stdout is not None
                held = {tuple(d) for d in json.loads(holder.stdout.readline())}
                assert held
                assert share_metric(server, "coordinator_share_records", 'state="acquired"') >= len(held)
            finally:
                holder.kill()  # SIGKILL: no final ShareAcknowledge, no leave; only its connections close
                holder.wait(10)
        killed_at = time.monotonic()
        # Kafka's share session cache releases a connection's sessions when it closes: at once,
        # a record in the log like any release (the lock has two minutes left).
        wait_until(lambda: share_metric(server, "coordinator_share_records", 'state="acquired"') == 0, timeout=5,
                   message="the killed consumer's records released")
        assert time.monotonic() - killed_at < 5
        assert share_metric(server, "coordinator_share_records_released_total") - released >= len(held)
        assert share_metric(server, "coordinator_share_records_lock_expired_total") == 0
        seen: list[Delivery] = []
        other = share_consumer(server.bootstrap, "held")
        consume_until(other, lambda: len(set(seen)) >= 100, seen)
        other.close()
        assert set(seen) == all_records(100) and len(seen) == 100  # the held ones too, each once, long before the lock


def test_a_record_that_always_fails_is_archived_after_the_delivery_limit(server: ServerProcess) -> None:
    produce(server.bootstrap, "orders", 40, 2)
    consumer = share_consumer(server.bootstrap, "poison", **{"share.acknowledgement.mode": "explicit"})
    poison: Delivery = (0, 0)
    seen: list[Delivery] = []

    def fail_the_poison(message: object) -> None:
        d = (message.partition(), message.offset())  # type: ignore[attr-defined]
        consumer.acknowledge(message, AcknowledgeType.RELEASE if d == poison else AcknowledgeType.ACCEPT)

    consume_until(consumer, lambda: seen.count(poison) >= 5 and set(seen) == all_records(40), seen,
                  on_message=fail_the_poison)
    # Redeliveries are acquired before anything newer of the partition: were the poison still
    # available it would come back before (or with) a record produced now.
    marker = (0, 20)
    produce(server.bootstrap, "orders", 1, 1)
    consume_until(consumer, lambda: marker in seen, seen, on_message=fail_the_poison)
    consumer.commit_sync()
    consumer.close()
    assert marker in seen
    assert seen.count(poison) == 5  # group.share.delivery.count.limit, then archived
