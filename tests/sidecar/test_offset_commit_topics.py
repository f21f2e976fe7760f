"""Sidecar mode: OffsetCommit refuses a topic its view of the upstream does not know, as Kafka does
(UNKNOWN_TOPIC_OR_PARTITION), and that miss makes it read the upstream's topics at once, so a topic
created on the upstream directly is committable on the client's retry, not at the next periodic
read (`upstream.metadata.max.age.ms`, five minutes here)."""

from __future__ import annotations

import asyncio

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from protocol.errors import ErrorCode
from tests.sidecar.conftest import Upstream, free_base_port, sidecar_process
from tests.support.polling import eventually
from tests.support.wire import WireClient, request

pytestmark = pytest.mark.interop


def commit(topic: str) -> object:
    return request(8, 8, group_id="late-commits", generation_id_or_member_epoch=-1, member_id="",
                   group_instance_id=None, topics=[{"name": topic, "partitions": [
                       {"partition_index": 0, "committed_offset": 3, "committed_leader_epoch": -1,
                        "committed_metadata": ""}]}])


def test_a_commit_to_a_topic_the_sidecar_has_not_seen_yet_asks_the_upstream(
        tmp_path, embedded_upstream: Upstream) -> None:
    sidecar = sidecar_process(tmp_path / "sidecar-data", embedded_upstream.bootstrap, free_base_port(),
                              **{"upstream.metadata.max.age.ms": "300000"}).start()
    try:
        admin = AdminClient({"bootstrap.servers": embedded_upstream.bootstrap})
        admin.create_topics([NewTopic("late", 1)])["late"].result(timeout=10)  # behind the sidecar's back

        async def scenario() -> None:
            client = await WireClient.connect(sidecar.port)
            try:
                first = await client.request(commit("late"))
                assert first.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

                async def committed() -> bool:
                    response = await client.request(commit("late"))
                    return response.topics[0].partitions[0].error_code == ErrorCode.NONE

                await eventually(committed, timeout=10, message="the retried commit to succeed", interval=0.05)
                never = await client.request(commit("never-created"))
                assert never.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            finally:
                await client.close()

        asyncio.run(scenario())
    finally:
        sidecar.stop()
