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
import textwrap
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from confluent_kafka import AcknowledgeType, KafkaException, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.interop.share_support import MODES, PARTITIONS, Delivery, all_records, share_consumer
from tests.interop.test_share_java import share_reader  # noqa: F401 - the fixture, compiled once per module
from tests.sidecar.conftest import free_base_port, sidecar_process
from tests.support.server import ServerProcess, free_port, wait_until
from tests.support.wire import call, request

pytestmark = pytest.mark.interop

COUNT = 4000
SETTINGS = {"share.auto.offset.reset": "earliest",
            # far longer than the test: only the takeover can give the frozen holder's records back
            "group.share.record.lock.duration.ms": "120000",
            # the frozen holder stays a member throughout (it shares each partition with a consumer
            # that polls, so it holds nothing up but its own records)
            "group.share.session.timeout.ms": "60000", "group.share.heartbeat.interval.ms": "1000"}
POLL = "200"
"""Records per poll (ShareFetch MaxRecords), over batches of 100 (a share fetch acquires whole
batches): many rounds of fetch and commit, so the kill lands among them, and a holder that leaves
the rest of each partition to the others."""

HOLDER = textwrap.dedent("""
    import json, sys
    from confluent_kafka import ShareConsumer
    consumer = ShareConsumer({"bootstrap.servers": sys.argv[1], "group.id": "q", "max.poll.records": sys.argv[3],
                              "share.acknowledgement.mode": "explicit"})
    consumer.subscribe([sys.argv[2]])
    held = []
    while not held:
        held = [(m.partition(), m.offset()) for m in consumer.poll(0.5) if m.error() is None]
    print(json.dumps(held), flush=True)
    sys.stdin.read()  # hold them (unacknowledged) until frozen, then killed
""")


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


class ConfluentWorkers:
    """Two confluent-kafka share consumers, each polling in a thread of its own (``work``)."""

    def __init__(self, bootstrap: str, topic: str, journal: Journal) -> None:
        self.stop_event = threading.Event()
        self.consumers = [share_consumer(bootstrap, topic, "q", **{"share.acknowledgement.mode": "explicit",
                                                                   "max.poll.records": POLL}) for _ in range(2)]
        self.threads = [threading.Thread(target=work, args=(c, journal, self.stop_event)) for c in self.consumers]
        for t in self.threads:
            t.start()

    def stop(self) -> None:
        self.stop_event.set()
        for t in self.threads:
            t.join(30)
        for c in self.consumers:
            with contextlib.suppress(KafkaException):
                c.close()


class JavaWorkers:
    """Two of Apache Kafka's ``KafkaShareConsumer`` (``ShareReader``'s commit mode): what they
    print goes to the journal as it is read, so a delivery is journaled no earlier than it happened,
    and an acknowledgement no earlier than it was answered."""

    def __init__(self, classpath: str, bootstrap: str, topic: str, journal: Journal) -> None:
        self.journal = journal
        self.procs = [subprocess.Popen(["java", "-cp", classpath, "ShareReader", bootstrap, "q", topic, "commit"],
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                       text=True) for _ in range(2)]
        self.threads = [threading.Thread(target=self._collect, args=(p,), daemon=True) for p in self.procs]
        for t in self.threads:
            t.start()

    def _collect(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            *ok, partition, offset = line.strip().split(":")
            entry = (next(self.journal.sequence), (int(partition), int(offset)))
            (self.journal.acknowledged if ok else self.journal.delivered).append(entry)

    def stop(self) -> None:
        for proc in self.procs:
            assert proc.stdin is not None
            with contextlib.suppress(BrokenPipeError):
                proc.stdin.write("stop\n")
                proc.stdin.flush()
        for proc, thread in zip(self.procs, self.threads, strict=True):
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
            thread.join(10)
            for stream in (proc.stdin, proc.stdout):
                if stream is not None:
                    stream.close()


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
        through_a_takeover(pair, mode, lambda journal: ConfluentWorkers(pair.active.bootstrap, pair.topic, journal))


@pytest.mark.slow  # 17 s a mode; the confluent twin above runs by default in both modes
@pytest.mark.parametrize("mode", MODES)
def test_java_share_consumers_carry_on_through_a_standby_takeover_and_nothing_acknowledged_comes_back(
        mode: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    classpath = request.getfixturevalue("share_reader")  # skips with the reason without the 4.3.0 clients or a JDK
    with owner_and_standby(mode, tmp_path, request) as pair:
        through_a_takeover(pair, mode, lambda journal: JavaWorkers(classpath, pair.active.bootstrap, pair.topic,
                                                                   journal))


def through_a_takeover(pair: Pair, mode: str, start_workers: Callable[[Journal], ConfluentWorkers | JavaWorkers]
                       ) -> None:
    """The scenario the module describes, with the consumers ``start_workers`` starts; then what
    must hold of everything they saw."""
    producer = Producer({"bootstrap.servers": pair.active.bootstrap, "linger.ms": 5, "batch.num.messages": 100})
    for i in range(COUNT):  # record i to partition i % 2, as all_records has them
        producer.produce(pair.topic, value=f"value-{i}".encode(), partition=i % PARTITIONS)
    assert producer.flush(30) == 0
    wait_until(lambda: "standby_waiting" in pair.standby.log(), message="the standby to be tailing")
    journal = Journal()
    with subprocess.Popen([sys.executable, "-c", HOLDER, pair.active.bootstrap, pair.topic, POLL],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) as holder, \
            contextlib.ExitStack() as cleanup:
        cleanup.callback(lambda: (holder.kill(), holder.wait(10)))
        assert holder.stdout is not None
        held = {tuple(d) for d in json.loads(holder.stdout.readline())}
        assert held, "nothing held"
        holder.send_signal(signal.SIGSTOP)  # holds its records unacknowledged, its connections open
        workers = start_workers(journal)
        cleanup.callback(workers.stop)
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
    # What the frozen consumer held unacknowledged came back once the standby took over, not before.
    assert held <= delivered and held <= set(acknowledged_at)
    assert all(at > before_kill for at, d in journal.delivered if d in held)
