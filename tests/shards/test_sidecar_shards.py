"""Sidecar mode over two shard processes, in front of a real upstream (librdkafka's 3-broker mock
cluster): shard k is coordinator node `sidecar.node.id + k` on port P+k, both shards open every
upstream broker's listener (SO_REUSEPORT) and forward through it.

- A KIP-848 group on shard 1 and a classic group on shard 0 consume what an idempotent producer
  wrote through the sidecar, exactly once in the committed view; FindCoordinator names each group's
  node on every listener; the commits are on the owner shard only (NOT_COORDINATOR on the other)
  and mirrored upstream; clients are handed both coordinator nodes and never an upstream address.
- Forwarded requests are served by both processes (their /metrics count them).
- SIGKILL of shard 1: shard 0's group goes on consuming every partition and a producer goes on
  producing, through shard 0 alone; shard 1 restarted coordinates its groups again.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

from coordinator.shards.placement import shard_data_dir
from protocol.build import build
from protocol.errors import ErrorCode
from protocol.schemas import request_schema
from tests.shards.cluster import ShardCluster, group_on
from tests.sidecar.conftest import Upstream, free_base_port, start_mock_cluster, stop_process
from tests.sidecar.support import (
    Committed,
    consume_committing,
    group_offsets,
    high_watermarks,
    metadata_addresses,
    wait_for,
)
from tests.support.metrics import scrape
from tests.support.wire import WireClient

pytestmark = pytest.mark.interop

SIDECAR_NODE_ID = 1_000_000  # sidecar.node.id's default: shard k is node 1000000 + k
UPSTREAM_BROKERS = range(1, 4)  # the mock cluster's broker ids
PARTITIONS = 4  # of a topic the mock cluster auto-creates (it serves no CreateTopics)


@pytest.fixture
def upstream() -> Iterator[Upstream]:
    proc, bootstrap = start_mock_cluster(3)
    try:
        yield Upstream(bootstrap, set(bootstrap.split(",")), proc)
    finally:
        stop_process(proc)


@pytest.fixture
def sidecar(tmp_path: Path, upstream: Upstream) -> Iterator[tuple[ShardCluster, int]]:
    base = free_base_port()
    cluster = ShardCluster(tmp_path / "data", 2, overrides={
        "upstream.bootstrap.servers": upstream.bootstrap,
        "sidecar.listener.base.port": str(base),
        "upstream.offsets.mirror.interval.ms": "200",
        "log.flush.policy": "none",
        "group.consumer.heartbeat.interval.ms": "500",
        "group.consumer.min.heartbeat.interval.ms": "500",
    })
    try:
        yield cluster.start(), base
    finally:
        cluster.stop()


def produce(bootstrap: str, topic: str, values: range) -> set[str]:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})
    failures: list[Any] = []
    for i in values:
        producer.produce(topic, key=f"key-{i % 97}", value=str(i).encode(),
                         on_delivery=lambda err, msg: failures.append(err) if err else None)
    assert producer.flush(30) == 0, "messages left unsent"
    assert not failures, failures[:3]
    return metadata_addresses(producer)


def consumer(bootstrap: str, group: str, protocol: str) -> Consumer:
    config: dict[str, Any] = {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                              "enable.auto.commit": False, "group.protocol": protocol}
    if protocol == "classic":
        config.update({"session.timeout.ms": 10000, "heartbeat.interval.ms": 300})
    return Consumer(config)


def assert_exactly_once(committed: Committed, values: range) -> None:
    positions = Counter((p, o) for p, o, _ in committed)
    assert [k for k, n in positions.items() if n > 1] == [], "a message was committed twice"
    assert sorted(int(v) for _, _, v in committed) == list(values), "the committed view is not every message once"


async def _request(port: int, request: Any) -> Any:
    client = await WireClient.connect(port)
    try:
        return await client.request(request)
    finally:
        await client.close()


def find_coordinator(port: int, group: str) -> tuple[int, int]:
    """FindCoordinator v3 for a group key at one listener: (node id, port)."""
    response = asyncio.run(_request(port, build(request_schema(10, 3), {"key": group, "key_type": 0})))
    assert response.error_code == 0
    return int(response.node_id), int(response.port)


def committed_at(port: int, group: str, topic: str) -> tuple[int, dict[int, int]]:
    """OffsetFetch v7 at one listener: (error code, partition -> committed offset)."""
    response = asyncio.run(_request(port, build(request_schema(9, 7), {
        "group_id": group, "topics": [{"name": topic, "partition_indexes": list(range(PARTITIONS))}],
        "require_stable": False})))
    return int(response.error_code), {int(p.partition_index): int(p.committed_offset) for t in response.topics
                                      for p in t.partitions if p.committed_offset >= 0}


def metric(cluster: ShardCluster, shard: int, sample: str) -> float:
    port = int((shard_data_dir(cluster.root, shard) / "metrics.port").read_text())
    return scrape(port).get(sample, 0.0)


def requests_served(cluster: ShardCluster, shard: int, api: str) -> float:
    return metric(cluster, shard, f'coordinator_requests_total{{api="{api}"}}')


def forwarded_metadata(port: int, connections: int) -> None:
    """Metadata v1 (forwarded upstream, rewritten) on `connections` new connections to one port."""

    async def one() -> None:
        response = await _request(port, build(request_schema(3, 1), {"topics": []}))
        assert {int(b.node_id) for b in response.brokers} >= set(UPSTREAM_BROKERS)

    async def many() -> None:
        await asyncio.gather(*(one() for _ in range(connections)))

    asyncio.run(many())


def test_groups_of_both_shards_through_the_sidecar(sidecar: tuple[ShardCluster, int], upstream: Upstream) -> None:
    cluster, base = sidecar
    topic, messages = "orders", range(3000)
    ours = {cluster.bootstrap(0), cluster.bootstrap(1)} | {f"127.0.0.1:{base + n}" for n in UPSTREAM_BROKERS}
    handed = produce(cluster.bootstrap(0), topic, messages)  # auto-created upstream by the forwarded Metadata
    ends = high_watermarks(upstream.bootstrap, topic)
    assert len(ends) == PARTITIONS and sum(ends.values()) == len(messages)

    groups = {"consumer": (group_on(1, prefix="kip848"), 1), "classic": (group_on(0, prefix="classic"), 0)}
    upstream_admin = AdminClient({"bootstrap.servers": upstream.bootstrap})
    for protocol, (group, shard) in groups.items():
        member = consumer(cluster.bootstrap(1 - shard), group, protocol)  # bootstrapped at the other node
        member.subscribe([topic])
        committed: Committed = []
        try:
            consume_committing(member, committed, lambda committed=committed: len(committed) >= len(messages))
            handed |= metadata_addresses(member)
        finally:
            member.close()
        assert_exactly_once(committed, messages)
        # Its node, wherever FindCoordinator is asked (both nodes, a broker's listener).
        for port in (cluster.port, cluster.port + 1, base + 2):
            assert find_coordinator(port, group) == (SIDECAR_NODE_ID + shard, cluster.port + shard)
        assert committed_at(cluster.port + shard, group, topic) == (0, ends)
        wait_for(lambda group=group: group_offsets(upstream_admin, group, topic, PARTITIONS) == ends,
                 message=f"{protocol} group's offsets mirrored upstream")
        # The other node refuses it, and does not import the group's (now mirrored) offsets.
        assert committed_at(cluster.port + 1 - shard, group, topic) == (ErrorCode.NOT_COORDINATOR, {})
        assert metric(cluster, 1 - shard, 'coordinator_sidecar_offset_imports_total{outcome="imported"}') == 0

    # Both coordinator nodes are brokers in the Metadata clients get; no upstream address leaks.
    assert {cluster.bootstrap(0), cluster.bootstrap(1)} <= handed <= ours, handed
    assert not handed & upstream.addresses

    # The data plane went through the sidecar, and every process forwards: the kernel spreads
    # a broker listener's new connections over both shards (one in 2^31 chance of all on one).
    assert sum(requests_served(cluster, k, "Produce") for k in (0, 1)) > 0
    assert sum(requests_served(cluster, k, "Fetch") for k in (0, 1)) > 0
    before = [requests_served(cluster, k, "Metadata") for k in (0, 1)]
    forwarded_metadata(base + 1, 32)
    after = [requests_served(cluster, k, "Metadata") for k in (0, 1)]
    assert after[0] > before[0] and after[1] > before[1], (before, after)
    assert sum(after) - sum(before) >= 32


def test_shard_kill_leaves_shard_0_groups_and_forwarding(sidecar: tuple[ShardCluster, int],
                                                         upstream: Upstream) -> None:
    cluster, base = sidecar
    topic, first, second = "payments", range(2000), range(2000, 3000)
    produce(cluster.bootstrap(0), topic, first)
    group = group_on(0, prefix="survivor")
    member = consumer(cluster.bootstrap(0), group, "consumer")
    member.subscribe([topic])
    committed: Committed = []
    try:
        consume_committing(member, committed, lambda: len(committed) >= len(first) // 2)
        cluster.kill(1)
        # Shard 0 alone: the group keeps its member and consumes every partition (connections
        # that were on shard 1 reconnect to the survivor), and a new producer gets through.
        handed = produce(cluster.bootstrap(0), topic, second)
        consume_committing(member, committed, lambda: len(committed) >= len(first) + len(second))
        assignment = {tp.partition for tp in member.assignment()}
    finally:
        member.close()
    assert_exactly_once(committed, range(3000))
    assert assignment == set(range(PARTITIONS))
    assert not handed & upstream.addresses
    ends = high_watermarks(upstream.bootstrap, topic)
    assert committed_at(cluster.port, group, topic) == (0, ends)
    before = requests_served(cluster, 0, "Metadata")
    forwarded_metadata(base + 3, 8)
    assert requests_served(cluster, 0, "Metadata") >= before + 8

    # Shard 1 back (as the supervisor restarts it): its groups are served again, on its node.
    cluster.start_shard(1)
    late = group_on(1, prefix="late")
    assert find_coordinator(cluster.port, late) == (SIDECAR_NODE_ID + 1, cluster.port + 1)
    member = consumer(cluster.bootstrap(0), late, "classic")
    member.subscribe([topic])
    committed = []
    try:
        consume_committing(member, committed, lambda: len(committed) >= 3000)
    finally:
        member.close()
    assert_exactly_once(committed, range(3000))
    assert committed_at(cluster.port + 1, late, topic) == (0, ends)


def test_a_transactional_commit_goes_to_the_shard_of_its_group(sidecar: tuple[ShardCluster, int],
                                                                upstream: Upstream) -> None:
    """TxnOffsetCommit is served by the shard that coordinates the group (checked there, then
    forwarded upstream); the other shard answers NOT_COORDINATOR, as for every group API."""
    cluster, _ = sidecar
    topic = "txn-sharded"
    produce(cluster.bootstrap(), topic, range(4))

    def txn_commit(port: int, group: str) -> list[int]:
        response = asyncio.run(_request(port, build(request_schema(28, 3), {
            "transactional_id": "tx-sharded", "group_id": group, "producer_id": 1, "producer_epoch": 0,
            "generation_id": 1, "member_id": "m", "group_instance_id": None, "topics": [{"name": topic, "partitions": [
                {"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1,
                 "committed_metadata": ""}]}]})))
        return [int(p.error_code) for t in response.topics for p in t.partitions]

    shards = set()
    for group in ("txn-a", "txn-b", "txn-c", "txn-d", "txn-e", "txn-f"):
        _, port = find_coordinator(cluster.port, group)
        shards.add(port)
        other = cluster.port + 1 - (port - cluster.port)
        assert txn_commit(other, group) == [ErrorCode.NOT_COORDINATOR]
        # Its own shard checks the member: a generation for a group it does not have.
        wait_for(lambda port=port, group=group: txn_commit(port, group) == [ErrorCode.ILLEGAL_GENERATION],
                 message="the topic in the shard's catalog")
    assert shards == {cluster.port, cluster.port + 1}  # both shards served some
