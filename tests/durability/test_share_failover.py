"""Share groups across a standby takeover, in both modes: the owner is SIGKILLed while share
consumers (confluent-kafka's ``ShareConsumer``) consume and acknowledge, the standby tailing the
same data directory takes over its ports, and the consumers carry on against it. In the end every
record is finished (the group's start offsets reach the log ends, no lag), none whose acknowledgement
was answered is ever delivered again, and what a consumer held unacknowledged when the owner died
(a frozen consumer, so only the takeover can give its records back before their two-minute lock
ends) is delivered again.

Embedded mode: the standby takes the data plane with the directory. Sidecar mode: owner and standby
in front of the session's Apache Kafka 4.0 broker (the standby opens the same coordinator and
per-broker ports, where clients send ShareFetch to a partition's leader)."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from confluent_kafka import AcknowledgeType, KafkaException, ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.interop.share_support import MODES, PARTITIONS, Delivery, all_records, share_consumer
from tests.interop.test_share_consumers import HOLDER
from tests.sidecar.conftest import free_base_port, sidecar_process
from tests.support.clients import produce
from tests.support.server import ServerProcess, free_port, wait_until
from tests.support.wire import call, request

pytestmark = pytest.mark.interop

COUNT = 4000
SETTINGS = {"share.auto.offset.reset": "earliest",
            # far longer than the test: only the takeover can give the frozen holder's records back
            "group.share.record.lock.duration.ms": "120000",
            "group.share.session.timeout.ms": "6000", "group.share.heartbeat.interval.ms": "1000"}


@dataclass
class Pair:
    """An owner and the standby tailing its data directory, on the same ports."""
    active: ServerProcess
    standby: ServerProcess
    topic: str


@contextlib.contextmanager
def owner_and_standby(mode: str, tmp_path: Path, request_: pytest.FixtureRequest) -> Iterator[Pair]:
    port = free_port()
    if mode == "embedded":
        topic = "orders"
        make = lambda: ServerProcess(tmp_path / "data", overrides={"topics": f"{topic}:{PARTITIONS}", **SETTINGS},  # noqa: E731
                                     port=port)
    else:
        broker = request_.getfixturevalue("kafka_broker")  # skips with the reason without KAFKA_HOME
        topic = f"orders-{uuid.uuid4().hex[:8]}"
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)])[topic].result(30)
        base = free_base_port()
        make = lambda: sidecar_process(tmp_path / "sidecar", broker.bootstrap, base, port=port, **SETTINGS)  # noqa: E731
    active = make()
    standby = make()
    standby.log_path = tmp_path / "standby.log"
    try:
        active.start()
        standby.start(wait=False)
        yield Pair(active, standby, topic)
    finally:
        standby.stop()
        active.stop()


@dataclass
class Journal:
    """What the consumers saw, in one order across threads: deliveries, and acknowledgements the
    coordinator answered with success."""
    sequence: Iterator[int] = field(default_factory=itertools.count)
    delivered: list[tuple[int, Delivery]] = field(default_factory=list)
    acknowledged: list[tuple[int, Delivery]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def work(consumer: ShareConsumer, journal: Journal, stop: threading.Event) -> None:
    """Poll, accept each record, and commit after each poll; across the failover a poll or a commit
    may fail (its acknowledgements are then unknown: done, or released by the takeover)."""
    while not stop.is_set():
        try:
            messages = consumer.poll(0.5)
        except KafkaException as exc:
            journal.errors.append(str(exc))
            continue
        batch: list[Delivery] = []
        for message in messages:
            if message.error() is not None:
                journal.errors.append(str(message.error()))
                continue
            d = (message.partition(), message.offset())
            journal.delivered.append((next(journal.sequence), d))
            batch.append(d)
            consumer.acknowledge(message, AcknowledgeType.ACCEPT)
        if not batch:
            continue
        try:
            results = consumer.commit_sync(15)
        except KafkaException as exc:
            journal.errors.append(str(exc))
            continue
        done = {p for tp, error in results.items() if error is None for p in [tp.partition]}
        at = next(journal.sequence)
        journal.acknowledged += [(at, d) for d in batch if d[0] in done]


def close_all(workers: list[ShareConsumer], threads: list[threading.Thread], stop: threading.Event) -> None:
    stop.set()
    for t in threads:
        if t.is_alive():
            t.join(30)
    for c in workers:
        with contextlib.suppress(KafkaException):
            c.close()


def lags(port: int, topic: str) -> dict[int, tuple[int, int]]:
    """partition -> (start offset, lag) of group ``q`` by DescribeShareGroupOffsets v1."""
    answer = asyncio.run(call(port, request(90, 1, groups=[{"group_id": "q", "topics": [
        {"topic_name": topic, "partitions": list(range(PARTITIONS))}]}])))
    (group,) = answer.groups
    return {p.partition_index: (p.start_offset, p.lag) for t in group.topics for p in t.partitions}


@pytest.mark.parametrize("mode", MODES)
def test_share_consumers_carry_on_through_a_standby_takeover_and_nothing_acknowledged_comes_back(
        mode: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    with owner_and_standby(mode, tmp_path, request) as pair:
        produce(pair.active.bootstrap, pair.topic, COUNT, PARTITIONS)
        wait_until(lambda: "standby_waiting" in pair.standby.log(), message="the standby to be tailing")
        journal, stop = Journal(), threading.Event()
        workers = [share_consumer(pair.active.bootstrap, pair.topic, "q", **{"share.acknowledgement.mode": "explicit"})
                   for _ in range(2)]
        threads = [threading.Thread(target=work, args=(c, journal, stop)) for c in workers]
        with subprocess.Popen([sys.executable, "-c", HOLDER.replace('"held"', '"q"'), pair.active.bootstrap,
                               pair.topic], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) as holder, \
                contextlib.ExitStack() as cleanup:
            cleanup.callback(lambda: (holder.kill(), holder.wait(10)))
            cleanup.callback(close_all, workers, threads, stop)
            assert holder.stdout is not None
            held = {tuple(d) for d in json.loads(holder.stdout.readline())}
            assert held
            holder.send_signal(signal.SIGSTOP)  # holds its records unacknowledged, its connections open
            for t in threads:
                t.start()
            wait_until(lambda: len(journal.acknowledged) >= COUNT // 10, timeout=30,
                       message="acknowledgements before the kill")
            pair.active.kill()
            killed_at, before_kill = time.monotonic(), next(journal.sequence)
            wait_until(pair.standby.ready, timeout=20, interval=0.01, message="standby takeover")
            took_over = time.monotonic() - killed_at
            wait_until(lambda: lags(pair.standby.port, pair.topic) == {0: (COUNT // 2, 0), 1: (COUNT // 2, 0)},
                       timeout=60, interval=0.2, message="every record finished")
            finished = time.monotonic() - killed_at
        print(f"{mode}: takeover {took_over:.2f}s, all finished {finished:.2f}s after the kill; "
              f"{sum(1 for at, _ in journal.acknowledged if at < before_kill)} acknowledged before it, "
              f"{len(journal.delivered)} deliveries, {len(journal.errors)} client errors")

    acknowledged_at: dict[Delivery, int] = {}
    for at, d in journal.acknowledged:
        assert d not in acknowledged_at, f"{d} acknowledged twice"
        acknowledged_at[d] = at
    # Nothing whose acknowledgement was answered is delivered again, before the kill or after it.
    again = [(at, d) for at, d in journal.delivered if d in acknowledged_at and at > acknowledged_at[d]]
    assert not again, again[:5]
    assert any(at < before_kill for at in acknowledged_at.values())
    assert any(at > before_kill for at in acknowledged_at.values())  # the consumers carried on
    delivered = {d for _, d in journal.delivered}
    assert delivered | held == all_records(COUNT)
    # What the frozen consumer held unacknowledged came back once the standby took over.
    assert held <= delivered and held <= set(acknowledged_at)
