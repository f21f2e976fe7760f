"""The stateful Kafka Streams counting app the streams tests run (`java/StreamsCountApp.java`,
`group.protocol=streams`, at-least-once), in embedded mode (`tests/interop/test_kafka_streams.py`)
and in sidecar mode in front of Apache Kafka (`tests/sidecar/test_kafka_streams.py`): one JVM per
instance (`Instance`), the words it counts (`produce_words`), the counts it wrote (`Counts`) and
whether it committed everything (`all_committed`). Tests that share one broker give each app
topics of their own (`Topics`)."""

from __future__ import annotations

import struct
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.java import classpath, compile_java

APP_SOURCE = Path(__file__).parent / "java" / "StreamsCountApp.java"
KEYS = 30
PARTITIONS = 6


@dataclass(frozen=True)
class Topics:
    words: str = "words"
    counts: str = "counts"
    partitions: int = PARTITIONS

    @classmethod
    def unique(cls, partitions: int = PARTITIONS) -> Topics:
        suffix = uuid.uuid4().hex[:8]
        return cls(f"words-{suffix}", f"counts-{suffix}", partitions)

    def create(self, bootstrap: str) -> None:
        """Create both topics (on a real broker, where they are not declared up front)."""
        admin = AdminClient({"bootstrap.servers": bootstrap})
        futures = admin.create_topics([NewTopic(t, self.partitions, 1) for t in (self.words, self.counts)])
        for future in futures.values():
            future.result(30)


DEFAULT_TOPICS = Topics()


def compile_app(jars: Path, out: Path) -> tuple[Path, Path]:
    """(jars, classes) of the app compiled against the client jars in `jars`."""
    return jars, compile_java(APP_SOURCE, jars, out)


class Instance:
    """One JVM running the counting app; its stdout (state changes) goes to a file."""

    def __init__(self, app: tuple[Path, Path], bootstrap: str, app_id: str, name: str, workdir: Path,
                 topics: Topics = DEFAULT_TOPICS) -> None:
        jars, classes = app
        self.log = workdir / f"{name}.log"
        self._out = self.log.open("wb")
        self.proc = subprocess.Popen(
            ["java", "-Xmx256m", "-cp", f"{classpath(jars)}:{classes}", "StreamsCountApp", bootstrap, app_id,
             str(workdir / f"state-{name}"), name, topics.words, topics.counts],
            stdin=subprocess.PIPE, stdout=self._out, stderr=subprocess.STDOUT)

    def states(self) -> list[str]:
        return [line[6:] for line in self.log.read_text(errors="replace").splitlines() if line.startswith("STATE ")]

    def running(self) -> bool:
        states = self.states()
        return bool(states) and states[-1] == "RUNNING"

    def task_lines(self) -> list[tuple[set[str], set[str]]]:
        """Every (active, standby) set of tasks the instance ran, in order."""
        out = []
        for line in self.log.read_text(errors="replace").splitlines():
            if line.startswith("TASKS active=["):
                active, _, standby = line[len("TASKS active=["):].partition("] standby=[")
                out.append(({t for t in active.split(", ") if t}, {t for t in standby.rstrip("]").split(", ") if t}))
        return out

    def tasks_now(self) -> tuple[set[str], set[str]]:
        lines = self.task_lines()
        return lines[-1] if lines else (set(), set())

    def kill(self) -> None:
        self.proc.kill()  # SIGKILL: no leave heartbeat, no commit, no flush
        self.proc.wait(10)

    def stop(self) -> None:
        assert self.proc.stdin is not None
        if self.proc.poll() is None:
            self.proc.stdin.close()  # the app closes itself (leaves the group)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.kill()
        self.proc.stdin.close()
        self._out.close()


class Counts:
    """Reads the counts topic as it grows: the latest count of every key."""

    def __init__(self, bootstrap: str, topics: Topics = DEFAULT_TOPICS) -> None:
        self.latest: dict[str, int] = {}
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4()}",
                                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
        self.consumer.assign([TopicPartition(topics.counts, p, 0) for p in range(topics.partitions)])

    def read(self) -> dict[str, int]:
        for message in self.consumer.consume(1000, timeout=0.2):
            if message.error() is None and message.key() is not None:
                self.latest[message.key().decode()] = struct.unpack(">q", message.value())[0]
        return self.latest

    def all_at(self, count: int, keys: int = KEYS) -> bool:
        latest = self.read()
        return len(latest) == keys and all(v >= count for v in latest.values())

    def close(self) -> None:
        self.consumer.close()


def produce_words(bootstrap: str, per_key: int, topics: Topics = DEFAULT_TOPICS) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(KEYS * per_key):
        producer.produce(topics.words, key=f"k{i % KEYS}", value=b"x")
    assert producer.flush(15) == 0


def all_committed(bootstrap: str, app_id: str, topics: Topics = DEFAULT_TOPICS) -> bool:
    """The app committed every record of the words topic (so a SIGKILL now loses no processing)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    committed = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(app_id)])[app_id].result()
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "ends"})
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topics.words, p), timeout=5)[1]
                for p in range(topics.partitions)}
    finally:
        consumer.close()
    done = {tp.partition: tp.offset for tp in committed.topic_partitions if tp.topic == topics.words}
    return all(done.get(p, 0) >= end for p, end in ends.items())


def produce_distinct_keys(bootstrap: str, keys: int, topic: str = DEFAULT_TOPICS.words) -> None:
    """One record for each of ``keys`` keys: a store (and changelog) of ``keys`` entries."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for i in range(keys):
        producer.produce(topic, key=f"key-{i}", value=b"x")
        if i % 2000 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0


def warmed_up_first(instance: Instance) -> set[str]:
    """The active tasks the instance runs now that it did not run as a standby (a warm-up, when no
    standby replicas are configured) before it first ran them active."""
    lines = instance.task_lines()
    cold = set()
    for task in instance.tasks_now()[0]:
        became_active = next(i for i, (active, _) in enumerate(lines) if task in active)
        if not any(task in standby for _, standby in lines[:became_active]):
            cold.add(task)
    return cold
