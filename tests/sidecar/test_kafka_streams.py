"""The real Kafka Streams 4.3.0 client (`group.protocol=streams`) through the coordinator in sidecar
mode in front of Apache Kafka 4.0, which serves no streams groups itself: the stateful counting app
of `tests/support/streams_app.py`, its group served by the sidecar, its data, its changelog (created
by the sidecar on Kafka as the heartbeat asks) and its mirrored offsets on Kafka. Counts come out
exact (every record was committed before each disruption): with one instance, and with three
across a SIGKILL of one of them and a restart of the coordinator. The trunk client (v1, task
offsets) scales out with warm-ups restored from the changelog on Kafka, then promoted."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource

from tests.support.java import require_streams_clients, require_trunk_clients
from tests.support.kafka import KafkaBroker
from tests.support.server import ServerProcess, wait_until
from tests.support.streams_app import (
    Counts,
    Instance,
    Topics,
    all_committed,
    compile_app,
    produce_distinct_keys,
    produce_words,
    warmed_up_first,
)

from .conftest import free_base_port, sidecar_process

pytestmark = pytest.mark.interop

SIDECAR_SETTINGS = {
    "group.streams.heartbeat.interval.ms": "500",  # rebalances in about half a second, not five
    "group.streams.session.timeout.ms": "6000",  # a killed instance's tasks move after 6 s
}


@pytest.fixture(scope="module")
def app_classes(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return compile_app(require_streams_clients(), tmp_path_factory.mktemp("streams-app"))


@pytest.fixture
def sidecar(kafka_broker: KafkaBroker, tmp_path: Path) -> Iterator[ServerProcess]:
    server = sidecar_process(tmp_path / "sidecar", kafka_broker.bootstrap, free_base_port(), **SIDECAR_SETTINGS)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def changelog_on_kafka(kafka: KafkaBroker, app_id: str) -> tuple[int, str] | None:
    """(partitions, cleanup.policy) of the app's changelog as Kafka itself describes it."""
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    name = f"{app_id}-counts-store-changelog"
    topic = admin.list_topics(name, timeout=10).topics.get(name)
    if topic is None or topic.error is not None:
        return None
    described = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, name)])
    configs = next(iter(described.values())).result(15)
    return len(topic.partitions), configs["cleanup.policy"].value


def test_one_instance_counts_through_the_sidecar_its_changelog_created_on_kafka(
        app_classes: tuple[Path, Path], sidecar: ServerProcess, kafka_broker: KafkaBroker, tmp_path: Path) -> None:
    topics = Topics.unique()
    topics.create(kafka_broker.bootstrap)
    app_id = f"count-{uuid.uuid4().hex[:8]}"
    produce_words(kafka_broker.bootstrap, per_key=10, topics=topics)
    counts = Counts(kafka_broker.bootstrap, topics)
    app = Instance(app_classes, sidecar.bootstrap, app_id, "one", tmp_path, topics)
    try:
        wait_until(lambda: counts.all_at(10), 60, message=f"counts at 10 (app: {app.states()})")
        assert set(counts.read().values()) == {10}
        assert "RUNNING" in app.states()
        assert changelog_on_kafka(kafka_broker, app_id) == (topics.partitions, "compact")
    finally:
        app.stop()
        counts.close()


@pytest.mark.slow
def test_three_instances_count_exactly_across_a_sigkill_and_a_sidecar_restart(
        app_classes: tuple[Path, Path], sidecar: ServerProcess, kafka_broker: KafkaBroker, tmp_path: Path) -> None:
    topics = Topics.unique()
    topics.create(kafka_broker.bootstrap)
    app_id = f"count-{uuid.uuid4().hex[:8]}"
    produce_words(kafka_broker.bootstrap, per_key=10, topics=topics)
    counts = Counts(kafka_broker.bootstrap, topics)
    instances = [Instance(app_classes, sidecar.bootstrap, app_id, f"i{n}", tmp_path, topics) for n in range(3)]

    def committed() -> bool:  # the group's offsets are the sidecar's (mirrored to Kafka afterwards)
        return all_committed(sidecar.bootstrap, app_id, topics)

    try:
        wait_until(lambda: all(i.running() for i in instances) and counts.all_at(10), 90,
                   message=f"three instances running, counts at 10: {[i.states() for i in instances]}")
        wait_until(committed, 30, message="offsets committed")
        assert set(counts.read().values()) == {10}
        assert changelog_on_kafka(kafka_broker, app_id) == (topics.partitions, "compact")

        instances[1].kill()
        produce_words(kafka_broker.bootstrap, per_key=10, topics=topics)
        # The survivors take the killed instance's tasks once its session times out, restore their
        # stores from the changelog on Kafka and count on: every key exactly 20.
        wait_until(lambda: counts.all_at(20), 90, message=f"counts at 20: {[i.states() for i in instances]}")
        wait_until(committed, 30, message="offsets committed")
        assert set(counts.read().values()) == {20}

        # The sidecar restarts (SIGTERM, same ports and data): the group is replayed from its log,
        # the two survivors heartbeat on against it and keep counting.
        assert sidecar.terminate() == 0
        sidecar.start()
        produce_words(kafka_broker.bootstrap, per_key=10, topics=topics)
        wait_until(lambda: counts.all_at(30), 90, message=f"counts at 30: {[i.states() for i in instances]}")
        assert set(counts.read().values()) == {30}
    finally:
        for instance in instances:
            instance.stop()
        counts.close()


WARMUP_SETTINGS = {
    **SIDECAR_SETTINGS,
    "group.streams.acceptable.recovery.lag": "100",  # each task's store is ~2,000 records: a newcomer lags
    "group.streams.task.offset.interval.ms": "1000",
}
STORE_KEYS = 12_000


@pytest.fixture(scope="module")
def trunk_app_classes(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return compile_app(require_trunk_clients(), tmp_path_factory.mktemp("streams-app-trunk"))


@pytest.mark.slow
def test_trunk_client_scales_out_through_the_sidecar_with_warmups_promoted_once_caught_up(
        trunk_app_classes: tuple[Path, Path], kafka_broker: KafkaBroker, tmp_path: Path) -> None:
    """Apache Kafka 4.0 serves no streams groups: the sidecar does, and the newcomer restores the
    moved tasks' stores as warm-ups from the changelogs on Kafka while the first instance keeps
    them active; each is handed over once caught up."""
    server = sidecar_process(tmp_path / "sidecar", kafka_broker.bootstrap, free_base_port(), **WARMUP_SETTINGS)
    server.start()
    topics = Topics.unique()
    topics.create(kafka_broker.bootstrap)
    app_id = f"scale-{uuid.uuid4().hex[:8]}"
    produce_distinct_keys(kafka_broker.bootstrap, STORE_KEYS, topics.words)
    counts = Counts(kafka_broker.bootstrap, topics)
    first = Instance(trunk_app_classes, server.bootstrap, app_id, "first", tmp_path, topics)
    second: Instance | None = None
    try:
        wait_until(lambda: counts.all_at(1, STORE_KEYS), 90, message=f"first counted: {first.states()}")
        second = Instance(trunk_app_classes, server.bootstrap, app_id, "second", tmp_path, topics)
        joined = second
        wait_until(lambda: len(first.tasks_now()[0]) == 3 and len(joined.tasks_now()[0]) == 3
                   and not joined.tasks_now()[1], 90,
                   message=f"balanced: first {first.task_lines()}, second {joined.task_lines()}")
        # No standby replicas are configured: every standby the newcomer ran was a warm-up.
        assert warmed_up_first(joined) == set(), joined.task_lines()
        assert joined.tasks_now()[0].isdisjoint(first.tasks_now()[0])
        assert set(counts.read().values()) == {1}
    finally:
        if second is not None:
            second.stop()
        first.stop()
        counts.close()
        server.stop()
