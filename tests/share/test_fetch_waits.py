"""Over a real socket (embedded mode): a share fetch without acknowledgements whose partition is
full (``group.share.partition.max.record.locks`` records in flight, none available) waits, up to
its ``MaxWaitMs``, until another member finishes records, and then acquires them, as Kafka's
``DelayedShareFetch`` waits for an acquirable partition; it does not come back empty at once
(which had every member of a busy partition fetch again and again for nothing)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from tests.runtime.conftest import serving
from tests.support.wire import WireClient

from .test_offsets_apis import (
    SHARE_ACKNOWLEDGE,
    SHARE_FETCH,
    SHARE_GROUP_HEARTBEAT,
    join,
    produce,
    req,
)

pytestmark = pytest.mark.asyncio

HOLDER, WAITER = "shareMember00000000001", "shareMember00000000002"  # join() joins the first


def fetch(member: str, topic_id: Any, max_wait_ms: int) -> Any:
    return req(SHARE_FETCH, 2, group_id="q", member_id=member, share_session_epoch=0, max_wait=max_wait_ms,
               min_bytes=1, max_bytes=1 << 20, max_records=500, batch_size=500, forgotten_topics_data=[],
               topics=[{"topic_id": topic_id, "partitions": [{"partition_index": 0, "acknowledgement_batches": []}]}])


def acquired(answer: Any) -> list[tuple[int, int]]:
    assert answer.error_code == 0, answer
    return [(a.first_offset, a.last_offset) for r in answer.responses for p in r.partitions for a in p.acquired_records]


async def test_a_fetch_on_a_full_partition_waits_for_records_to_be_finished_then_acquires(tmp_path) -> None:
    settings = {"share.auto.offset.reset": "earliest", "group.share.partition.max.record.locks": "5"}
    async with serving(tmp_path, topics="t:1", **settings) as server:
        holder, waiter = await WireClient.connect(server.port), await WireClient.connect(server.port)
        try:
            for _ in range(4):
                await produce(holder, "t", 0, 5)  # four batches of five records
            holder_joined = await join(holder)
            topic_id, joined_epoch = holder_joined.assignment.topic_partitions[0].topic_id, holder_joined.member_epoch
            joined = await waiter.request(req(SHARE_GROUP_HEARTBEAT, 1, group_id="q", member_id=WAITER,
                                              member_epoch=0, rack_id=None, subscribed_topic_names=["t"]))
            assert joined.error_code == 0
            assert acquired(await holder.request(fetch(HOLDER, topic_id, 0))) == [(0, 4)]  # the partition is full

            # Without a wait the full partition answers at once, with nothing.
            assert acquired(await waiter.request(fetch(WAITER, topic_id, 0))) == []
            # With one, the fetch is parked; the holder's acknowledgement finishes its five records,
            # and the parked fetch acquires the next five well before its 20 s MaxWaitMs.
            asked = time.monotonic()
            await waiter.send(req(
                SHARE_FETCH, 2, group_id="q", member_id=WAITER, share_session_epoch=1, max_wait=20_000, min_bytes=1,
                max_bytes=1 << 20, max_records=500, batch_size=500, forgotten_topics_data=[], topics=[]))
            parked = asyncio.ensure_future(waiter.receive(SHARE_FETCH, 2, timeout=20))
            # A round trip through the shard on the other connection: the parked fetch has been
            # read by now, and was not answered (an answer at once would be empty: it is full).
            steady = await holder.request(req(SHARE_GROUP_HEARTBEAT, 1, group_id="q", member_id=HOLDER,
                                              member_epoch=joined_epoch, rack_id=None, subscribed_topic_names=None))
            assert steady.error_code == 0
            ack = await holder.request(req(
                SHARE_ACKNOWLEDGE, 2, group_id="q", member_id=HOLDER, share_session_epoch=1, is_renew_ack=False,
                topics=[{"topic_id": topic_id, "partitions": [{"partition_index": 0, "acknowledgement_batches": [
                    {"first_offset": 0, "last_offset": 4, "acknowledge_types": [1]}]}]}]))
            assert ack.error_code == 0 and ack.responses[0].partitions[0].error_code == 0
            assert acquired((await parked)[1]) == [(5, 9)]
            assert time.monotonic() - asked < 15, "woken by the acknowledgement, not by MaxWaitMs"
        finally:
            await holder.close()
            await waiter.close()
