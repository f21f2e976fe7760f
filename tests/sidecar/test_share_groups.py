"""Share groups served by the sidecar over an upstream that has none, seen on the wire (raw kio
requests) and through a real share consumer: in front of librdkafka's 3-broker mock cluster, the
share APIs are advertised and answered on every listener, and a member whose partitions have
leaders on two brokers keeps a share session with each; in front of Apache Kafka 4.0, a consumer
starts at the log end by default, never gets an aborted transaction's records, and a topic
deleted upstream is answered with Kafka's codes. An upstream's own share APIs are never advertised,
and every sidecar serves share groups (with several shards or instances, forwarding a share request
to the process holding its group: tests/share/test_forward.py proves it on the wire)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from coordinator.api.authorization import Unchecked
from coordinator.config import resolve
from coordinator.node.server import CoordinatorServer
from coordinator.sidecar.apis import api_table
from protocol.build import build
from protocol.errors import ErrorCode
from protocol.private import SHARE_FORWARD
from protocol.schemas import request_schema
from tests.interop.share_support import Delivery, consume_until, share_consumer
from tests.share.test_upstream import produce_transaction
from tests.support.kafka import KafkaBroker
from tests.support.polling import eventually
from tests.support.server import ServerProcess, free_port
from tests.support.wire import WireClient

from .conftest import free_base_port, sidecar_process, start_mock_cluster, stop_process

pytestmark = pytest.mark.interop

SHARE_GROUP_HEARTBEAT, SHARE_GROUP_DESCRIBE, SHARE_FETCH, SHARE_ACKNOWLEDGE = 76, 77, 78, 79
MEMBER = "shareMember00000000001"
ACCEPT = 1


def req(api_key: int, version: int, **fields: Any) -> Any:
    return build(request_schema(api_key, version), fields)


def heartbeat(group: str, epoch: int, topics: list[str] | None = None) -> Any:
    return req(SHARE_GROUP_HEARTBEAT, 1, group_id=group, member_id=MEMBER, member_epoch=epoch, rack_id=None,
               subscribed_topic_names=topics)


def share_fetch(group: str, epoch: int, topic_id: uuid.UUID, partitions: list[int],
                acks: dict[int, list[tuple[int, int]]] | None = None) -> Any:
    return req(SHARE_FETCH, 2, group_id=group, member_id=MEMBER, share_session_epoch=epoch, max_wait=0,
               min_bytes=1, max_bytes=1 << 20, max_records=500, batch_size=500, forgotten_topics_data=[],
               topics=[{"topic_id": topic_id, "partitions": [
                   {"partition_index": p, "acknowledgement_batches": [
                       {"first_offset": f, "last_offset": last, "acknowledge_types": [ACCEPT]}
                       for f, last in (acks or {}).get(p, [])]}
                   for p in partitions]}])


async def join(coordinator: WireClient, group: str, topic: str) -> tuple[int, Any]:
    """Join ``group`` subscribed to ``topic`` and heartbeat until the member is assigned partitions
    (their start offsets are asked of the upstream after the first answer): its epoch and them."""
    first = await coordinator.request(heartbeat(group, 0, [topic]))
    assert first.error_code == 0, first
    epoch = first.member_epoch
    if first.assignment is not None and first.assignment.topic_partitions:
        return epoch, first.assignment.topic_partitions[0]

    async def assigned() -> Any:
        nonlocal epoch
        answer = await coordinator.request(heartbeat(group, epoch))
        assert answer.error_code == 0, answer
        epoch = answer.member_epoch
        return answer.assignment.topic_partitions[0] if answer.assignment and answer.assignment.topic_partitions else None

    tps = await eventually(assigned, timeout=30, message="an assignment", interval=0.1)
    return epoch, tps


def acquired(response: Any) -> dict[int, list[tuple[int, int]]]:
    return {p.partition_index: [(int(r.first_offset), int(r.last_offset)) for r in p.acquired_records]
            for t in response.responses for p in t.partitions}


# ---- in front of librdkafka's mock cluster (3 brokers) ------------------------------------------------


@pytest.fixture(scope="module")
def on_mock(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, int]]:
    proc, bootstrap = start_mock_cluster(3)
    base = free_base_port()
    server = sidecar_process(tmp_path_factory.mktemp("share-mock") / "data", bootstrap, base,
                             **{"share.auto.offset.reset": "earliest"})
    try:
        server.start()
        yield server, base
    finally:
        server.stop()
        stop_process(proc)


def api_ranges(port: int) -> dict[int, tuple[int, int]]:
    async def run() -> Any:
        client = await WireClient.connect(port)
        try:
            return await client.request(req(18, 3, client_software_name="test", client_software_version="1"))
        finally:
            await client.close()

    response = asyncio.run(run())
    return {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in response.api_keys}


def test_the_share_apis_are_advertised_on_every_listener(on_mock: tuple[ServerProcess, int]) -> None:
    server, base = on_mock
    for port in (server.port, base + 1, base + 2, base + 3):
        ranges = api_ranges(port)
        assert (ranges[76], ranges[77], ranges[78], ranges[79]) == ((1, 1), (1, 1), (1, 2), (1, 2)), port


def topic_with_two_leaders(bootstrap: str) -> tuple[str, dict[int, int]]:
    """A topic the mock creates on first use (leaders chosen at random) whose partitions are led by
    at least two brokers: its name and partition -> leader."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for _ in range(10):
        name = f"shared-{uuid.uuid4().hex[:8]}"
        Producer({"bootstrap.servers": bootstrap}).list_topics(name, timeout=10)  # auto-created
        leaders = leaders_of(admin, name)
        if len(set(leaders.values())) >= 2:
            return name, leaders
    raise AssertionError("the mock cluster led every topic's partitions from one broker")


def leaders_of(admin: AdminClient, name: str) -> dict[int, int]:
    topic = admin.list_topics(name, timeout=10).topics[name]
    return {p: int(meta.leader) for p, meta in topic.partitions.items()}


@pytest.mark.asyncio
async def test_a_member_keeps_a_share_session_with_each_leader_and_gets_every_record_once(
        on_mock: tuple[ServerProcess, int]) -> None:
    server, base = on_mock
    topic, leaders = topic_with_two_leaders(server.bootstrap)
    producer = Producer({"bootstrap.servers": server.bootstrap, "linger.ms": 5})
    for i in range(40):
        producer.produce(topic, f"v{i}".encode(), partition=i % len(leaders))
    assert producer.flush(30) == 0
    per_partition = {p: sum(1 for i in range(40) if i % len(leaders) == p) for p in leaders}

    coordinator = await WireClient.connect(server.port)
    group = f"g-{uuid.uuid4().hex[:6]}"
    _, tps = await join(coordinator, group, topic)
    by_leader: dict[int, list[int]] = {}
    for p, leader in leaders.items():
        by_leader.setdefault(leader, []).append(p)
    sessions = {leader: await WireClient.connect(base + leader) for leader in by_leader}
    try:
        got: dict[int, list[tuple[int, int]]] = {}
        for leader, client in sessions.items():  # opened one after the other: the second must not replace the first
            opened = await client.request(share_fetch(group, 0, tps.topic_id, by_leader[leader]))
            assert opened.error_code == 0, opened
            assert [(e.node_id, e.port) for e in opened.node_endpoints] == [(leader, base + leader)]
            assert {p.current_leader.leader_id for t in opened.responses for p in t.partitions} == {leader}
            got.update(acquired(opened))
        for leader, client in sessions.items():  # each session at its own epoch 1: accept what it got
            mine = {p: got[p] for p in by_leader[leader]}
            step = await client.request(share_fetch(group, 1, tps.topic_id, [], acks=mine))
            assert step.error_code == 0, f"broker {leader}'s session: {step}"
            assert all(p.acknowledge_error_code == 0 for t in step.responses for p in t.partitions)
        assert {p: sum(last - first + 1 for first, last in ranges) for p, ranges in got.items()} == per_partition
    finally:
        for client in sessions.values():
            await client.close()
        await coordinator.close()


# ---- in front of Apache Kafka 4.0 -------------------------------------------------------------------


@pytest.fixture
def on_kafka(tmp_path: Path, kafka_broker: KafkaBroker) -> Iterator[tuple[ServerProcess, KafkaBroker, str]]:
    """A sidecar with Kafka's default ``share.auto.offset.reset`` (latest), and a 1-partition topic."""
    topic = f"queue-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kafka_broker.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(30)
    server = sidecar_process(tmp_path / "sidecar", kafka_broker.bootstrap, free_base_port(),
                             **{"group.share.heartbeat.interval.ms": "500"})
    try:
        server.start()
        yield server, kafka_broker, topic
    finally:
        server.stop()


def produce_values(bootstrap: str, topic: str, values: list[str]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for value in values:
        producer.produce(topic, value.encode(), partition=0)
    assert producer.flush(30) == 0


def test_a_consumer_starts_at_the_log_end_and_never_gets_an_aborted_transactions_records(
        on_kafka: tuple[ServerProcess, KafkaBroker, str]) -> None:
    server, kafka, topic = on_kafka
    produce_values(kafka.bootstrap, topic, [f"old-{i}" for i in range(5)])  # before the group: skipped (latest)
    consumer = share_consumer(server.bootstrap, topic, "latest")
    values: list[str] = []
    seen: list[Delivery] = []
    keep = lambda m: values.append(m.value().decode())  # noqa: E731
    try:
        ticks = 0
        while not any(v.startswith("tick-") for v in values):  # until the share partition has started
            assert ticks < 60, "no record reached the share consumer"
            produce_values(kafka.bootstrap, topic, [f"tick-{ticks}"])
            ticks += 1
            consume_until(consumer, lambda: any(v.startswith("tick-") for v in values), seen, 1.0, keep)
        produce_transaction(kafka.bootstrap, topic, [b"abort-0", b"abort-1", b"abort-2"], commit=False)
        produce_transaction(kafka.bootstrap, topic, [b"commit-0", b"commit-1", b"commit-2"], commit=True)
        produce_values(kafka.bootstrap, topic, ["end"])
        consume_until(consumer, lambda: "end" in values, seen, 30, keep)
        assert all(error is None for error in consumer.commit_sync().values())
    finally:
        consumer.close()
    assert "end" in values
    assert not [v for v in values if v.startswith(("old-", "abort-"))], values
    assert [v for v in values if v.startswith("commit-")] == ["commit-0", "commit-1", "commit-2"]
    assert len(seen) == len(set(seen)) == len(values)  # each record once


@pytest.mark.asyncio
async def test_a_topic_deleted_upstream_is_answered_with_kafkas_codes(
        on_kafka: tuple[ServerProcess, KafkaBroker, str]) -> None:
    server, kafka, topic = on_kafka
    coordinator = await WireClient.connect(server.port)
    group = f"g-{uuid.uuid4().hex[:6]}"
    try:
        member_epoch, tps = await join(coordinator, group, topic)
        topic_id = tps.topic_id
        opened = await coordinator.request(share_fetch(group, 0, topic_id, [0]))
        assert opened.error_code == 0 and acquired(opened) == {0: []}

        admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
        admin.delete_topics([topic])[topic].result(30)
        gone = {ErrorCode.UNKNOWN_TOPIC_ID, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
        epoch = 1

        async def refused() -> Any:
            nonlocal epoch
            answer = await coordinator.request(share_fetch(group, epoch, topic_id, []))
            epoch += 1
            assert answer.error_code == 0, answer
            codes = {p.error_code for t in answer.responses for p in t.partitions}
            return codes if codes & gone else None

        codes = await eventually(refused, timeout=30, message="the deleted topic refused")
        assert codes <= gone
        still = await coordinator.request(heartbeat(group, member_epoch))
        assert still.error_code == 0  # the group is served on
    finally:
        await coordinator.close()


def test_an_upstreams_own_share_apis_are_never_advertised() -> None:
    """An upstream with share groups of its own (Kafka 4.2+): without the share APIs of this node
    they are not advertised, for a request forwarded there would find a share coordinator that is
    not the one FindCoordinator names; with them (served, or refused as with several shards), the
    ranges are ours."""
    upstream = {0: (0, 11), 18: (0, 4), 76: (1, 1), 77: (1, 1), 78: (1, 1), 79: (1, 1)}
    assert not {76, 77, 78, 79} & set(api_table({18: (0, 4)}, upstream))
    served = api_table({18: (0, 4), 76: (1, 1), 77: (1, 1), 78: (1, 2), 79: (1, 2)}, upstream)
    assert (served[76], served[78], served[79]) == ((1, 1), (1, 2), (1, 2))


@pytest.mark.parametrize(("settings", "forwards"), [
    ({}, False),
    ({"coordinator.shards": "2"}, True),  # a per-broker listener's connection may reach the other shard
    ({"coordinator.log.storage": "upstream"}, True),  # or another instance sharing the ports
])
def test_share_groups_are_served_by_every_sidecar_and_forwarded_where_several_processes_serve(
        tmp_path: Path, settings: dict[str, str], forwards: bool) -> None:
    config = resolve(environ={}, overrides=[f"{k}={v}" for k, v in {
        "upstream.bootstrap.servers": "127.0.0.1:9", "sidecar.listener.base.port": str(free_base_port()),
        **settings}.items()], flags={"listeners": f"127.0.0.1:{free_port()}", "metrics.listen": "127.0.0.1:0",
                                     "log.dirs": str(tmp_path / "data")})
    server = CoordinatorServer(config, shard=0 if "coordinator.shards" in settings else None)  # built, not started
    handlers = {key: server.registry.get(key) for key in (76, 77, 78, 79)}
    # Registered and served here (never forwarded to the upstream), none of them a refusal.
    assert all(h is not None and not isinstance(h.authorization, Unchecked) for h in handlers.values())
    # ShareForward (share/forward.py), for peers, only where there are peers.
    assert (server.registry.get(SHARE_FORWARD) is not None) == forwards
