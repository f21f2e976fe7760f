"""Over a real socket (embedded mode): a connection that closes releases the records of the share
sessions it opened at once (not when their locks end), but not those of a session reopened on
another connection (KAFKA-19950); and the share counters count each record that was acquired,
acknowledged, released, archived or whose lock expired once, and nothing again when the log is
replayed at start-up."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import REGISTRY

from tests.runtime.conftest import serving
from tests.support.polling import eventually
from tests.support.wire import WireClient

from .test_offsets_apis import SHARE_ACKNOWLEDGE, SHARE_FETCH, join, produce, req

pytestmark = pytest.mark.asyncio

MEMBER = "shareMember00000000001"
COUNTERS = ("acquired", "acknowledged", "released", "archived", "lock_expired")


def counters() -> dict[str, float]:
    return {name: REGISTRY.get_sample_value(f"coordinator_share_records_{name}_total") or 0.0 for name in COUNTERS}


def in_flight(state: str) -> float:
    return REGISTRY.get_sample_value("coordinator_share_records", {"state": state}) or 0.0


async def fetch(client: WireClient, topic_id: Any, epoch: int = 0) -> list[tuple[int, int, int]]:
    answer = await client.request(req(
        SHARE_FETCH, 2, group_id="q", member_id=MEMBER, share_session_epoch=epoch, max_wait=0, min_bytes=1,
        max_bytes=1 << 20, max_records=500, batch_size=500, forgotten_topics_data=[],
        topics=[{"topic_id": topic_id, "partitions": [{"partition_index": 0, "acknowledgement_batches": []}]}]))
    assert answer.error_code == 0, answer
    return [(a.first_offset, a.last_offset, a.delivery_count) for r in answer.responses for p in r.partitions
            for a in p.acquired_records]


def delta(before: dict[str, float]) -> dict[str, float]:
    now = counters()
    return {name: now[name] - before[name] for name in COUNTERS}


async def test_a_closed_connection_releases_what_its_share_session_held_at_once(tmp_path) -> None:
    lock = {"group.share.record.lock.duration.ms": "600000", "share.auto.offset.reset": "earliest"}
    async with serving(tmp_path, topics="t:1", **lock) as server:
        first = await WireClient.connect(server.port)
        await produce(first, "t", 0, 5)
        topic_id = (await join(first)).assignment.topic_partitions[0].topic_id
        assert await fetch(first, topic_id) == [(0, 4, 1)]
        assert in_flight("acquired") == 5
        before = counters()

        await first.close()  # no final ShareAcknowledge, no leave: the connection just goes
        await eventually(lambda: in_flight("acquired") == 0, message="the closed connection's records released")
        assert in_flight("available") == 5
        assert delta(before)["released"] == 5 and delta(before)["lock_expired"] == 0  # the lock has 10 minutes

        second, third = await WireClient.connect(server.port), await WireClient.connect(server.port)
        try:
            assert await fetch(second, topic_id) == [(0, 4, 2)], "delivered again at once, counted twice"
            # The member opens a new session on a third connection: the session is that one's now,
            # so the second connection closing releases nothing (KAFKA-19950).
            assert await fetch(third, topic_id) == []
            await second.close()
            ack = await third.request(req(
                SHARE_ACKNOWLEDGE, 2, group_id="q", member_id=MEMBER, share_session_epoch=1, is_renew_ack=False,
                topics=[{"topic_id": topic_id, "partitions": [{"partition_index": 0, "acknowledgement_batches": [
                    {"first_offset": 0, "last_offset": 4, "acknowledge_types": [1]}]}]}]))
            assert ack.error_code == 0 and ack.responses[0].partitions[0].error_code == 0, "still held, accepted"
            assert in_flight("acknowledged") == 0 and in_flight("acquired") == 0  # finished: the start moved past
        finally:
            await third.close()


async def test_counters_count_each_transition_once_and_nothing_when_the_log_is_replayed(tmp_path) -> None:
    settings = {"group.share.record.lock.duration.ms": "1000", "share.auto.offset.reset": "earliest"}
    before = counters()
    async with serving(tmp_path, topics="t:1", **settings) as server:
        client = await WireClient.connect(server.port)
        try:
            await produce(client, "t", 0, 10)
            topic_id = (await join(client)).assignment.topic_partitions[0].topic_id
            assert await fetch(client, topic_id) == [(0, 9, 1)]
            ack = await client.request(req(
                SHARE_ACKNOWLEDGE, 2, group_id="q", member_id=MEMBER, share_session_epoch=1, is_renew_ack=False,
                topics=[{"topic_id": topic_id, "partitions": [{"partition_index": 0, "acknowledgement_batches": [
                    {"first_offset": 0, "last_offset": 3, "acknowledge_types": [1]},  # accept
                    {"first_offset": 4, "last_offset": 5, "acknowledge_types": [2]},  # release
                    {"first_offset": 6, "last_offset": 6, "acknowledge_types": [3]}]}]}]))  # reject
            assert ack.responses[0].partitions[0].error_code == 0
            assert delta(before) == {"acquired": 10, "acknowledged": 4, "released": 2, "archived": 1,
                                     "lock_expired": 0}
            # 7..9 are left to their 1 s lock.
            await eventually(lambda: delta(before)["lock_expired"] == 3, timeout=10, message="the locks to end")
            assert delta(before) == {"acquired": 10, "acknowledged": 4, "released": 2, "archived": 1,
                                     "lock_expired": 3}
        finally:
            await client.close()
    counted = counters()
    async with serving(tmp_path, topics="t:1", **settings):
        assert in_flight("available") == 5  # 4, 5 and 7..9: the log replayed
        assert counters() == counted, "replaying the log counts nothing again"
