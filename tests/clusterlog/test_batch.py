"""The log's record batches: what is encoded reads back, and damaged bytes are refused, not misread."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coordinator.clusterlog.batch import (
    HEADER_SIZE,
    CorruptBatch,
    decode_batches,
    encode_batch,
)

entries = st.lists(st.tuples(st.none() | st.binary(max_size=40), st.none() | st.binary(max_size=200)),
                   min_size=1, max_size=20)


def with_base_offset(batch: bytes, base_offset: int) -> bytes:
    return base_offset.to_bytes(8, "big", signed=True) + batch[8:]  # the broker's stamp; outside the CRC


@given(entries, entries, st.integers(0, 2**40))
def test_batches_read_back_as_written(first: list, second: list, base: int) -> None:
    data = (with_base_offset(encode_batch(first, producer_id=7, producer_epoch=2, base_sequence=0,
                                          transactional=True, timestamp_ms=1), base)
            + with_base_offset(encode_batch(second, producer_id=7, producer_epoch=2, base_sequence=len(first),
                                            transactional=False, timestamp_ms=1), base + len(first)))
    one, two = decode_batches(data)
    assert [(r.offset, r.key, r.value) for r in one.records + two.records] == [
        (base + i, key, value) for i, (key, value) in enumerate(first + second)]
    assert (one.transactional, two.transactional, one.producer_id, one.control_type) == (True, False, 7, None)
    assert one.last_offset == base + len(first) - 1


def test_a_partial_last_batch_is_left_for_the_next_read() -> None:
    batch = encode_batch([(b"k", b"v")], producer_id=1, producer_epoch=0, base_sequence=0, transactional=True,
                         timestamp_ms=1)
    assert len(decode_batches(batch + batch[:HEADER_SIZE + 2])) == 1


def test_a_flipped_bit_is_a_crc_error() -> None:
    batch = bytearray(encode_batch([(b"k", b"value")], producer_id=1, producer_epoch=0, base_sequence=0,
                                   transactional=True, timestamp_ms=1))
    batch[-3] ^= 0x01
    with pytest.raises(CorruptBatch, match="CRC"):
        decode_batches(bytes(batch))


def test_an_empty_batch_is_not_written() -> None:
    with pytest.raises(ValueError):
        encode_batch([], producer_id=1, producer_epoch=0, base_sequence=0, transactional=True, timestamp_ms=1)
