"""Idempotent producers: InitProducerId, duplicates answered with their original offsets, sequence
and epoch errors as Kafka 4 answers them, and transactions refused."""

from __future__ import annotations

import pytest

from .harness import Harness
from .records import make_batch

pytestmark = pytest.mark.asyncio

OUT_OF_ORDER_SEQUENCE_NUMBER = 45
INVALID_PRODUCER_EPOCH = 47
UNSUPPORTED_VERSION = 35
INT32_MAX = 2**31 - 1


def batch(values: int, seq: int, *, pid: int = 1, epoch: int = 0) -> bytes:
    return make_batch([b"m%d" % i for i in range(values)], producer_id=pid, producer_epoch=epoch, base_sequence=seq)


async def produce(h: Harness, records: bytes) -> tuple[int, int]:
    response = await h.produce("t", 0, records)
    return int(response.error_code), int(response.base_offset)


async def test_init_producer_id_hands_out_fresh_ids_with_epoch_zero(harness: Harness) -> None:
    for version in (0, 3, 5):
        request = {"transactional_id": None, "transaction_timeout": 60000, "producer_id": -1, "producer_epoch": -1}
        first = await harness.call(22, version, request)
        second = await harness.call(22, version, request)
        assert (first.error_code, first.producer_epoch, second.producer_epoch) == (0, 0, 0)
        assert second.producer_id == first.producer_id + 1


async def test_transactions_are_refused_and_their_apis_not_advertised(harness: Harness) -> None:
    response = await harness.call(
        22, 4, {"transactional_id": "txn-1", "transaction_timeout": 60000, "producer_id": -1, "producer_epoch": -1})
    assert (response.error_code, response.producer_id) == (UNSUPPORTED_VERSION, -1)
    for api_key in (24, 25, 26, 27, 28):  # AddPartitionsToTxn ... TxnOffsetCommit
        assert harness.registry.get(api_key) is None


async def test_a_retried_batch_is_answered_with_its_original_offset_and_not_appended(harness: Harness) -> None:
    harness.create("t")
    assert await produce(harness, batch(2, 0)) == (0, 0)
    assert await produce(harness, batch(3, 2)) == (0, 2)
    assert await produce(harness, batch(2, 0)) == (0, 0)  # duplicate of the first
    assert await produce(harness, batch(3, 2)) == (0, 2)
    assert harness.store.log(harness.catalog.get("t"), 0).log_end_offset == 5  # type: ignore[arg-type]


async def test_only_the_last_five_batches_are_recognised_as_duplicates(harness: Harness) -> None:
    harness.create("t")
    for seq in range(6):
        assert await produce(harness, batch(1, seq)) == (0, seq)
    assert await produce(harness, batch(1, 1)) == (0, 1)  # fifth from the end: still known
    assert (await produce(harness, batch(1, 0)))[0] == OUT_OF_ORDER_SEQUENCE_NUMBER  # sixth: forgotten


async def test_sequence_gaps_are_out_of_order(harness: Harness) -> None:
    harness.create("t")
    assert await produce(harness, batch(2, 0)) == (0, 0)
    assert (await produce(harness, batch(1, 3)))[0] == OUT_OF_ORDER_SEQUENCE_NUMBER
    assert await produce(harness, batch(1, 2)) == (0, 2)


async def test_an_unknown_producer_may_start_at_any_sequence(harness: Harness) -> None:
    harness.create("t")
    assert await produce(harness, batch(1, 42, pid=9)) == (0, 0)
    assert await produce(harness, batch(1, 43, pid=9)) == (0, 1)


async def test_epochs_fence_old_producers_and_a_new_epoch_starts_at_zero(harness: Harness) -> None:
    harness.create("t")
    assert await produce(harness, batch(1, 0, epoch=1)) == (0, 0)
    assert (await produce(harness, batch(1, 1, epoch=0)))[0] == INVALID_PRODUCER_EPOCH
    assert (await produce(harness, batch(1, 5, epoch=2)))[0] == OUT_OF_ORDER_SEQUENCE_NUMBER
    assert await produce(harness, batch(1, 0, epoch=2)) == (0, 1)
    assert (await produce(harness, batch(1, 1, epoch=1)))[0] == INVALID_PRODUCER_EPOCH


async def test_sequences_wrap_after_int32_max(harness: Harness) -> None:
    harness.create("t")
    assert await produce(harness, batch(2, INT32_MAX - 1, pid=3)) == (0, 0)  # last sequence INT32_MAX
    assert await produce(harness, batch(1, 0, pid=3)) == (0, 2)
    assert await produce(harness, batch(2, INT32_MAX - 1, pid=3)) == (0, 0)  # still a known duplicate


async def test_producers_are_independent_per_partition(harness: Harness) -> None:
    harness.create("t", 2)
    assert await produce(harness, batch(1, 0)) == (0, 0)
    other = await harness.produce("t", 1, batch(1, 7))  # unknown on partition 1: any sequence
    assert (other.error_code, other.base_offset) == (0, 0)
