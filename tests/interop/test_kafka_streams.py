"""The real Kafka Streams 4.3.0 client (`group.protocol=streams`, StreamsGroupHeartbeat v0) against
the embedded coordinator: a stateful counting app (`java/StreamsCountApp.java`, a persistent store
with its changelog, at-least-once) whose counts must come out exact, with one instance and with
three instances across a SIGKILL of one of them and a restart of the coordinator. The changelog topic is created by the coordinator
as the heartbeat asks; Produce/Fetch/ListOffsets/OffsetCommit are the embedded data plane's."""

from __future__ import annotations

import struct
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from tests.support.java import (
    classpath,
    compile_java,
    require_streams_clients,
    require_trunk_clients,
)
from tests.support.server import ServerProcess, wait_until

APP_SOURCE = Path(__file__).parent / "java" / "StreamsCountApp.java"
KEYS = 30
PARTITIONS = 6
SERVER_SETTINGS = {
    "group.streams.heartbeat.interval.ms": "500",  # rebalances in about half a second, not five
    "group.streams.session.timeout.ms": "6000",  # a killed instance's tasks move after 6 s
    "topics": f"words:{PARTITIONS},counts:{PARTITIONS}",
}


@pytest.fixture(scope="module")
def app_classes(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    jars = require_streams_clients()
    return jars, compile_java(APP_SOURCE, jars, tmp_path_factory.mktemp("streams-app"))


@pytest.fixture(scope="module")
def trunk_app_classes(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    jars = require_trunk_clients()
    return jars, compile_java(APP_SOURCE, jars, tmp_path_factory.mktemp("streams-app-trunk"))


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    process = ServerProcess(tmp_path / "data", overrides=SERVER_SETTINGS)
    process.start()
    try:
        yield process
    finally:
        process.stop()


WARMUP_SETTINGS = {
    **SERVER_SETTINGS,
    "group.streams.acceptable.recovery.lag": "100",  # each task's store is ~2,000 records: a newcomer lags
    "group.streams.task.offset.interval.ms": "1000",
}


@pytest.fixture
def warmup_server(tmp_path: Path) -> Iterator[ServerProcess]:
    process = ServerProcess(tmp_path / "data", overrides=WARMUP_SETTINGS)
    process.start()
    try:
        yield process
    finally:
        process.stop()


class Instance:
    """One JVM running the counting app; its stdout (state changes) goes to a file."""

    def __init__(self, app: tuple[Path, Path], bootstrap: str, app_id: str, name: str, workdir: Path) -> None:
        jars, classes = app
        self.log = workdir / f"{name}.log"
        self._out = self.log.open("wb")
        self.proc = subprocess.Popen(
            ["java", "-Xmx256m", "-cp", f"{classpath(jars)}:{classes}", "StreamsCountApp", bootstrap, app_id,
             str(workdir / f"state-{name}"), name],
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
    """Reads the "counts" topic as it grows: the latest count of every key."""

    def __init__(self, bootstrap: str) -> None:
        self.latest: dict[str, int] = {}
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4()}",
                                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
        self.consumer.assign([TopicPartition("counts", p, 0) for p in range(PARTITIONS)])

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


def produce_words(bootstrap: str, per_key: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(KEYS * per_key):
        producer.produce("words", key=f"k{i % KEYS}", value=b"x")
    assert producer.flush(15) == 0


def all_committed(bootstrap: str, app_id: str) -> bool:
    """The app committed every record of "words" (so a SIGKILL now loses no processing)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    committed = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(app_id)])[app_id].result()
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "ends"})
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition("words", p), timeout=5)[1] for p in range(PARTITIONS)}
    finally:
        consumer.close()
    done = {tp.partition: tp.offset for tp in committed.topic_partitions if tp.topic == "words"}
    return all(done.get(p, 0) >= end for p, end in ends.items())


def test_one_instance_counts_every_key_exactly(app_classes: tuple[Path, Path], server: ServerProcess,
                                               tmp_path: Path) -> None:
    produce_words(server.bootstrap, per_key=10)
    counts = Counts(server.bootstrap)
    app = Instance(app_classes, server.bootstrap, f"count-{uuid.uuid4().hex[:8]}", "one", tmp_path)
    try:
        wait_until(lambda: counts.all_at(10), 60, message=f"counts at 10 (app: {app.states()})")
        assert set(counts.read().values()) == {10}
        assert "RUNNING" in app.states()
    finally:
        app.stop()
        counts.close()


@pytest.mark.slow
def test_three_instances_count_exactly_across_a_sigkill_and_a_coordinator_restart(app_classes: tuple[Path, Path], server: ServerProcess,
                                                        tmp_path: Path) -> None:
    app_id = f"count-{uuid.uuid4().hex[:8]}"
    produce_words(server.bootstrap, per_key=10)
    counts = Counts(server.bootstrap)
    instances = [Instance(app_classes, server.bootstrap, app_id, f"i{n}", tmp_path) for n in range(3)]
    try:
        wait_until(lambda: all(i.running() for i in instances) and counts.all_at(10), 90,
                   message=f"three instances running, counts at 10: {[i.states() for i in instances]}")
        wait_until(lambda: all_committed(server.bootstrap, app_id), 30, message="offsets committed")
        assert set(counts.read().values()) == {10}

        instances[1].kill()
        produce_words(server.bootstrap, per_key=10)
        # The survivors take the killed instance's tasks once its session times out, restore their
        # stores from the changelog and count on: every key exactly 20 (nothing lost, nothing twice,
        # because everything before the kill was committed).
        wait_until(lambda: counts.all_at(20), 90, message=f"counts at 20: {[i.states() for i in instances]}")
        wait_until(lambda: all_committed(server.bootstrap, app_id), 30, message="offsets committed")
        assert set(counts.read().values()) == {20}

        # The coordinator restarts (SIGTERM, same port and data): the group is replayed from its
        # log, the two survivors heartbeat on against it and keep counting.
        assert server.terminate() == 0
        server.start()
        produce_words(server.bootstrap, per_key=10)
        wait_until(lambda: counts.all_at(30), 90, message=f"counts at 30: {[i.states() for i in instances]}")
        assert set(counts.read().values()) == {30}
    finally:
        for instance in instances:
            instance.stop()
        counts.close()


STORE_KEYS = 12_000  # ~2,000 per task: far above the acceptable recovery lag of 100


def produce_distinct_keys(bootstrap: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for i in range(STORE_KEYS):
        producer.produce("words", key=f"key-{i}", value=b"x")
        if i % 2000 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0


def scale_out(app: tuple[Path, Path], server: ServerProcess, tmp_path: Path) -> tuple[Instance, Instance, Counts]:
    """One instance counts a store of STORE_KEYS keys, then a second one joins and takes its half."""
    app_id = f"scale-{uuid.uuid4().hex[:8]}"
    produce_distinct_keys(server.bootstrap)
    counts = Counts(server.bootstrap)
    first = Instance(app, server.bootstrap, app_id, "first", tmp_path)
    wait_until(lambda: counts.all_at(1, STORE_KEYS), 90, message=f"first counted: {first.states()}")
    second = Instance(app, server.bootstrap, app_id, "second", tmp_path)
    wait_until(lambda: len(first.tasks_now()[0]) == 3 and len(second.tasks_now()[0]) == 3
               and not second.tasks_now()[1], 90,
               message=f"balanced: first {first.task_lines()}, second {second.task_lines()}")
    return first, second, counts


@pytest.mark.slow
def test_trunk_client_on_v1_gets_warmups_that_are_promoted_once_caught_up(
        trunk_app_classes: tuple[Path, Path], warmup_server: ServerProcess, tmp_path: Path) -> None:
    first, second, counts = scale_out(trunk_app_classes, warmup_server, tmp_path)
    try:
        # No standby replicas are configured: every standby the newcomer ran was a warm-up. Each
        # task it runs now it first ran as a warm-up, while the first instance kept it active.
        lines = second.task_lines()
        moved = second.tasks_now()[0]
        for task in moved:
            became_active = next(i for i, (active, _) in enumerate(lines) if task in active)
            assert any(task in standby for _, standby in lines[:became_active]), (task, lines)
        assert len(moved) == 3 and moved.isdisjoint(first.tasks_now()[0])
        assert set(counts.read().values()) == {1}
    finally:
        second.stop()
        first.stop()
        counts.close()


@pytest.mark.slow
def test_the_4_3_client_on_v0_gets_its_tasks_at_once_without_warmups(
        app_classes: tuple[Path, Path], warmup_server: ServerProcess, tmp_path: Path) -> None:
    first, second, counts = scale_out(app_classes, warmup_server, tmp_path)
    try:
        assert all(not standby for _, standby in second.task_lines())  # v0 reports no offsets: no warm-up
        assert set(counts.read().values()) == {1}
    finally:
        second.stop()
        first.stop()
        counts.close()
