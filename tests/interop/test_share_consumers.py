"""Share groups with a real share consumer (confluent-kafka's ``ShareConsumer``, librdkafka's
KIP-932 client), in both modes: the embedded server process, and a sidecar in front of a real
Apache Kafka 4.0 broker (which has no share groups: the coordinator serves them, reading the
records from the broker). Consumers share partitions, acknowledge each record once, release and
reject, die holding records (given back as their connection closes), and a restarted coordinator
hands out nothing it was told was acknowledged."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import AcknowledgeType

from tests.interop.share_support import (
    MODES,
    SIDECAR_TWIN_SLOW,
    Delivery,
    ShareSetup,
    all_records,
    consume_until,
    share_setup,
)
from tests.support.server import ServerProcess, http_get, wait_until

SETTINGS = {"share.auto.offset.reset": "earliest",
            # a batch cache far smaller than 10,000 records: reads pass it by or evict, and what
            # comes back is read again (from the upstream's leader in sidecar mode)
            "group.share.fetch.cache.max.bytes": "16384",
            # a SIGKILLed member keeps its share of the partitions until its session ends: short,
            # so the test is too
            "group.share.session.timeout.ms": "6000", "group.share.heartbeat.interval.ms": "1000"}
SHORT_LOCKS = {**SETTINGS, "group.share.record.lock.duration.ms": "2000"}


@pytest.fixture(params=MODES)
def queue(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ShareSetup]:
    with share_setup(request.param, tmp_path, request, SETTINGS) as setup:
        yield setup


@pytest.fixture(params=SIDECAR_TWIN_SLOW)
def short_locked_queue(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ShareSetup]:
    """Records locked for 2 s (Kafka's least): what a consumer dies holding comes back soon."""
    with share_setup(request.param, tmp_path, request, SHORT_LOCKS) as setup:
        yield setup


def share_everything(queue: ShareSetup, consumers: int, count: int) -> list[list[Delivery]]:
    """``consumers`` share consumers of one group read the topic's ``count`` records concurrently,
    then acknowledge what they hold and close; each one's deliveries, in the order it got them."""
    seen: list[list[Delivery]] = [[] for _ in range(consumers)]
    total = lambda: sum(len(s) for s in seen)  # noqa: E731
    members = [queue.consumer() for _ in seen]
    threads = [threading.Thread(target=consume_until, args=(c, lambda: total() >= count, s, 120))
               for c, s in zip(members, seen, strict=True)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for c in members:
        # The last poll's records are acknowledged (implicit mode) only at the next call: this one,
        # and every partition's acknowledgement must succeed.
        assert all(error is None for error in c.commit_sync().values())
        c.close()
    return seen


def nothing_acknowledged_comes_back_after_a_sigkill(queue: ShareSetup, count: int) -> None:
    """The coordinator is SIGKILLed and restarted over its data: new records prove the group is
    served; none of the old ones may come with them."""
    queue.server.kill()
    queue.server.start()
    queue.produce(20)
    after: list[Delivery] = []
    again = queue.consumer()
    consume_until(again, lambda: len(after) >= 20, after)
    again.close()
    assert sorted(after) == sorted({(p, o + count // 2) for p, o in all_records(20)})


def test_five_consumers_share_ten_thousand_records_each_acknowledged_once(queue: ShareSetup) -> None:
    count = 10_000
    queue.produce(count)
    per_consumer = share_everything(queue, 5, count)
    everything = [d for got in per_consumer for d in got]
    assert len(everything) == count and set(everything) == all_records(count)  # none twice, none missing
    assert sum(1 for got in per_consumer if got) >= 2, [len(got) for got in per_consumer]  # shared, not handed to one
    nothing_acknowledged_comes_back_after_a_sigkill(queue, count)


@pytest.mark.parametrize("queue", SIDECAR_TWIN_SLOW, indirect=True)
def test_released_records_come_back_and_rejected_ones_are_archived(queue: ShareSetup) -> None:
    count = 300
    queue.produce(count)
    consumer = queue.consumer("explicit", **{"share.acknowledgement.mode": "explicit"})
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
    consumer.subscribe([sys.argv[2]])
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


@pytest.fixture(params=SIDECAR_TWIN_SLOW)
def long_locked_queue(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ShareSetup]:
    """Records locked for two minutes, far longer than the test: only a closed connection can give
    them back in time."""
    with share_setup(request.param, tmp_path, request, {**SETTINGS, "group.share.record.lock.duration.ms": "120000"}) \
            as setup:
        yield setup


def test_records_held_by_a_consumer_killed_with_sigkill_come_back_at_once_not_after_the_lock(
        long_locked_queue: ShareSetup) -> None:
    queue = long_locked_queue
    queue.produce(100)
    released = share_metric(queue.server, "coordinator_share_records_released_total")
    with subprocess.Popen([sys.executable, "-c", HOLDER, queue.bootstrap, queue.topic], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, text=True) as holder:
        try:
            assert holder.stdout is not None
            held = {tuple(d) for d in json.loads(holder.stdout.readline())}
            assert held
            assert share_metric(queue.server, "coordinator_share_records", 'state="acquired"') >= len(held)
        finally:
            holder.kill()  # SIGKILL: no final ShareAcknowledge, no leave; only its connections close
            holder.wait(10)
    killed_at = time.monotonic()
    # Kafka's share session cache releases a connection's sessions when it closes: at once,
    # a record in the log like any release (the lock has two minutes left).
    wait_until(lambda: share_metric(queue.server, "coordinator_share_records", 'state="acquired"') == 0, timeout=5,
               message="the killed consumer's records released")
    assert time.monotonic() - killed_at < 5
    assert share_metric(queue.server, "coordinator_share_records_released_total") - released >= len(held)
    assert share_metric(queue.server, "coordinator_share_records_lock_expired_total") == 0
    seen: list[Delivery] = []
    other = queue.consumer("held")
    consume_until(other, lambda: len(set(seen)) >= 100, seen)
    other.close()
    assert set(seen) == all_records(100) and len(seen) == 100  # the held ones too, each once, long before the lock


@pytest.mark.parametrize("queue", SIDECAR_TWIN_SLOW, indirect=True)
def test_a_record_that_always_fails_is_archived_after_the_delivery_limit(queue: ShareSetup) -> None:
    queue.produce(40)
    consumer = queue.consumer("poison", **{"share.acknowledgement.mode": "explicit"})
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
    queue.produce(1, 1)
    consume_until(consumer, lambda: marker in seen, seen, on_message=fail_the_poison)
    consumer.commit_sync()
    consumer.close()
    assert marker in seen
    assert seen.count(poison) == 5  # group.share.delivery.count.limit, then archived


@pytest.mark.slow  # lock expiry with a real client also runs by default in tests/interop/test_group_configs.py
def test_records_held_by_a_frozen_consumer_come_back_after_the_lock(short_locked_queue: ShareSetup) -> None:
    # SIGSTOP: the consumer's connections stay open, so only the lock's end can give its records back.
    queue = short_locked_queue
    queue.produce(100)
    with subprocess.Popen([sys.executable, "-c", HOLDER, queue.bootstrap, queue.topic], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, text=True) as holder:
        try:
            assert holder.stdout is not None
            held = {tuple(d) for d in json.loads(holder.stdout.readline())}
            assert held
            holder.send_signal(signal.SIGSTOP)
            frozen_at = time.monotonic()
            seen: list[Delivery] = []
            other = queue.consumer("held")
            consume_until(other, lambda: held <= set(seen), seen)
            other.close()
            came_back = time.monotonic() - frozen_at
        finally:
            holder.kill()
            holder.wait(10)
    assert held <= set(seen)
    assert came_back >= 1.0  # not before the 2 s lock could have ended (minus the poll)
    assert share_metric(queue.server, "coordinator_share_records_lock_expired_total") >= len(held)

