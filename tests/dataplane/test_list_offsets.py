"""ListOffsets: every special timestamp, timestamp search, errors, version layouts."""

from __future__ import annotations

import pytest

from .harness import LIST_OFFSETS, Harness
from .records import NOW_MS, make_batch

pytestmark = pytest.mark.asyncio

T0 = NOW_MS - 10_000


async def _seed(h: Harness, topic: str = "t", **configs: str) -> None:
    """offsets 0-2 at T0+0/+300/+100, offsets 3-4 at T0+200/+500 (max at offset 4), 5 at T0+400."""
    h.create(topic, **configs)
    await h.produce(topic, 0, make_batch([b"a", b"b", b"c"], timestamps=[T0, T0 + 300, T0 + 100]))
    await h.produce(topic, 0, make_batch([b"d", b"e"], timestamps=[T0 + 200, T0 + 500], codec=1))
    await h.produce(topic, 0, make_batch([b"f"], timestamps=[T0 + 400]))


@pytest.mark.parametrize("version", [1, 4, 7, 10])
async def test_earliest_and_latest(harness: Harness, version: int) -> None:
    await _seed(harness)
    earliest = await harness.list_offset("t", 0, -2, version=version)
    latest = await harness.list_offset("t", 0, -1, version=version)
    assert (earliest.error_code, earliest.offset, earliest.timestamp) == (0, 0, -1)
    assert (latest.error_code, latest.offset, latest.timestamp) == (0, 6, -1)
    if version >= 4:
        assert earliest.leader_epoch == 0 and latest.leader_epoch == 0


async def test_earliest_follows_log_start_offset() -> None:
    h = Harness()
    size = len(make_batch([b"x"]))
    h.create("t", retention_bytes=str(size))
    for _ in range(3):
        await h.produce("t", 0, make_batch([b"x"]))
    assert (await h.list_offset("t", 0, -2)).offset == 2
    assert (await h.list_offset("t", 0, -4)).offset == 2  # EARLIEST_LOCAL: nothing is tiered


async def test_empty_partition(harness: Harness) -> None:
    harness.create("t")
    assert (await harness.list_offset("t", 0, -2)).offset == 0
    assert (await harness.list_offset("t", 0, -1)).offset == 0
    max_ts = await harness.list_offset("t", 0, -3)
    assert (max_ts.error_code, max_ts.offset, max_ts.timestamp, max_ts.leader_epoch) == (0, -1, -1, -1)
    by_time = await harness.list_offset("t", 0, T0)
    assert (by_time.offset, by_time.timestamp) == (-1, -1)


async def test_max_timestamp_finds_the_record_inside_a_compressed_batch(harness: Harness) -> None:
    await _seed(harness)
    found = await harness.list_offset("t", 0, -3, version=7)
    assert (found.error_code, found.offset, found.timestamp, found.leader_epoch) == (0, 4, T0 + 500, 0)


@pytest.mark.parametrize(
    ("target", "offset", "timestamp"),
    [
        (T0 - 1, 0, T0),
        (T0, 0, T0),
        (T0 + 1, 1, T0 + 300),  # first record with timestamp >= target, in offset order
        (T0 + 301, 4, T0 + 500),  # inside the gzip batch
        (T0 + 450, 4, T0 + 500),
        (T0 + 501, -1, -1),
    ],
)
async def test_offset_by_timestamp(harness: Harness, target: int, offset: int, timestamp: int) -> None:
    await _seed(harness)
    found = await harness.list_offset("t", 0, target)
    assert (found.error_code, found.offset, found.timestamp) == (0, offset, timestamp)


async def test_undecodable_codec_answers_the_batch_base_offset(harness: Harness) -> None:
    harness.create("t")
    await harness.produce("t", 0, make_batch([b"a"], timestamps=[T0]))
    await harness.produce("t", 0, make_batch([b"b", b"c"], timestamps=[T0 + 10, T0 + 20], codec=3))
    found = await harness.list_offset("t", 0, T0 + 15)
    assert found.offset == 1  # never later than the exact answer (2)
    assert (await harness.list_offset("t", 0, -3)).offset == 2  # the batch's last offset


async def test_log_append_time_topics_search_by_append_time(harness: Harness) -> None:
    harness.create("t", message_timestamp_type="LogAppendTime")
    await harness.produce("t", 0, make_batch([b"a"], timestamps=[1]))
    harness.clock.advance(1000)
    await harness.produce("t", 0, make_batch([b"b"], timestamps=[2]))
    found = await harness.list_offset("t", 0, NOW_MS + 1)
    assert (found.offset, found.timestamp) == (1, NOW_MS + 1000)


async def test_latest_tiered_is_unknown(harness: Harness) -> None:
    await _seed(harness)
    found = await harness.list_offset("t", 0, -5, version=9)
    assert (found.error_code, found.offset, found.timestamp, found.leader_epoch) == (0, -1, -1, -1)


async def test_errors(harness: Harness) -> None:
    harness.create("t", 2)
    assert (await harness.list_offset("nope", 0, -1)).error_code == 3
    assert (await harness.list_offset("t", 2, -1)).error_code == 3
    fenced = await harness.list_offset("t", 0, -1, version=4, leader_epoch=1)
    assert (fenced.error_code, fenced.offset) == (75, -1)
    assert (await harness.list_offset("t", 0, -1, version=4, leader_epoch=0)).error_code == 0


async def test_duplicate_partitions_are_invalid(harness: Harness) -> None:
    harness.create("t", 2)
    response = await harness.call(
        LIST_OFFSETS,
        5,
        {
            "replica_id": -1,
            "topics": [
                {"name": "t", "partitions": [
                    {"partition_index": 0, "timestamp": -1},
                    {"partition_index": 0, "timestamp": -2},
                    {"partition_index": 1, "timestamp": -1},
                ]}
            ],
        },
    )
    codes = [p.error_code for p in response.topics[0].partitions]
    assert codes == [42, 42, 0]
