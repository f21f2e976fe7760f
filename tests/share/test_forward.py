"""A ShareFetch or ShareAcknowledge reaching a process that does not hold its share group is
forwarded to the one that does (``coordinator/share/forward.py``): a sidecar of two shards in front
of Apache Kafka 4.0, whose shards both open the broker's listener (SO_REUSEPORT), so a client's
connection lands on either. On the wire: every connection is answered as the holder answers, and a
connection that closes releases what it acquired at once, whichever shard it reached; with real
share consumers (confluent-kafka's, and the Java ``KafkaShareConsumer`` 4.3.0): a group held by
shard 1 shares a 2-partition topic, every record delivered once.
ShareForward refuses what is not a share request (INVALID_REQUEST) and serves on; with the holder
gone, a share request is answered NOT_LEADER_OR_FOLLOWER, which the clients retry.
(Instances sharing the log upstream: ``tests/clusterlog/test_instances_share.py``.)"""

from __future__ import annotations

import os
import signal
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from coordinator.share.apis import SHARE_GROUP_DESCRIBE
from coordinator.share.forward import ANSWER_TIMEOUT_S
from protocol.build import build
from protocol.client import decode_response, encode_request
from protocol.errors import ErrorCode
from protocol.private import SHARE_FORWARD
from protocol.schemas import request_schema
from tests.interop import test_share_java
from tests.interop.share_support import Delivery, all_records, consume_until, share_consumer
from tests.interop.test_share_java import java_readers_get_each_record_once
from tests.shards.cluster import ShardCluster, group_on
from tests.sidecar.conftest import free_base_port
from tests.sidecar.test_share_groups import acquired, join, req, share_fetch
from tests.support.clients import produce
from tests.support.kafka import KafkaBroker
from tests.support.polling import eventually
from tests.support.wire import WireClient

pytestmark = pytest.mark.interop

share_reader = test_share_java.share_reader  # the fixture: the Java share consumer, compiled once
PARTITIONS = 2
BROKER = 1  # the session broker's node id: its listener is base + 1 on both shards


def make_topic(kafka: KafkaBroker) -> str:
    topic = f"forwarded-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)])[topic].result(30)
    return topic


@pytest.fixture(scope="module")
def two_shards(kafka_broker: KafkaBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ShardCluster, int]]:
    """A sidecar of two shards in front of the session's broker; its broker listener's base port."""
    base = free_base_port()
    cluster = ShardCluster(tmp_path_factory.mktemp("share-forward") / "data", 2, overrides={
        "upstream.bootstrap.servers": kafka_broker.bootstrap, "sidecar.listener.base.port": str(base),
        "share.auto.offset.reset": "earliest", "group.share.heartbeat.interval.ms": "500",
        "log.flush.policy": "none"})
    try:
        cluster.start()
        yield cluster, base
    finally:
        cluster.stop()


@pytest.mark.asyncio
async def test_every_connection_is_answered_by_the_holder_and_releases_on_close_whichever_shard_it_reached(
        two_shards: tuple[ShardCluster, int], kafka_broker: KafkaBroker) -> None:
    cluster, base = two_shards
    topic = make_topic(kafka_broker)
    group = group_on(1, prefix=f"fwd-{uuid.uuid4().hex[:4]}")  # held by shard 1
    coordinator = await WireClient.connect(cluster.port + 1)
    try:
        _, tps = await join(coordinator, group, topic)
        every: dict[int, list[tuple[int, int]]] = {}

        async def acquire_all() -> WireClient | None:
            """A new connection to the broker's listener (either shard) that acquires ``every``
            record, or None (closed) while they are still held by the last one."""
            client = await WireClient.connect(base + BROKER)
            answer = await client.request(share_fetch(group, 0, tps.topic_id, list(range(PARTITIONS))))
            assert answer.error_code == 0, answer
            assert all(p.error_code == 0 for t in answer.responses for p in t.partitions), answer
            if acquired(answer) == every:
                return client
            await client.close()
            return None

        # Four rounds of ten new records, two connections each, one after the other: the kernel
        # hands each connection to either shard. The first acquires the ten and closes: the second
        # must get them back, released by that close well within the 30 s lock (a forwarded
        # connection's close must release on the holder too), and accepts them.
        for round_ in range(4):
            produce(kafka_broker.bootstrap, topic, 10, PARTITIONS)
            every = {p: [(5 * round_, 5 * round_ + 4)] for p in range(PARTITIONS)}
            first = await eventually(acquire_all, timeout=10, interval=0.1, message=f"round {round_}'s records")
            await first.close()
            second = await eventually(acquire_all, timeout=10, interval=0.1,
                                      message=f"round {round_}'s records released by the first connection's close")
            accepted = await second.request(share_fetch(group, 1, tps.topic_id, [], acks=every))
            assert accepted.error_code == 0, accepted
            assert all(p.acknowledge_error_code == 0 for t in accepted.responses for p in t.partitions), accepted
            await second.close()
    finally:
        await coordinator.close()


def test_share_consumers_of_a_group_held_by_shard_1_share_every_record_once(
        two_shards: tuple[ShardCluster, int], kafka_broker: KafkaBroker) -> None:
    cluster, _ = two_shards
    topic = make_topic(kafka_broker)
    count = 2_000
    produce(kafka_broker.bootstrap, topic, count, PARTITIONS)
    group = group_on(1, prefix=f"consumers-{uuid.uuid4().hex[:4]}")
    seen = share_among(cluster.bootstrap(0), topic, group, 3, count)
    everything = [d for got in seen for d in got]
    assert len(everything) == count and set(everything) == all_records(count)  # none twice, none missing


def share_among(bootstrap: str, topic: str, group: str, consumers: int, count: int,
                timeout: float = 60) -> list[list[Delivery]]:
    """``consumers`` share consumers of ``group`` read ``count`` records concurrently, acknowledge
    (every acknowledgement must succeed) and close: what each got."""
    seen: list[list[Delivery]] = [[] for _ in range(consumers)]
    total = lambda: sum(len(s) for s in seen)  # noqa: E731
    members = [share_consumer(bootstrap, topic, group) for _ in seen]
    threads = [threading.Thread(target=consume_until, args=(c, lambda: total() >= count, s, timeout))
               for c, s in zip(members, seen, strict=True)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for c in members:
        results: dict[Any, Any] = c.commit_sync()
        assert all(error is None for error in results.values()), results
        c.close()
    return seen


@pytest.mark.asyncio
async def test_java_share_consumers_of_a_group_held_by_shard_1_get_every_record_once(
        two_shards: tuple[ShardCluster, int], kafka_broker: KafkaBroker, share_reader: str) -> None:
    cluster, _ = two_shards
    topic = make_topic(kafka_broker)
    count = 1_000
    produce(kafka_broker.bootstrap, topic, count, PARTITIONS)
    group = group_on(1, prefix=f"java-{uuid.uuid4().hex[:4]}")
    await java_readers_get_each_record_once(share_reader, cluster.bootstrap(0), group, topic, all_records(count))


def forward(node_id: int, frame: bytes) -> Any:
    return build(request_schema(SHARE_FORWARD, 0), {"node_id": node_id, "request": frame})


@pytest.mark.asyncio
async def test_share_forward_refuses_what_is_not_a_share_request_and_serves_on(
        two_shards: tuple[ShardCluster, int]) -> None:
    cluster, _ = two_shards
    fetch = encode_request(78, 7, "c", share_fetch(group_on(0), 0, uuid.uuid4(), [0]))  # a group of shard 0
    versions = encode_request(18, 7, "c", build(request_schema(18, 3), {"client_software_name": "t",
                                                                      "client_software_version": "1"}))
    client = await WireClient.connect(cluster.port + 1)
    try:
        for frame in (b"", b"\x00\x00\x00\x02ab", versions, fetch[:-3]):
            answer = await client.request(forward(BROKER, frame))
            assert (answer.error_code, answer.response) == (ErrorCode.INVALID_REQUEST, b""), frame
        # A well-formed one is served on the same connection; shard 1 does not hold the group and
        # never forwards it on: NOT_LEADER_OR_FOLLOWER, as while a group moves.
        served = await client.request(forward(BROKER, fetch))
        assert served.error_code == ErrorCode.NONE
        correlation_id, inner = decode_response(78, 2, served.response[4:])
        assert correlation_id == 7
        assert [p.error_code for t in inner.responses for p in t.partitions] == [ErrorCode.NOT_LEADER_OR_FOLLOWER]
    finally:
        await client.close()


async def on_shard_0(port: int, group: str) -> WireClient:
    for _ in range(50):
        client = await WireClient.connect(port)
        described = await client.request(req(SHARE_GROUP_DESCRIBE, 1, group_ids=[group],
                                              include_authorized_operations=False))
        if described.groups[0].error_code == ErrorCode.NOT_COORDINATOR:
            return client
        await client.close()
    raise AssertionError("50 connections in a row reached shard 1")


@pytest.mark.asyncio
async def test_a_share_fetch_whose_holder_is_gone_is_answered_not_leader_or_follower(
        two_shards: tuple[ShardCluster, int], kafka_broker: KafkaBroker) -> None:
    """Last in the module: shard 1 (the holder) is frozen, then SIGKILLed, so the broker's listener is
    shard 0's alone."""
    cluster, base = two_shards
    topic = make_topic(kafka_broker)
    group = group_on(1, prefix=f"gone-{uuid.uuid4().hex[:4]}")
    coordinator = await WireClient.connect(cluster.port + 1)
    try:
        _, tps = await join(coordinator, group, topic)
    finally:
        await coordinator.close()
    # First frozen (SIGSTOP: its socket still accepts, nothing answers): the forward gives up after the
    # fetch's wait plus ANSWER_TIMEOUT_S instead of holding the client's fetch for ever. The client
    # must be on shard 0 (the kernel hands each connection to either shard): the one where
    # ShareGroupDescribe of shard 1's group is NOT_COORDINATOR.
    client = await on_shard_0(base + BROKER, group)
    os.kill(cluster.procs[1].pid, signal.SIGSTOP)
    try:
        started = time.monotonic()
        answer = await client.request(share_fetch(group, 0, tps.topic_id, [0, 1]), timeout=ANSWER_TIMEOUT_S + 20)
        assert ANSWER_TIMEOUT_S <= time.monotonic() - started < ANSWER_TIMEOUT_S + 10
        assert {p.error_code for t in answer.responses for p in t.partitions} == {ErrorCode.NOT_LEADER_OR_FOLLOWER}
    finally:
        await client.close()
    cluster.kill(1)
    client = await WireClient.connect(base + BROKER)
    try:
        answer = await client.request(share_fetch(group, 0, tps.topic_id, [0, 1], acks={0: [(0, 0)]}))
        assert answer.error_code == ErrorCode.NONE
        rows = [p for t in answer.responses for p in t.partitions]
        assert sorted(p.partition_index for p in rows) == [0, 1]
        assert all(p.error_code == p.acknowledge_error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER for p in rows)
        assert all(p.current_leader.leader_id == BROKER for p in rows)
        assert [(n.node_id, n.port) for n in answer.node_endpoints] == [(BROKER, base + BROKER)]
    finally:
        await client.close()
