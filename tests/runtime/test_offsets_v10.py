"""OffsetCommit v10 and OffsetFetch v10 (Kafka 4.2): topics by id instead of name, over a real socket
with raw kio requests; and KIP-1251 commits at an older member epoch over the wire."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from coordinator.node.server import CoordinatorServer
from tests.runtime.test_consumer_group_wire import Members, create_topic, partitions, request
from tests.support.wire import WireClient

COMMIT, FETCH = 8, 9
UNKNOWN_TOPIC_ID = 100
STALE_MEMBER_EPOCH = 113


def commit_v10(group: str, topic_id: uuid.UUID, offsets: dict[int, int], epoch: int = -1, member: str = "") -> Any:
    return request(COMMIT, 10, group_id=group, generation_id_or_member_epoch=epoch, member_id=member,
                   group_instance_id=None, topics=[{"topic_id": topic_id, "partitions": [
                       {"partition_index": p, "committed_offset": o, "committed_metadata": "m"}
                       for p, o in offsets.items()]}])


def fetch_v10(group: str, topics: dict[uuid.UUID, list[int]] | None, member: str | None = None,
              epoch: int = -1) -> Any:
    wanted = None if topics is None else [{"topic_id": t, "partition_indexes": ps} for t, ps in topics.items()]
    return request(FETCH, 10, groups=[{"group_id": group, "member_id": member, "member_epoch": epoch,
                                       "topics": wanted}], require_stable=True)


def offsets_of(response: Any) -> dict[tuple[uuid.UUID, int], tuple[int, int]]:
    (group,) = response.groups
    assert group.error_code == 0
    return {(t.topic_id, p.partition_index): (p.committed_offset, p.error_code) for t in group.topics
            for p in t.partitions}


@pytest.mark.asyncio
async def test_api_versions_advertise_v10(client: WireClient) -> None:
    response = await client.request(request(18, 3, client_software_name="t", client_software_version="1"))
    ranges = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert ranges[COMMIT] == (0, 10)
    assert ranges[FETCH] == (0, 10)


@pytest.mark.asyncio
async def test_commit_and_fetch_by_topic_id(server: CoordinatorServer, client: WireClient) -> None:
    await create_topic(client, "ids", 2)
    ids = server.catalog.get("ids").topic_id
    unknown = uuid.UUID(int=12345)
    committed = await client.request(commit_v10("simple", ids, {0: 7, 1: 9}))
    assert [(t.topic_id, [(p.partition_index, p.error_code) for p in t.partitions]) for t in committed.topics] == [
        (ids, [(0, 0), (1, 0)])]
    refused = await client.request(commit_v10("simple", unknown, {0: 1}))
    assert refused.topics[0].topic_id == unknown
    assert refused.topics[0].partitions[0].error_code == UNKNOWN_TOPIC_ID

    fetched = offsets_of(await client.request(fetch_v10("simple", {ids: [0, 1, 2], unknown: [0]})))
    assert fetched == {(ids, 0): (7, 0), (ids, 1): (9, 0), (ids, 2): (-1, 0), (unknown, 0): (-1, UNKNOWN_TOPIC_ID)}
    # Every committed offset, by id; and the same offsets by name through v9.
    assert offsets_of(await client.request(fetch_v10("simple", None))) == {(ids, 0): (7, 0), (ids, 1): (9, 0)}
    by_name = await client.request(request(FETCH, 9, groups=[{"group_id": "simple", "member_id": None,
                                                               "member_epoch": -1, "topics": None}],
                                           require_stable=True))
    assert {(t.name, p.partition_index): p.committed_offset for t in by_name.groups[0].topics
            for p in t.partitions} == {("ids", 0): 7, ("ids", 1): 9}


@pytest.mark.asyncio
async def test_an_offset_committed_by_id_is_not_a_recreated_topics(server: CoordinatorServer,
                                                                    client: WireClient) -> None:
    await create_topic(client, "again", 1)
    first = server.catalog.get("again").topic_id
    assert (await client.request(commit_v10("re", first, {0: 5}))).topics[0].partitions[0].error_code == 0
    deleted = await client.request(request(20, 6, topics=[{"name": "again", "topic_id": None}], timeout=5000))
    assert deleted.responses[0].error_code == 0
    await create_topic(client, "again", 1)
    second = server.catalog.get("again").topic_id
    assert second != first
    # Kafka 4.2 (KAFKA-19154): the offset was the first topic's; the new topic of that name has none.
    assert offsets_of(await client.request(fetch_v10("re", {second: [0]}))) == {(second, 0): (-1, 0)}


@pytest.mark.asyncio
async def test_a_member_commits_by_id_at_an_older_epoch_for_partitions_it_still_holds(
    server: CoordinatorServer, client: WireClient
) -> None:
    await create_topic(client, "rec", 4)
    rec = server.catalog.get("rec").topic_id
    m = Members(client, "kip1251")
    first = await m.join("a", ["rec"])
    held = partitions(first)
    assert first.member_epoch == 1 and held == {0, 1, 2, 3}
    await m.join("b", ["rec"])
    revoking = await m.heartbeat("a", 1)
    kept = partitions(revoking)
    done = await m.ack("a", 1, {rec: kept})
    assert done.member_epoch == 2
    # The client commits with the epoch it knew when it consumed (1): accepted for what it kept...
    ok = await client.request(commit_v10("kip1251", rec, dict.fromkeys(kept, 3), epoch=1, member="a"))
    assert {p.error_code for p in ok.topics[0].partitions} == {0}
    # ...not for a partition it gave up (another member's now, or soon).
    given_up = min(held - kept)
    stale = await client.request(commit_v10("kip1251", rec, {given_up: 3}, epoch=1, member="a"))
    assert stale.topics[0].partitions[0].error_code == STALE_MEMBER_EPOCH
    # OffsetFetch still names the current epoch exactly.
    fetch = await client.request(fetch_v10("kip1251", {rec: sorted(kept)}, member="a", epoch=1))
    assert fetch.groups[0].error_code == STALE_MEMBER_EPOCH
    assert set(offsets_of(await client.request(fetch_v10("kip1251", {rec: sorted(kept)}, member="a", epoch=2)))
               .values()) == {(3, 0)}
