"""Real clients against two shard processes: each bootstraps from one node, finds its group's node
with FindCoordinator, consumes what an idempotent producer bootstrapped from node 1 wrote through
the data plane on node 0, and commits to its group's node. A confluent-kafka KIP-848 group, a confluent-kafka classic group and an aiokafka
group, with ids chosen to land on the shard that is not the bootstrap node (both directions)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from coordinator.shards.placement import shard_data_dir
from protocol.build import build
from protocol.errors import ErrorCode
from protocol.schemas import request_schema
from tests.shards.cluster import ShardCluster, group_on, running_cluster
from tests.support.metrics import scrape
from tests.support.wire import WireClient

pytestmark = pytest.mark.interop

TOPIC = "routed"
PARTITIONS = 3
MESSAGES = 30
NODE_ID = 1  # node.id's default: shard k is node 1 + k


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ShardCluster]:
    overrides = {"group.consumer.heartbeat.interval.ms": "500", "group.consumer.min.heartbeat.interval.ms": "500"}
    with running_cluster(tmp_path_factory.mktemp("clients"), overrides=overrides) as started:
        create(started.bootstrap(1), TOPIC, PARTITIONS)  # on node 1: node 0's data plane serves it at once
        produce(started.bootstrap(1), TOPIC, MESSAGES)  # bootstrapped from the node without the data
        yield started


def create(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions, 1)], operation_timeout=10).values():
        future.result(10)


def produce(bootstrap: str, topic: str, count: int) -> None:
    # Idempotent: InitProducerId goes to whichever node the client picks, Produce to node 0.
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})
    for i in range(count):
        producer.produce(topic, key=f"k{i}".encode(), value=b"v", partition=i % PARTITIONS)
    assert producer.flush(15) == 0


def committed(cluster: ShardCluster, shard: int, group: str) -> tuple[int, dict[int, int]]:
    """OffsetFetch v7 on one node: (error code, partition -> committed offset)."""

    async def fetch() -> Any:
        client = await WireClient.connect(cluster.port + shard)
        try:
            return await client.request(build(request_schema(9, 7), {"group_id": group, "topics": None,
                                                                      "require_stable": False}))
        finally:
            await client.close()

    response = asyncio.run(fetch())
    return response.error_code, {p.partition_index: p.committed_offset for t in response.topics
                                 if t.name == TOPIC for p in t.partitions}


def assert_commits_on(cluster: ShardCluster, shard: int, group: str) -> None:
    per_partition = MESSAGES // PARTITIONS
    assert committed(cluster, shard, group) == (0, dict.fromkeys(range(PARTITIONS), per_partition))
    assert committed(cluster, 1 - shard, group) == (ErrorCode.NOT_COORDINATOR, {})


def consume_all(consumer: Consumer, deadline_s: float = 15) -> int:
    got = 0
    deadline = time.monotonic() + deadline_s
    while got < MESSAGES:
        assert time.monotonic() < deadline, f"consumed {got} of {MESSAGES}; assignment {consumer.assignment()}"
        got += sum(1 for m in consumer.consume(num_messages=100, timeout=0.1) if not m.error())
    return got


@pytest.mark.parametrize(("protocol", "group_shard", "bootstrap_shard"),
                         [("consumer", 1, 0), ("classic", 0, 1)])
def test_confluent_group_commits_on_its_node(cluster: ShardCluster, protocol: str, group_shard: int,
                                             bootstrap_shard: int) -> None:
    group = group_on(group_shard, prefix=f"confluent-{protocol}")
    config: dict[str, Any] = {"bootstrap.servers": cluster.bootstrap(bootstrap_shard), "group.id": group,
                              "auto.offset.reset": "earliest", "enable.auto.commit": False,
                              "group.protocol": protocol}
    if protocol == "classic":
        config.update({"session.timeout.ms": 10000, "heartbeat.interval.ms": 300})
    consumer = Consumer(config)
    try:
        consumer.subscribe([TOPIC])
        assert consume_all(consumer) == MESSAGES
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    assert_commits_on(cluster, group_shard, group)


def not_coordinator_answers(cluster: ShardCluster, shard: int) -> float:
    port = int((shard_data_dir(cluster.root, shard) / "metrics.port").read_text())
    return sum(v for k, v in scrape(port).items()
               if k.startswith("coordinator_errors_total{") and 'error="not_coordinator"' in k)


def test_aiokafka_told_not_coordinator_asks_again_and_commits_on_its_node(cluster: ShardCluster) -> None:
    """The member's coordinator is pointed at node 0, as after a move: node 0 answers
    NOT_COORDINATOR, aiokafka asks FindCoordinator again and commits on node 1."""
    from aiokafka import AIOKafkaConsumer

    group = group_on(1, prefix="aiokafka")
    refused_before = not_coordinator_answers(cluster, 0)

    async def scenario() -> int:
        consumer = AIOKafkaConsumer(TOPIC, bootstrap_servers=cluster.bootstrap(0), group_id=group,
                                    auto_offset_reset="earliest", enable_auto_commit=False,
                                    heartbeat_interval_ms=300, session_timeout_ms=10000)
        await consumer.start()
        try:
            got = 0
            deadline = asyncio.get_running_loop().time() + 15
            while got < MESSAGES:
                assert asyncio.get_running_loop().time() < deadline, f"consumed {got} of {MESSAGES}"
                batches = await consumer.getmany(timeout_ms=100)
                got += sum(len(records) for records in batches.values())
            coordinator = consumer._coordinator
            assert coordinator.coordinator_id == NODE_ID + 1
            coordinator.coordinator_id = NODE_ID  # the wrong node
            await consumer.commit()
            assert coordinator.coordinator_id == NODE_ID + 1  # found again
            return got
        finally:
            await consumer.stop()

    assert asyncio.run(scenario()) == MESSAGES
    assert_commits_on(cluster, 1, group)
    assert not_coordinator_answers(cluster, 0) > refused_before


def test_a_consumer_group_gets_a_topic_created_on_another_node(cluster: ShardCluster) -> None:
    """A KIP-848 group on shard 1 subscribed before the topic exists is assigned its partitions
    once node 0 creates it: shard 1's catalog learns of it and tells its groups."""
    group = group_on(1, prefix="late")
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap(1), "group.id": group, "group.protocol": "consumer",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "topic.metadata.refresh.interval.ms": 1000})
    try:
        consumer.subscribe(["late"])
        consumer.poll(0.5)
        assert not consumer.assignment()
        create(cluster.bootstrap(0), "late", 2)
        deadline = time.monotonic() + 15
        while {tp.partition for tp in consumer.assignment()} != {0, 1}:
            assert time.monotonic() < deadline, f"never assigned the new topic: {consumer.assignment()}"
            consumer.poll(0.1)
        assert all(isinstance(tp, TopicPartition) and tp.topic == "late" for tp in consumer.assignment())
    finally:
        consumer.close()


def test_admin_client_sees_the_groups_of_every_node(cluster: ShardCluster) -> None:
    """confluent-kafka's AdminClient lists groups on every broker and describes each group at its
    coordinator: groups of both shards appear, as in one Kafka cluster."""
    groups = {shard: group_on(shard, prefix="admin") for shard in (0, 1)}
    for shard, group in groups.items():  # a committed offset makes a group (Empty, classic)
        consumer = Consumer({"bootstrap.servers": cluster.bootstrap(0), "group.id": group})
        try:
            consumer.commit(offsets=[TopicPartition(TOPIC, 0, 5)], asynchronous=False)
        finally:
            consumer.close()
        assert committed(cluster, shard, group)[1].get(0) == 5
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap(1)})
    listed = admin.list_consumer_groups(request_timeout=10).result(15)
    assert set(groups.values()) <= {g.group_id for g in listed.valid}
    described = admin.describe_consumer_groups(list(groups.values()), request_timeout=10)
    for group, future in described.items():
        description = future.result(15)
        assert description.group_id == group
        assert description.coordinator.id == NODE_ID + next(k for k, g in groups.items() if g == group)


def test_the_cli_shows_a_classic_groups_generation_from_its_node(cluster: ShardCluster) -> None:
    """`coordinator groups describe` bootstrapped from node 0 finds the group's node (1) with
    FindCoordinator and asks it the private DescribeGroupGenerations there."""
    group = group_on(1, prefix="gens")
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap(0), "group.id": group, "client.id": "gens",
                         "session.timeout.ms": 10000, "heartbeat.interval.ms": 300})
    try:
        consumer.subscribe([TOPIC])
        deadline = time.monotonic() + 30
        while len(consumer.assignment()) != PARTITIONS:
            assert time.monotonic() < deadline, "never assigned"
            consumer.poll(0.1)
        run = subprocess.run([sys.executable, "-m", "coordinator", "groups", "describe", group,
                              "--bootstrap", cluster.bootstrap(0), "--json"], capture_output=True, text=True, timeout=60)
        assert run.returncode == 0, run.stderr
        view = json.loads(run.stdout)
        assert (view["coordinator"], view["state"]) == (cluster.bootstrap(1), "Stable")
        assert view["generation_id"] >= 1
        assert [(m["client_id"], m["generation_id"]) for m in view["members"]] == [("gens", view["generation_id"])]
    finally:
        consumer.close()
