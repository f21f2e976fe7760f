"""Share groups on an embedded node of two shards: served for group ids placed on shard 0, where
every partition's leader is (the data plane), and refused explicitly for the others.

A real ``ShareConsumer`` bootstrapped from node 1 (shard 1) of a group placed on shard 0 finds its
coordinator on node 0, fetches from the leader and gets every record once. One of a group placed on
shard 1 stops with Kafka's UNSUPPORTED_VERSION instead of waiting forever (which it did before), and
shard 1 says why in the answer's message and its log. Raw requests show the rest: a group of the
other shard is NOT_COORDINATOR on shard 1, and ShareFetch/ShareAcknowledge sent to shard 1 are
NOT_LEADER_OR_FOLLOWER naming shard 0 as the leader.

Sidecar mode over two shards serves every share group, forwarding a share request that reaches the
shard not holding its group (``tests/share/test_forward.py``)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaException, ShareConsumer

from protocol.errors import ErrorCode
from tests.interop.share_support import all_records, consume_until, share_consumer
from tests.shards.cluster import ShardCluster, group_on, running_cluster
from tests.support.clients import produce
from tests.support.server import wait_until
from tests.support.wire import call, request

pytestmark = pytest.mark.interop

TOPIC = "queue"
COUNT = 200
NODE_ID = 1  # node.id's default: shard k is node 1 + k


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ShardCluster]:
    overrides = {"topics": f"{TOPIC}:2", "share.auto.offset.reset": "earliest",
                 "group.share.heartbeat.interval.ms": "1000"}
    with running_cluster(tmp_path_factory.mktemp("share"), overrides=overrides) as started:
        produce(started.bootstrap(1), TOPIC, COUNT, 2)
        yield started


def test_a_share_group_placed_on_shard_0_is_served_from_any_bootstrap_node(cluster: ShardCluster) -> None:
    group = group_on(0, prefix="queue")
    consumer = share_consumer(cluster.bootstrap(1), TOPIC, group)
    seen: list[tuple[int, int]] = []
    consume_until(consumer, lambda: len(seen) >= COUNT, seen, timeout=30)
    consumer.close()
    assert sorted(seen) == sorted(all_records(COUNT))  # each once


def stopped_with(bootstrap: str, group: str) -> list[KafkaException]:
    """What a share consumer of ``group`` raised within 20 s (nothing: it was left waiting)."""
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
    consumer.subscribe([TOPIC])
    errors: list[KafkaException] = []
    deadline = time.monotonic() + 20
    try:
        while not errors and time.monotonic() < deadline:
            try:
                assert not [m for m in consumer.poll(0.5) if m.error() is None], "records for an unserved group"
            except KafkaException as exc:
                errors.append(exc)
    finally:
        consumer.close()
    return errors


def test_a_share_consumer_of_a_group_placed_on_shard_1_stops_with_unsupported_version(cluster: ShardCluster) -> None:
    group = group_on(1, prefix="queue")
    errors = stopped_with(cluster.bootstrap(0), group)
    assert errors, "the consumer was left waiting"
    assert errors[0].args[0].code() == ErrorCode.UNSUPPORTED_VERSION
    wait_until(lambda: f'"group": "{group}"' in cluster.log(1) and "share_group_not_served" in cluster.log(1),
               message="shard 1 logging why")


def ask(cluster: ShardCluster, shard: int, api_key: int, version: int, **fields: Any) -> Any:
    return asyncio.run(call(cluster.port + shard, request(api_key, version, **fields)))


def test_shard_1_answers_the_group_apis_in_kafkas_words(cluster: ShardCluster) -> None:
    here, there = group_on(1, prefix="raw"), group_on(0, prefix="raw")
    for group, code in ((here, ErrorCode.UNSUPPORTED_VERSION), (there, ErrorCode.NOT_COORDINATOR)):
        beat = ask(cluster, 1, 76, 1, group_id=group, member_id=uuid.uuid4().hex[:22], member_epoch=0, rack_id=None,
                   subscribed_topic_names=[TOPIC])
        assert beat.error_code == code
        assert ask(cluster, 1, 91, 0, group_id=group, topics=[]).error_code == code
    beat = ask(cluster, 1, 76, 1, group_id=here, member_id=uuid.uuid4().hex[:22], member_epoch=0, rack_id=None,
               subscribed_topic_names=[TOPIC])
    assert f"'{here}' is placed on shard 1" in beat.error_message
    described = ask(cluster, 1, 77, 1, group_ids=[here, there], include_authorized_operations=False)
    assert [(g.group_id, g.error_code) for g in described.groups] == [
        (here, ErrorCode.UNSUPPORTED_VERSION), (there, ErrorCode.NOT_COORDINATOR)]
    offsets = ask(cluster, 1, 90, 1, groups=[{"group_id": here, "topics": None}])
    assert [g.error_code for g in offsets.groups] == [ErrorCode.UNSUPPORTED_VERSION]
    # The group placed on shard 0 got no state on shard 1, nor any on shard 0: it never joined.
    assert ask(cluster, 0, 77, 1, group_ids=[there], include_authorized_operations=False).groups[0].error_code == \
        ErrorCode.GROUP_ID_NOT_FOUND


def test_share_fetches_sent_to_shard_1_name_shard_0_as_the_leader(cluster: ShardCluster) -> None:
    topic_id = uuid.uuid4()
    partitions = [{"topic_id": topic_id, "partitions": [{"partition_index": 0, "partition_max_bytes": 1 << 20,
                                                          "acknowledgement_batches": []}]}]
    fetched = ask(cluster, 1, 78, 1, group_id=group_on(0), member_id=uuid.uuid4().hex[:22], share_session_epoch=0,
                  max_wait=0, min_bytes=1, max_bytes=1 << 20, max_records=500, batch_size=500, topics=partitions,
                  forgotten_topics_data=[])
    acked = ask(cluster, 1, 79, 1, group_id=group_on(0), member_id=uuid.uuid4().hex[:22], share_session_epoch=1,
                topics=[{"topic_id": topic_id, "partitions": [{"partition_index": 0, "acknowledgement_batches": []}]}])
    for answer in (fetched, acked):
        assert answer.error_code == 0
        ((partition,),) = [t.partitions for t in answer.responses]
        assert partition.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert partition.current_leader.leader_id == NODE_ID
        assert [(n.node_id, n.port) for n in answer.node_endpoints] == [(NODE_ID, cluster.port)]
