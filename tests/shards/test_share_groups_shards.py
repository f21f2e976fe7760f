"""Share groups on an embedded node of two shards, wherever their group id is placed.

Every partition is led by shard 0 (the data plane), so clients send ShareFetch and ShareAcknowledge
there; a group placed on shard 1 lives on shard 1, which reads shard 0's data plane over the wire
while shard 0 forwards it the group's fetches (``coordinator/share/shard_zero.py``,
``share/forward.py``). Proved with real servers:

- a group placed on shard 0 is served from any bootstrap node;
- three confluent-kafka ShareConsumers of a group placed on shard 1 share 2,000 records of a
  2-partition topic: each delivered (so held) by one consumer, once, and acknowledged; two Java
  ``KafkaShareConsumer``s (4.3.0) likewise share 1,000;
- a connection to shard 0 that closes holding records of such a group: they come back at once,
  long before their acquisition lock (30 s) would free them;
- shard 1 SIGKILLed and restarted by the supervisor: what was acknowledged before never comes back,
  what was only held does; shard 0 killed and restarted: shard 1 reads it again;
- the group APIs of shard 1's group are answered by shard 1 (FindCoordinator's), a group of the
  other shard NOT_COORDINATOR there.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from protocol.errors import ErrorCode
from tests.interop import test_share_java
from tests.interop.share_support import all_records, consume_until, share_consumer
from tests.interop.test_share_java import java_readers_get_each_record_once
from tests.shards.cluster import ShardCluster, group_on, running_cluster
from tests.shards.supervised import Supervised
from tests.share.test_forward import share_among
from tests.sidecar.test_share_groups import acquired, join, share_fetch
from tests.support.clients import produce
from tests.support.polling import eventually
from tests.support.server import free_port_block
from tests.support.wire import WireClient, call, request

pytestmark = pytest.mark.interop

TOPIC = "queue"
PARTITIONS = 2
COUNT = 200
NODE_ID = 1  # node.id's default: shard k is node 1 + k
share_reader = test_share_java.share_reader  # the fixture: Kafka 4.3.0's Java share consumer, compiled once
OVERRIDES = {"topics": f"{TOPIC}:{PARTITIONS}", "share.auto.offset.reset": "earliest",
             "group.share.heartbeat.interval.ms": "500"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ShardCluster]:
    with running_cluster(tmp_path_factory.mktemp("share"), overrides=OVERRIDES) as started:
        yield started


def test_a_share_group_placed_on_shard_0_is_served_from_any_bootstrap_node(cluster: ShardCluster) -> None:
    topic = fresh_topic(cluster)
    produce(cluster.bootstrap(1), topic, COUNT, PARTITIONS)
    consumer = share_consumer(cluster.bootstrap(1), topic, group_on(0, prefix=f"q-{uuid.uuid4().hex[:4]}"))
    seen: list[tuple[int, int]] = []
    consume_until(consumer, lambda: len(seen) >= COUNT, seen, timeout=30)
    consumer.close()
    assert sorted(seen) == sorted(all_records(COUNT))  # each once


def test_three_share_consumers_of_a_group_placed_on_shard_1_share_every_record_once(cluster: ShardCluster) -> None:
    topic = fresh_topic(cluster)
    count = 2_000
    produce(cluster.bootstrap(0), topic, count, PARTITIONS)
    group = group_on(1, prefix=f"three-{uuid.uuid4().hex[:4]}")
    seen = share_among(cluster.bootstrap(0), topic, group, 3, count, timeout=20)  # each acknowledged, no error
    everything = [d for got in seen for d in got]
    assert len(everything) == count and set(everything) == all_records(count)  # none twice, none missing


@pytest.mark.asyncio
async def test_java_share_consumers_of_a_group_placed_on_shard_1_get_every_record_once(
        cluster: ShardCluster, share_reader: str) -> None:
    topic = fresh_topic(cluster)
    count = 1_000
    produce(cluster.bootstrap(0), topic, count, PARTITIONS)
    group = group_on(1, prefix=f"java-{uuid.uuid4().hex[:4]}")
    await java_readers_get_each_record_once(share_reader, cluster.bootstrap(1), group, topic, all_records(count),
                                            timeout=30)


@pytest.mark.asyncio
async def test_records_held_by_a_closed_connection_to_shard_0_come_back_at_once(cluster: ShardCluster) -> None:
    topic = fresh_topic(cluster)
    group = group_on(1, prefix=f"closed-{uuid.uuid4().hex[:4]}")
    coordinator = await WireClient.connect(cluster.port + 1)  # the group's coordinator: shard 1
    try:
        _, tps = await join(coordinator, group, topic)
        produce(cluster.bootstrap(0), topic, 10, PARTITIONS)
        every = {p: [(0, 4)] for p in range(PARTITIONS)}
        first = await acquiring(cluster.port, group, tps.topic_id, every, "the ten records")
        await first.close()  # holding all ten, acknowledged none
        second = await acquiring(cluster.port, group, tps.topic_id, every,
                                 "the records released by the first connection's close", timeout=5)
        accepted = await second.request(share_fetch(group, 1, tps.topic_id, [], acks=every))
        assert all(p.acknowledge_error_code == 0 for t in accepted.responses for p in t.partitions), accepted
        await second.close()
    finally:
        await coordinator.close()


def test_the_group_apis_of_a_group_placed_on_shard_1_are_answered_by_shard_1(cluster: ShardCluster) -> None:
    here, there = group_on(1, prefix="raw"), group_on(0, prefix="raw")
    found = ask(cluster, 0, 10, 3, key=here, key_type=0)  # as a share consumer finds its coordinator
    assert (found.error_code, found.node_id, found.port) == (ErrorCode.NONE, NODE_ID + 1, cluster.port + 1)
    assert ask(cluster, 1, 76, 1, group_id=there, member_id=uuid.uuid4().hex[:22], member_epoch=0, rack_id=None,
               subscribed_topic_names=[TOPIC]).error_code == ErrorCode.NOT_COORDINATOR
    joined = ask(cluster, 1, 76, 1, group_id=here, member_id=uuid.uuid4().hex[:22], member_epoch=0, rack_id=None,
                 subscribed_topic_names=[TOPIC])
    assert joined.error_code == ErrorCode.NONE and joined.member_epoch > 0
    described = ask(cluster, 1, 77, 1, group_ids=[here, there], include_authorized_operations=False)
    assert [(g.group_id, g.error_code) for g in described.groups] == [
        (here, ErrorCode.NONE), (there, ErrorCode.NOT_COORDINATOR)]
    offsets = ask(cluster, 1, 90, 1, groups=[{"group_id": here, "topics": None}])
    assert [g.error_code for g in offsets.groups] == [ErrorCode.NONE]


@pytest.mark.asyncio
async def test_shard_1_killed_and_restarted_by_the_supervisor_never_delivers_an_acknowledged_record_again(
        tmp_path: Path) -> None:
    node = Supervised(tmp_path / "data", 2, overrides=OVERRIDES)
    node.start()
    try:
        group = group_on(1, prefix=f"killed-{uuid.uuid4().hex[:4]}")
        coordinator = await WireClient.connect(node.shard_port(1))
        _, tps = await join(coordinator, group, TOPIC)
        await coordinator.close()
        produce(node.bootstrap, TOPIC, 20, PARTITIONS)  # offsets 0-9 of each partition
        accepted = {p: [(0, 9)] for p in range(PARTITIONS)}
        client = await acquiring(node.port, group, tps.topic_id, accepted, "the twenty records")
        answer = await client.request(share_fetch(group, 1, tps.topic_id, [], acks=accepted))
        assert all(p.acknowledge_error_code == 0 for t in answer.responses for p in t.partitions), answer
        await client.close()  # acknowledged: in shard 1's log before that answer
        produce(node.bootstrap, TOPIC, 4, PARTITIONS)  # offsets 10-11: held by a connection when shard 1 dies
        held = {p: [(10, 11)] for p in range(PARTITIONS)}
        holder = await acquiring(node.port, group, tps.topic_id, held, "the four new records")

        node.wait_restarted(1, node.kill_shard(1))

        # The member's session and the lock died with shard 1: it comes back with what its log
        # holds, the accepted records finished and the held ones available again. A new member
        # (the old one's heartbeat never reached the new process) gets the held ones, never more.
        coordinator = await WireClient.connect(node.shard_port(1))
        await join(coordinator, group, TOPIC)
        await coordinator.close()
        again = await acquiring(node.port, group, tps.topic_id, held, "the held records back after the restart",
                                timeout=30)
        answer = await again.request(share_fetch(group, 1, tps.topic_id, [], acks=held))
        assert all(p.acknowledge_error_code == 0 for t in answer.responses for p in t.partitions), answer
        nothing = await again.request(share_fetch(group, 2, tps.topic_id, list(range(PARTITIONS))))
        assert acquired(nothing) == {p: [] for p in range(PARTITIONS)}, acquired(nothing)
        await holder.close()
        await again.close()
    finally:
        node.stop()


@pytest.mark.asyncio
async def test_shard_1_reads_shard_0_again_once_shard_0_is_restarted(tmp_path: Path) -> None:
    with running_cluster(tmp_path, overrides=OVERRIDES) as node:
        group = group_on(1, prefix=f"reread-{uuid.uuid4().hex[:4]}")
        coordinator = await WireClient.connect(node.port + 1)
        try:
            _, tps = await join(coordinator, group, TOPIC)
            produce(node.bootstrap(0), TOPIC, 10, PARTITIONS)
            first = {p: [(0, 4)] for p in range(PARTITIONS)}
            client = await acquiring(node.port, group, tps.topic_id, first, "the first ten records")
            answer = await client.request(share_fetch(group, 1, tps.topic_id, [], acks=first))
            assert all(p.acknowledge_error_code == 0 for t in answer.responses for p in t.partitions), answer
            await client.close()

            node.kill(0)  # shard 1's reading connection to shard 0 dies with it
            node.start_shard(0)
            produce(node.bootstrap(0), TOPIC, 10, PARTITIONS)
            then = {p: [(5, 9)] for p in range(PARTITIONS)}
            client = await acquiring(node.port, group, tps.topic_id, then, "the records produced after the restart",
                                     timeout=30)
            await client.close()
        finally:
            await coordinator.close()


@pytest.mark.asyncio
async def test_a_forwarded_answer_names_shard_0_at_the_clients_own_listener(tmp_path: Path) -> None:
    """Shard 1 answers as the forwarding listener (the first PLAINTEXT one) knows shard 0; a client
    on INTERNAL is told shard 0's INTERNAL address, where it sends its next ShareFetch."""
    plain = internal = free_port_block(2)
    while abs(internal - plain) < 2:  # two separate blocks
        internal = free_port_block(2)
    listen = f"PLAINTEXT://127.0.0.1:{plain},INTERNAL://127.0.0.1:{internal}"
    overrides = {**OVERRIDES, "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
                 "advertised.listeners": f"PLAINTEXT://127.0.0.1:{plain},INTERNAL://localhost:{internal}"}
    with running_cluster(tmp_path, overrides=overrides, listen=listen, port=plain):
        group = group_on(1, prefix=f"listeners-{uuid.uuid4().hex[:4]}")
        coordinator = await WireClient.connect(plain + 1)
        try:
            _, tps = await join(coordinator, group, TOPIC)
        finally:
            await coordinator.close()
        for base, host in ((internal, "localhost"), (plain, "127.0.0.1")):
            client = await WireClient.connect(base)
            try:
                answer = await client.request(share_fetch(group, 0, tps.topic_id, list(range(PARTITIONS))))
                assert [p.error_code for t in answer.responses for p in t.partitions] == [0] * PARTITIONS, answer
                assert [(n.node_id, n.host, n.port) for n in answer.node_endpoints] == [(NODE_ID, host, base)]
            finally:
                await client.close()


# ---- helpers -----------------------------------------------------------------------------------------------


def fresh_topic(cluster: ShardCluster) -> str:
    """A 2-partition topic of its own, created through shard 0, so each test counts from offset 0."""
    topic = f"{TOPIC}-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap(0)})
    admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)])[topic].result(30)
    return topic


async def acquiring(port: int, group: str, topic_id: uuid.UUID, every: dict[int, list[tuple[int, int]]],
                    message: str, timeout: float = 15) -> WireClient:
    """A connection to shard 0 (``port``) whose first ShareFetch of ``group`` acquires exactly
    ``every``: tried with a new connection until one does (the records appear, or are released)."""

    async def attempt() -> WireClient | None:
        client = await WireClient.connect(port)
        answer = await client.request(share_fetch(group, 0, topic_id, list(range(PARTITIONS))))
        assert answer.error_code == 0, answer
        if all(p.error_code == 0 for t in answer.responses for p in t.partitions) and acquired(answer) == every:
            return client
        await client.close()  # releases whatever it took: the next attempt sees it again
        return None

    result: WireClient = await eventually(attempt, timeout=timeout, interval=0.1, message=message)
    return result


def ask(cluster: ShardCluster, shard: int, api_key: int, version: int, **fields: Any) -> Any:
    return asyncio.run(call(cluster.port + shard, request(api_key, version, **fields)))
