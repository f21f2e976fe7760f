"""Streams groups (KIP-1071) in sidecar mode in front of Apache Kafka 4.0, which serves none itself:
raw StreamsGroupHeartbeat requests (kio entities) through the sidecar. The sidecar advertises the
streams APIs, serves them, and creates the internal topics the topology implies on Kafka with
CreateTopics (partitions, replication factor and configs as the topology says, seen with Kafka's
own Admin), once, off the heartbeat's path; the group gets its tasks once its view of Kafka's
topics has them. A refusal by Kafka shows in the heartbeat's status and in one log line."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from coordinator.core.streams.status import Status
from tests.support.kafka import KafkaBroker
from tests.support.polling import eventually
from tests.support.server import ServerProcess, wait_until
from tests.support.wire import WireClient, request

from .conftest import free_base_port, sidecar_process

pytestmark = pytest.mark.interop

SGH, SGD = 88, 89
HEARTBEAT_MS = 2000  # the creation back-off is twice this: the test heartbeats well within it


@pytest.fixture(scope="module")
def sidecar(kafka_broker: KafkaBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    server = sidecar_process(tmp_path_factory.mktemp("streams-sidecar") / "data", kafka_broker.bootstrap,
                             free_base_port(), **{"group.streams.heartbeat.interval.ms": str(HEARTBEAT_MS)})
    server.start()
    try:
        yield server
    finally:
        server.stop()


def topology(app: str, source: str, replication_factor: int = 0) -> dict[str, Any]:
    """Two subtopologies as Kafka Streams sends them for a re-keying count: the source re-keyed
    into a repartition topic, the repartition topic counted into a store with its changelog."""
    return {"epoch": 0, "subtopologies": [
        {"subtopology_id": "0", "source_topics": [source], "source_topic_regex": [],
         "repartition_sink_topics": [f"{app}-rekeyed-repartition"], "state_changelog_topics": [],
         "repartition_source_topics": [], "copartition_groups": []},
        {"subtopology_id": "1", "source_topics": [], "source_topic_regex": [], "repartition_sink_topics": [],
         "state_changelog_topics": [{"name": f"{app}-store-changelog", "partitions": 0,
                                     "replication_factor": replication_factor,
                                     "topic_configs": [{"key": "cleanup.policy", "value": "compact"}]}],
         "repartition_source_topics": [{"name": f"{app}-rekeyed-repartition", "partitions": 0,
                                        "replication_factor": replication_factor,
                                        "topic_configs": [{"key": "cleanup.policy", "value": "delete"},
                                                          {"key": "retention.ms", "value": "-1"}]}],
         "copartition_groups": []}]}


class Member:
    def __init__(self, client: WireClient, app: str, source: str, replication_factor: int = 0) -> None:
        self.client, self.app = client, app
        self.topology = topology(app, source, replication_factor)
        self.epoch = 0

    async def heartbeat(self) -> Any:
        joining = self.epoch == 0
        response = await self.client.request(request(
            SGH, 1, group_id=self.app, member_id="m1", member_epoch=self.epoch, endpoint_information_epoch=0,
            instance_id=None, rack_id=None, rebalance_timeout=30_000 if joining else -1,
            topology=self.topology if joining else None, active_tasks=[], standby_tasks=[], warmup_tasks=[],
            process_id="p1" if joining else None, user_endpoint=None, client_tags=None, task_offsets=None,
            task_end_offsets=None, shutdown_application=False))
        assert response.error_code == 0, response
        self.epoch = response.member_epoch
        return response


def statuses(response: Any) -> dict[int, str]:
    return {s.status_code: s.status_detail for s in response.status}


def log_events(server: ServerProcess, event: str) -> list[dict[str, Any]]:
    lines = []
    for line in server.log().splitlines():
        if line.startswith("{") and f'"{event}"' in line:
            lines.append(json.loads(line))
    return lines


def requested(server: ServerProcess, topic: str) -> int:
    """How many CreateTopics the sidecar sent naming `topic`."""
    return sum(topic in e["topics"] for e in log_events(server, "streams_internal_topics_requested"))


def kafka_topic_configs(admin: AdminClient, topic: str) -> dict[str, str]:
    described = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic)])
    entries = next(iter(described.values())).result(15)
    return {name: entry.value for name, entry in entries.items()}


@pytest.mark.asyncio
async def test_the_sidecar_advertises_the_streams_apis_kafka_4_0_lacks(sidecar: ServerProcess,
                                                                      kafka_broker: KafkaBroker) -> None:
    asked = request(18, 3, client_software_name="t", client_software_version="1")
    for port, expected in ((sidecar.port, {SGH: (0, 1), SGD: (0, 0)}), (kafka_broker.port, {})):
        client = await WireClient.connect(port)
        try:
            response = await client.request(asked)
        finally:
            await client.close()
        ranges = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
        assert {key: ranges[key] for key in (SGH, SGD) if key in ranges} == expected


@pytest.mark.asyncio
async def test_internal_topics_are_created_on_kafka_once_as_the_topology_says(sidecar: ServerProcess,
                                                                             kafka_broker: KafkaBroker) -> None:
    app, source = f"app-{uuid.uuid4().hex[:8]}", f"src-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap})
    # Created on Kafka directly, not through the sidecar: the joining topology's unknown source
    # topic makes the sidecar read Kafka's topics at once.
    admin.create_topics([NewTopic(source, 4, 1)])[source].result(30)
    client = await WireClient.connect(sidecar.port)
    member = Member(client, app, source)
    try:
        first = await member.heartbeat()
        assert set(statuses(first)) & {Status.MISSING_SOURCE_TOPICS, Status.MISSING_INTERNAL_TOPICS}
        assert not first.active_tasks

        async def assigned() -> Any:
            response = await member.heartbeat()
            return response if response.active_tasks else None

        ready = await eventually(assigned, timeout=20, message="the group sees its internal topics and assigns")
        assert statuses(ready) == {}
        assert {(t.subtopology_id, p) for t in ready.active_tasks for p in t.partitions} == {
            (s, p) for s in "01" for p in range(4)}
    finally:
        await client.close()

    changelog, repartition = f"{app}-store-changelog", f"{app}-rekeyed-repartition"
    topics = admin.list_topics(timeout=10).topics
    assert len(topics[changelog].partitions) == 4  # the source's partition count: the store's tasks
    assert len(topics[repartition].partitions) == 4
    assert kafka_topic_configs(admin, changelog)["cleanup.policy"] == "compact"
    repartition_configs = kafka_topic_configs(admin, repartition)
    assert (repartition_configs["cleanup.policy"], repartition_configs["retention.ms"]) == ("delete", "-1")
    # One CreateTopics for both, though every heartbeat until then found them missing.
    assert requested(sidecar, changelog) == 1 and requested(sidecar, repartition) == 1


@pytest.mark.asyncio
async def test_a_creation_kafka_refuses_is_in_the_status_and_logged_once(sidecar: ServerProcess,
                                                                        kafka_broker: KafkaBroker) -> None:
    app, source = f"app-{uuid.uuid4().hex[:8]}", f"src-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap})
    admin.create_topics([NewTopic(source, 2, 1)])[source].result(30)
    client = await WireClient.connect(sidecar.port)
    member = Member(client, app, source, replication_factor=3)  # one broker: Kafka refuses the topics
    try:
        async def refused() -> str | None:
            detail = statuses(await member.heartbeat()).get(Status.MISSING_INTERNAL_TOPICS, "")
            return detail if "Creation failed:" in detail else None

        detail = await eventually(refused, timeout=20, message="the refusal in the status")
        changelog = f"{app}-store-changelog"
        assert detail.startswith(f"Internal topics are missing: {app}-rekeyed-repartition, {changelog}; "
                                 f"Creation failed: {app}-rekeyed-repartition (")
        assert "replication factor" in detail.lower()
        for _ in range(5):  # more heartbeats within the back-off: no new attempt
            assert "Creation failed:" in statuses(await member.heartbeat())[Status.MISSING_INTERNAL_TOPICS]
        assert requested(sidecar, changelog) == 1

        async def asked_again() -> bool:  # past the back-off (twice the heartbeat interval) it tries again
            await member.heartbeat()
            return requested(sidecar, changelog) == 2

        await eventually(asked_again, timeout=3 * 2 * HEARTBEAT_MS / 1000, interval=0.1,
                         message="a second CreateTopics after the back-off")
    finally:
        await client.close()
    # Refused the same way twice: one log line.
    logged = [e for e in log_events(sidecar, "streams_internal_topics_not_created") if changelog in e["topics"]]
    assert len(logged) == 1
    assert logged[0]["topics"][changelog].startswith("INVALID_REPLICATION_FACTOR: ")
    assert changelog not in admin.list_topics(timeout=10).topics


@pytest.mark.asyncio
async def test_a_source_topic_created_after_the_join_is_seen_at_once(sidecar: ServerProcess,
                                                                    kafka_broker: KafkaBroker) -> None:
    """The join's read of Kafka's topics finds no source; the members' next heartbeats read again
    (with a back-off) rather than waiting for the metadata age (five minutes)."""
    app, source = f"app-{uuid.uuid4().hex[:8]}", f"src-{uuid.uuid4().hex[:8]}"
    client = await WireClient.connect(sidecar.port)
    member = Member(client, app, source)
    try:
        first = await member.heartbeat()
        assert Status.MISSING_SOURCE_TOPICS in statuses(first)
        admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap})
        admin.create_topics([NewTopic(source, 2, 1)])[source].result(30)

        async def assigned() -> Any:
            response = await member.heartbeat()
            return response if response.active_tasks else None

        ready = await eventually(assigned, timeout=20, interval=0.1, message="the source topic seen, tasks assigned")
        assert {(t.subtopology_id, p) for t in ready.active_tasks for p in t.partitions} == {
            (s, p) for s in "01" for p in range(2)}
    finally:
        await client.close()


@pytest.mark.asyncio
async def test_an_app_moving_to_the_sidecar_keeps_the_offsets_it_committed_on_kafka(
        sidecar: ServerProcess, kafka_broker: KafkaBroker) -> None:
    """The first heartbeat of a group waits for the import of its offsets from Kafka, as a join
    does, so the streams group's tasks start where the app left off on Kafka."""
    app, source = f"app-{uuid.uuid4().hex[:8]}", f"src-{uuid.uuid4().hex[:8]}"
    # Created through the sidecar, which then reads Kafka's topics: the import names every
    # partition of the topics the sidecar knows.
    through = AdminClient({"bootstrap.servers": sidecar.bootstrap})
    through.create_topics([NewTopic(source, 2, 1)])[source].result(30)
    wait_until(lambda: any(e["topic"] == source for e in log_events(sidecar, "upstream_topic_changed")), 10,
               message="the sidecar knows the source topic")
    before = Consumer({"bootstrap.servers": kafka_broker.bootstrap, "group.id": app, "enable.auto.commit": False})
    try:
        before.commit(offsets=[TopicPartition(source, 0, 5), TopicPartition(source, 1, 7)], asynchronous=False)
    finally:
        before.close()
    client = await WireClient.connect(sidecar.port)
    try:
        await Member(client, app, source).heartbeat()
    finally:
        await client.close()
    admin = AdminClient({"bootstrap.servers": sidecar.bootstrap})
    fetched = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(app)])[app].result(15)
    assert sorted((tp.partition, tp.offset) for tp in fetched.topic_partitions if tp.topic == source) == [(0, 5), (1, 7)]
