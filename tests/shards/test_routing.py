"""Two shard processes behave as one Kafka cluster to raw kio requests: every node lists both nodes,
FindCoordinator names each group's node, a group request on the wrong node is NOT_COORDINATOR
(whole or per group), and a topic created on one node is on the other before the response."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from coordinator.dataplane.producer_ids import SHARD_ID_BITS
from protocol.build import build
from protocol.errors import ErrorCode
from protocol.private import DESCRIBE_GROUP_GENERATIONS
from protocol.schemas import request_schema
from tests.shards.cluster import ShardCluster, group_on, running_cluster
from tests.support.server import free_port_block
from tests.support.wire import WireClient

NODE_ID = 1  # node.id's default: shard k is node 1 + k
NOT_COORDINATOR = ErrorCode.NOT_COORDINATOR
SHARD_ID_BITS_START = 1 << SHARD_ID_BITS  # shard 1's first producer id


def req(api_key: int, version: int, **fields: Any) -> Any:
    return build(request_schema(api_key, version), fields)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ShardCluster]:
    with running_cluster(tmp_path_factory.mktemp("routing")) as started:
        yield started


async def ask(cluster: ShardCluster, shard: int, request: Any) -> Any:
    client = await WireClient.connect(cluster.port + shard)
    try:
        return await client.request(request)
    finally:
        await client.close()


def nodes(cluster: ShardCluster) -> list[tuple[int, str, int]]:
    return [(NODE_ID + k, "127.0.0.1", cluster.port + k) for k in range(cluster.shards)]


async def create_topic(cluster: ShardCluster, shard: int, name: str, partitions: int) -> Any:
    topic = {"name": name, "num_partitions": partitions, "replication_factor": -1, "assignments": [], "configs": []}
    response = await ask(cluster, shard, req(19, 7, topics=[topic], timeout=5000))
    assert response.topics[0].error_code == 0, response
    return response.topics[0]


@pytest.mark.asyncio
@pytest.mark.parametrize("shard", [0, 1])
async def test_metadata_and_describe_cluster_list_every_node(cluster: ShardCluster, shard: int) -> None:
    await create_topic(cluster, 1 - shard, f"listed-{shard}", 3)  # on the other node
    metadata = await ask(cluster, shard, req(3, 12, topics=None, allow_auto_topic_creation=False,
                                             include_topic_authorized_operations=False))
    assert sorted((b.node_id, b.host, b.port) for b in metadata.brokers) == nodes(cluster)
    assert metadata.controller_id == NODE_ID
    listed = {t.name: t for t in metadata.topics}
    assert {(p.leader_id, tuple(p.replica_nodes), tuple(p.isr_nodes)) for p in listed[f"listed-{shard}"].partitions} == {
        (NODE_ID, (NODE_ID,), (NODE_ID,))}  # the data plane lives on shard 0
    described = await ask(cluster, shard, req(60, 1, include_cluster_authorized_operations=False, endpoint_type=1))
    assert sorted((b.broker_id, b.host, b.port) for b in described.brokers) == nodes(cluster)
    assert described.controller_id == NODE_ID


@pytest.mark.asyncio
@pytest.mark.parametrize("shard", [0, 1])
async def test_find_coordinator_names_each_groups_node(cluster: ShardCluster, shard: int) -> None:
    groups = {k: group_on(k) for k in range(2)}
    for owner, group in groups.items():
        for version in (0, 3):
            found = await ask(cluster, shard, req(10, version, key=group, key_type=0))
            assert (found.error_code, found.node_id, found.port) == (0, NODE_ID + owner, cluster.port + owner)
    batched = await ask(cluster, shard, req(10, 4, key_type=0, coordinator_keys=list(groups.values())))
    assert {c.key: (c.error_code, c.node_id, c.port) for c in batched.coordinators} == {
        group: (0, NODE_ID + owner, cluster.port + owner) for owner, group in groups.items()}
    # Transaction keys keep today's answer: the node asked.
    txn = await ask(cluster, shard, req(10, 4, key_type=1, coordinator_keys=["tx"]))
    assert txn.coordinators[0].node_id == NODE_ID + shard


def join(group: str, member_id: str = "") -> Any:
    return req(11, 5, group_id=group, session_timeout=10000, rebalance_timeout=10000, member_id=member_id,
               group_instance_id=None, protocol_type="consumer", protocols=[{"name": "range", "metadata": b""}])


def commit(group: str, topic: str, offset: int) -> Any:
    return req(8, 8, group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
               topics=[{"name": topic, "partitions": [{"partition_index": 0, "committed_offset": offset,
                                                        "committed_leader_epoch": -1, "committed_metadata": ""}]}])


@pytest.mark.asyncio
async def test_single_group_requests_on_the_wrong_node_are_not_coordinator(cluster: ShardCluster) -> None:
    await create_topic(cluster, 1, "commits", 1)
    mine, theirs = group_on(1, prefix="single"), group_on(0, prefix="single")
    # On node 1 (shard 1): its own group is served, shard 0's is refused whole.
    assert (await ask(cluster, 1, join(mine))).error_code == ErrorCode.MEMBER_ID_REQUIRED
    refused = await ask(cluster, 1, join(theirs))
    assert (refused.error_code, refused.member_id) == (NOT_COORDINATOR, "")
    assert (await ask(cluster, 1, req(12, 4, group_id=theirs, generation_id=1, member_id="m",
                                      group_instance_id=None))).error_code == NOT_COORDINATOR
    assert (await ask(cluster, 1, req(14, 5, group_id=theirs, generation_id=1, member_id="m", group_instance_id=None,
                                      protocol_type="consumer", protocol_name="range",
                                      assignments=[]))).error_code == NOT_COORDINATOR
    assert (await ask(cluster, 1, req(13, 5, group_id=theirs, members=[{"member_id": "m"}]))).error_code == \
        NOT_COORDINATOR
    ok = await ask(cluster, 1, commit(mine, "commits", 7))
    assert ok.topics[0].partitions[0].error_code == 0
    wrong = await ask(cluster, 1, commit(theirs, "commits", 7))
    assert wrong.topics[0].partitions[0].error_code == NOT_COORDINATOR
    fetched = await ask(cluster, 1, req(9, 7, group_id=mine, topics=None, require_stable=False))
    assert fetched.error_code == 0 and fetched.topics[0].partitions[0].committed_offset == 7
    assert (await ask(cluster, 1, req(9, 7, group_id=theirs, topics=None, require_stable=False))).error_code == \
        NOT_COORDINATOR
    deleted = await ask(cluster, 1, req(47, 0, group_id=theirs, topics=[{"name": "commits",
                                                                           "partitions": [{"partition_index": 0}]}]))
    assert deleted.error_code == NOT_COORDINATOR
    heartbeat = await ask(cluster, 1, req(68, 1, group_id=theirs, member_id=str(uuid.uuid4()), member_epoch=0,
                                          instance_id=None, rack_id=None, rebalance_timeout=30000,
                                          subscribed_topic_names=["commits"], subscribed_topic_regex="",
                                          server_assignor=None, topic_partitions=[]))
    assert heartbeat.error_code == NOT_COORDINATOR
    # An empty group id is the core's to refuse (INVALID_GROUP_ID), as Kafka checks it first.
    assert (await ask(cluster, 1, join(""))).error_code == ErrorCode.INVALID_GROUP_ID


@pytest.mark.asyncio
async def test_multi_group_requests_serve_their_groups_and_refuse_the_others(cluster: ShardCluster) -> None:
    await create_topic(cluster, 0, "multi", 1)
    mine, theirs = group_on(0, prefix="multi"), group_on(1, prefix="multi")
    assert (await ask(cluster, 0, commit(mine, "multi", 3))).topics[0].partitions[0].error_code == 0
    assert (await ask(cluster, 1, commit(theirs, "multi", 4))).topics[0].partitions[0].error_code == 0

    described = await ask(cluster, 0, req(15, 5, groups=[mine, theirs], include_authorized_operations=False))
    by_id = {g.group_id: g for g in described.groups}
    assert by_id[mine].error_code == 0 and by_id[mine].group_state == "Empty"
    assert by_id[theirs].error_code == NOT_COORDINATOR

    fetched = await ask(cluster, 0, req(9, 9, groups=[
        {"group_id": g, "member_id": None, "member_epoch": -1, "topics": None} for g in (mine, theirs)],
        require_stable=False))
    by_id = {g.group_id: g for g in fetched.groups}
    assert by_id[mine].error_code == 0 and by_id[mine].topics[0].partitions[0].committed_offset == 3
    assert (by_id[theirs].error_code, list(by_id[theirs].topics)) == (NOT_COORDINATOR, [])
    only_theirs = await ask(cluster, 0, req(9, 9, groups=[
        {"group_id": theirs, "member_id": None, "member_epoch": -1, "topics": None}], require_stable=False))
    assert [g.error_code for g in only_theirs.groups] == [NOT_COORDINATOR]

    cgd = await ask(cluster, 0, req(69, 1, group_ids=[mine, theirs], include_authorized_operations=False))
    assert {g.group_id: g.error_code for g in cgd.groups}[theirs] == NOT_COORDINATOR

    listed = await ask(cluster, 0, req(16, 5, states_filter=[], types_filter=[]))
    names = {g.group_id for g in listed.groups}
    assert mine in names and theirs not in names

    removed = await ask(cluster, 0, req(42, 2, groups_names=[mine, theirs]))
    assert {r.group_id: r.error_code for r in removed.results} == {mine: 0, theirs: NOT_COORDINATOR}
    kept = await ask(cluster, 1, req(9, 7, group_id=theirs, topics=None, require_stable=False))
    assert kept.error_code == 0 and kept.topics[0].partitions[0].committed_offset == 4


@pytest.mark.asyncio
async def test_topics_changed_on_one_node_are_on_the_other_before_the_response(cluster: ShardCluster) -> None:
    created = await create_topic(cluster, 1, "made-on-one", 4)
    seen = await ask(cluster, 0, req(3, 12, topics=[{"name": "made-on-one", "topic_id": None}],
                                     allow_auto_topic_creation=False, include_topic_authorized_operations=False))
    (topic,) = seen.topics
    assert (topic.error_code, topic.topic_id, len(topic.partitions)) == (0, created.topic_id, 4)
    again = await ask(cluster, 0, req(19, 7, topics=[{"name": "made-on-one", "num_partitions": 1,
                                                      "replication_factor": -1, "assignments": [], "configs": []}],
                                      timeout=5000))
    assert again.topics[0].error_code == ErrorCode.TOPIC_ALREADY_EXISTS

    auto = await ask(cluster, 1, req(3, 12, topics=[{"name": "auto-on-one", "topic_id": None}],
                                     allow_auto_topic_creation=True, include_topic_authorized_operations=False))
    assert auto.topics[0].error_code == 0
    on_zero = await ask(cluster, 0, req(3, 12, topics=[{"name": "auto-on-one", "topic_id": None}],
                                        allow_auto_topic_creation=False, include_topic_authorized_operations=False))
    assert (on_zero.topics[0].error_code, on_zero.topics[0].topic_id) == (0, auto.topics[0].topic_id)

    deleted = await ask(cluster, 0, req(20, 6, topics=[{"name": "made-on-one", "topic_id": None}], timeout=5000))
    assert deleted.responses[0].error_code == 0
    gone = await ask(cluster, 1, req(3, 12, topics=[{"name": "made-on-one", "topic_id": None}],
                                     allow_auto_topic_creation=False, include_topic_authorized_operations=False))
    assert gone.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


@pytest.mark.asyncio
async def test_concurrent_creates_on_both_nodes_all_land(cluster: ShardCluster) -> None:
    names = [f"race-{n}" for n in range(10)]
    results = await asyncio.gather(*(create_topic(cluster, n % 2, name, 1) for n, name in enumerate(names)))
    assert len({r.topic_id for r in results}) == len(names)
    for shard in (0, 1):
        listed = await ask(cluster, shard, req(3, 12, topics=None, allow_auto_topic_creation=False,
                                               include_topic_authorized_operations=False))
        by_name = {t.name: t.topic_id for t in listed.topics}
        assert {n: by_name.get(n) for n in names} == {r.name: r.topic_id for r in results}


@pytest.mark.asyncio
async def test_a_killed_shard_leaves_the_other_shards_groups_answering(tmp_path: Path) -> None:
    with running_cluster(tmp_path) as cluster:
        await create_topic(cluster, 0, "survives", 1)
        survivor, victim = group_on(0, prefix="crash"), group_on(1, prefix="crash")
        assert (await ask(cluster, 0, commit(survivor, "survives", 11))).topics[0].partitions[0].error_code == 0
        assert (await ask(cluster, 1, commit(victim, "survives", 12))).topics[0].partitions[0].error_code == 0
        cluster.kill(1)
        assert (await ask(cluster, 0, commit(survivor, "survives", 13))).topics[0].partitions[0].error_code == 0
        fetched = await ask(cluster, 0, req(9, 7, group_id=survivor, topics=None, require_stable=False))
        assert fetched.topics[0].partitions[0].committed_offset == 13
        assert (await ask(cluster, 0, join(survivor))).error_code == ErrorCode.MEMBER_ID_REQUIRED
        found = await ask(cluster, 0, req(10, 3, key=victim, key_type=0))
        assert found.node_id == NODE_ID + 1  # still its node: clients retry there until it is back
        cluster.start_shard(1)
        back = await ask(cluster, 1, req(9, 7, group_id=victim, topics=None, require_stable=False))
        assert back.topics[0].partitions[0].committed_offset == 12  # from shard 1's own log


@pytest.mark.asyncio
async def test_a_topic_created_on_one_node_reaches_the_other_nodes_groups_unasked(cluster: ShardCluster) -> None:
    """Only heartbeats reach node 1 (no catalog read there): its watcher sees node 0's CreateTopics
    and its KIP-848 group assigns the new partitions."""
    group, member = group_on(1, prefix="watched"), str(uuid.uuid4())
    client = await WireClient.connect(cluster.port + 1)
    try:
        def heartbeat(epoch: int, owned: list[Any] | None, **subscription: Any) -> Any:
            return req(68, 1, group_id=group, member_id=member, member_epoch=epoch, instance_id=None, rack_id=None,
                       rebalance_timeout=30000 if epoch == 0 else -1, server_assignor=None, topic_partitions=owned,
                       subscribed_topic_names=subscription.get("topics"),
                       subscribed_topic_regex=subscription.get("regex"))

        joined = await client.request(heartbeat(0, [], topics=["watched"], regex=""))
        assert joined.error_code == 0
        assert joined.assignment is None or not joined.assignment.topic_partitions
        epoch = joined.member_epoch
        created = await create_topic(cluster, 0, "watched", 2)
        deadline = asyncio.get_running_loop().time() + 10
        while True:
            beat = await client.request(heartbeat(epoch, None))
            assert beat.error_code == 0
            epoch = beat.member_epoch
            if beat.assignment is not None and beat.assignment.topic_partitions:
                break
            assert asyncio.get_running_loop().time() < deadline, "node 1's group never saw the new topic"
            await asyncio.sleep(0.05)
        assert [(tp.topic_id, sorted(tp.partitions)) for tp in beat.assignment.topic_partitions] == [
            (created.topic_id, [0, 1])]
    finally:
        await client.close()


@pytest.mark.asyncio
async def test_each_listener_lists_every_node_at_its_own_addresses(tmp_path: Path) -> None:
    """Two listeners: a request on INTERNAL is answered with every node's INTERNAL address."""
    plain = internal = free_port_block(2)
    while abs(internal - plain) < 2:  # two separate blocks
        internal = free_port_block(2)
    listen = f"PLAINTEXT://127.0.0.1:{plain},INTERNAL://127.0.0.1:{internal}"
    overrides = {"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
                 "advertised.listeners": f"PLAINTEXT://127.0.0.1:{plain},INTERNAL://localhost:{internal}"}
    with running_cluster(tmp_path, overrides=overrides, listen=listen, port=plain) as cluster:
        group = group_on(1, prefix="listeners")
        for shard in (0, 1):
            for base, host in ((plain, "127.0.0.1"), (internal, "localhost")):
                client = await WireClient.connect(base + shard)
                try:
                    metadata = await client.request(req(3, 12, topics=None, allow_auto_topic_creation=False,
                                                        include_topic_authorized_operations=False))
                    assert sorted((b.node_id, b.host, b.port) for b in metadata.brokers) == [
                        (NODE_ID, host, base), (NODE_ID + 1, host, base + 1)]
                    found = await client.request(req(10, 4, key_type=0, coordinator_keys=[group]))
                    assert (found.coordinators[0].host, found.coordinators[0].port) == (host, base + 1)
                finally:
                    await client.close()
        assert cluster.port == plain


@pytest.mark.asyncio
async def test_every_node_hands_out_producer_ids_from_its_own_range(cluster: ShardCluster) -> None:
    """Idempotent producers send InitProducerId to any node; shard 1's ids never meet shard 0's."""
    ids = {}
    for shard in (0, 1):
        first = await ask(cluster, shard, req(22, 4, transactional_id=None, transaction_timeout=60000,
                                              producer_id=-1, producer_epoch=-1))
        second = await ask(cluster, shard, req(22, 4, transactional_id=None, transaction_timeout=60000,
                                               producer_id=-1, producer_epoch=-1))
        assert (first.error_code, second.error_code, first.producer_epoch) == (0, 0, 0)
        assert second.producer_id > first.producer_id
        ids[shard] = first.producer_id
    assert ids[0] < SHARD_ID_BITS_START <= ids[1] < 2 * SHARD_ID_BITS_START


@pytest.mark.asyncio
async def test_a_commit_right_after_another_node_created_the_topic_is_accepted(cluster: ShardCluster) -> None:
    # OffsetCommit refuses topics the node does not know (UNKNOWN_TOPIC_OR_PARTITION, as Kafka);
    # it asks the shared catalog, which re-reads topics.json when another node changed it, so a
    # topic created on node 0 is committable on node 1 at once, not at the next 200 ms watch.
    for n in range(5):
        await create_topic(cluster, 0, f"fresh-{n}", 1)
        group = group_on(1, prefix=f"fresh-{n}")
        assert (await ask(cluster, 1, commit(group, f"fresh-{n}", 1))).topics[0].partitions[0].error_code == 0
    for shard in (0, 1):
        refused = await ask(cluster, shard, commit(group_on(shard, prefix="ghost"), "never-created", 1))
        assert refused.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


@pytest.mark.asyncio
async def test_the_private_generations_api_serves_its_groups_and_refuses_the_others(cluster: ShardCluster) -> None:
    mine, theirs = group_on(0, prefix="gens"), group_on(1, prefix="gens")
    client = await WireClient.connect(cluster.port)
    try:
        joined = await client.request(req(11, 3, group_id=mine, session_timeout=30000, rebalance_timeout=30000,
                                          member_id="", protocol_type="consumer",
                                          protocols=[{"name": "range", "metadata": b""}]))
        assert (joined.error_code, joined.generation_id) == (0, 1)
        answer = await client.request(req(DESCRIBE_GROUP_GENERATIONS, 0, groups=[mine, theirs]))
    finally:
        await client.close()
    assert [(g.group_id, g.error_code, g.generation_id, [(m.member_id, m.generation_id) for m in g.members])
            for g in answer.groups] == [(mine, 0, 1, [(joined.member_id, 1)]), (theirs, NOT_COORDINATOR, -1, [])]
    only_theirs = await ask(cluster, 0, req(DESCRIBE_GROUP_GENERATIONS, 0, groups=[theirs]))
    assert [(g.group_id, g.error_code) for g in only_theirs.groups] == [(theirs, NOT_COORDINATOR)]


@pytest.mark.asyncio
async def test_a_groups_configs_live_on_its_node_and_another_node_refuses_them(cluster: ShardCluster) -> None:
    mine, theirs = group_on(0, prefix="configs"), group_on(1, prefix="configs")

    def alter(*groups: str) -> Any:
        return req(44, 1, validate_only=False, resources=[
            {"resource_type": 32, "resource_name": g, "configs": [
                {"name": "consumer.heartbeat.interval.ms", "config_operation": 0, "value": "6000"}]} for g in groups])

    altered = await ask(cluster, 0, alter(mine, theirs))
    assert sorted((r.resource_name, r.error_code) for r in altered.responses) == sorted(
        [(mine, 0), (theirs, NOT_COORDINATOR)])
    assert [r.error_code for r in (await ask(cluster, 1, alter(theirs))).responses] == [0]

    def describe(group: str) -> Any:
        return req(32, 4, include_synonyms=False, include_documentation=False, resources=[
            {"resource_type": 32, "resource_name": group, "configuration_keys": ["consumer.heartbeat.interval.ms"]}])

    for shard, group in ((0, mine), (1, theirs)):
        (result,) = (await ask(cluster, shard, describe(group))).results
        assert (result.error_code, [(c.value, c.config_source) for c in result.configs]) == (0, [("6000", 8)])
    (refused,) = (await ask(cluster, 1, describe(mine))).results
    assert (refused.error_code, refused.configs) == (NOT_COORDINATOR, ())
