"""A tiny record batch (magic 2) writer for tests, independent of the code under test."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence

from crc32c import crc32c

NOW_MS = 1_700_000_000_000


def _varint(value: int) -> bytes:
    raw = (value << 1) ^ (value >> 63)
    out = bytearray()
    while True:
        byte = raw & 0x7F
        raw >>= 7
        if raw:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _bytes(value: bytes | None) -> bytes:
    if value is None:
        return _varint(-1)
    return _varint(len(value)) + value


def make_batch(
    values: Sequence[bytes],
    *,
    timestamps: Sequence[int] | None = None,
    codec: int = 0,
    attributes: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    base_offset: int = 0,
    magic: int = 2,
    records_count: int | None = None,
    last_offset_delta: int | None = None,
) -> bytes:
    timestamps = list(timestamps) if timestamps is not None else [NOW_MS] * len(values)
    base_ts = timestamps[0]
    body = bytearray()
    for i, value in enumerate(values):
        record = (
            b"\x00"
            + _varint(timestamps[i] - base_ts)
            + _varint(i)
            + _bytes(b"k%d" % i)
            + _bytes(value)
            + _varint(0)
        )
        body += _varint(len(record)) + record
    payload = bytes(body)
    if codec == 1:
        compressor = zlib.compressobj(wbits=16 + zlib.MAX_WBITS)
        payload = compressor.compress(payload) + compressor.flush()
    elif codec:
        payload = b"\x00" * 8 + payload  # opaque: the server never decompresses these
    attrs = attributes | codec
    n = len(values)
    tail = struct.pack(
        ">hiqqqhii",
        attrs,
        n - 1 if last_offset_delta is None else last_offset_delta,
        base_ts,
        max(timestamps),
        producer_id,
        producer_epoch,
        base_sequence,
        n if records_count is None else records_count,
    ) + payload
    crc = crc32c(tail)
    length = 4 + 1 + 4 + len(tail)
    return struct.pack(">qiibI", base_offset, length, -1, magic, crc) + tail
