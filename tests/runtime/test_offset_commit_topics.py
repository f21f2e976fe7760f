"""OffsetCommit names only topics that exist: Kafka's KafkaApis answers UNKNOWN_TOPIC_OR_PARTITION
for a topic its metadata does not know, and for a partition past a known topic's count, before the
group coordinator sees the rest. Nothing of a refused partition is stored, so no illegal or
made-up topic name reaches the offsets (and no group is created by a commit that stored nothing)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from coordinator.node.server import CoordinatorServer
from protocol.errors import ErrorCode
from tests.support.wire import WireClient, request

UNKNOWN = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


@pytest.fixture
def server(server_with_topic: CoordinatorServer) -> CoordinatorServer:
    """Topic "t" with partitions 0 and 1."""
    return server_with_topic


def commit(version: int, group_id: str, topics: dict[str, list[int]], generation: int = -1) -> Any:
    return request(8, version, group_id=group_id, generation_id_or_member_epoch=generation, member_id="",
                   group_instance_id=None, retention_time=-1, topics=[
                       {"name": name, "partitions": [{"partition_index": i, "committed_offset": 10 + i,
                                                      "committed_leader_epoch": -1, "committed_metadata": "",
                                                      "commit_timestamp": -1} for i in indexes]}
                       for name, indexes in topics.items()])


def answers(response: Any) -> dict[str, dict[int, int]]:
    """Topic -> partition -> error code; a topic listed twice would lose partitions here, so the
    number of entries is checked by the callers."""
    return {t.name: {p.partition_index: p.error_code for p in t.partitions} for t in response.topics}


async def committed(client: WireClient, group_id: str) -> dict[tuple[str, int], int]:
    fetched = await client.request(request(9, 7, group_id=group_id, topics=None, require_stable=False))
    assert fetched.error_code == 0
    return {(t.name, p.partition_index): p.committed_offset for t in fetched.topics for p in t.partitions}


@pytest.mark.asyncio
@pytest.mark.parametrize("version", [2, 7, 8, 9])
async def test_unknown_topics_and_partitions_are_refused_and_the_rest_is_committed(
        client: WireClient, version: int) -> None:
    response = await client.request(commit(version, "g", {"t": [0, 1, 2, -1], "ghost": [0], "bad/name": [0]}))
    assert len(response.topics) == 3  # one entry per topic, refused partitions merged into it
    assert answers(response) == {"t": {0: 0, 1: 0, 2: UNKNOWN, -1: UNKNOWN}, "ghost": {0: UNKNOWN},
                                 "bad/name": {0: UNKNOWN}}
    assert await committed(client, "g") == {("t", 0): 10, ("t", 1): 11}


@pytest.mark.asyncio
async def test_a_commit_of_nothing_that_exists_stores_nothing_and_creates_no_group(client: WireClient) -> None:
    response = await client.request(commit(8, "simple", {"x" * 300: [0], "ghost": [0, 1]}))
    assert answers(response) == {"x" * 300: {0: UNKNOWN}, "ghost": {0: UNKNOWN, 1: UNKNOWN}}
    listed = await client.request(request(16, 0))
    assert [g.group_id for g in listed.groups] == []
    assert await committed(client, "simple") == {}


@pytest.mark.asyncio
async def test_topic_existence_is_checked_before_the_group_as_kafka_does(client: WireClient) -> None:
    # Only unknown topics: answered without the coordinator, so no ILLEGAL_GENERATION.
    alone = await client.request(commit(8, "nobody", {"ghost": [0]}, generation=3))
    assert answers(alone) == {"ghost": {0: UNKNOWN}}
    # With a known topic the coordinator refuses what it was given; the unknown keep their code.
    mixed = await client.request(commit(8, "nobody", {"ghost": [0], "t": [0]}, generation=3))
    assert answers(mixed) == {"ghost": {0: UNKNOWN}, "t": {0: ErrorCode.ILLEGAL_GENERATION}}


@pytest.mark.asyncio
async def test_by_topic_id_a_partition_past_the_count_is_refused_and_an_unknown_id_is_unknown_topic_id(
        server: CoordinatorServer, client: WireClient) -> None:
    known = server.catalog.get("t")
    assert known is not None
    ghost = uuid.uuid4()
    response = await client.request(request(8, 10, group_id="by-id", generation_id_or_member_epoch=-1, member_id="",
                                            group_instance_id=None, topics=[
                                                {"topic_id": topic_id, "partitions": [
                                                    {"partition_index": i, "committed_offset": 5,
                                                     "committed_leader_epoch": -1, "committed_metadata": ""}
                                                    for i in (0, 2)]}
                                                for topic_id in (known.topic_id, ghost)]))
    assert {t.topic_id: {p.partition_index: p.error_code for p in t.partitions} for t in response.topics} == {
        known.topic_id: {0: 0, 2: UNKNOWN}, ghost: {0: ErrorCode.UNKNOWN_TOPIC_ID, 2: ErrorCode.UNKNOWN_TOPIC_ID}}
