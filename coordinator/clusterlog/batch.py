"""Record batches (magic 2, uncompressed) as the log on the cluster writes and reads them.

Layout (big endian): baseOffset i64, batchLength i32, partitionLeaderEpoch i32, magic i8, crc u32
(CRC-32C of everything after it), attributes i16, lastOffsetDelta i32, baseTimestamp i64,
maxTimestamp i64, producerId i64, producerEpoch i16, baseSequence i32, recordsCount i32, then the
records: length varint, attributes i8, timestampDelta varint, offsetDelta varint, key (varint length,
-1 for null), value (likewise), header count varint. Attributes bit 4 marks a transactional batch,
bit 5 a control batch (a transaction's COMMIT or ABORT marker, whose one record's key is
version i16 + type i16: 0 abort, 1 commit).

This writer never compresses, and the reader refuses compressed batches: every batch of the log
topic is written here, and compaction keeps a batch's compression (the topic's
`compression.type=producer`).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

from crc32c import crc32c

_HEAD = struct.Struct(">qiib")
_CRC = struct.Struct(">I")
_AFTER_CRC = struct.Struct(">hiqqqhii")
_CONTROL_KEY = struct.Struct(">hh")
HEADER_SIZE = _HEAD.size + _CRC.size + _AFTER_CRC.size  # 61
TRANSACTIONAL = 0x10
CONTROL = 0x20
COMPRESSION = 0x07
ABORT, COMMIT = 0, 1


class CorruptBatch(Exception):
    """Bytes that are not a valid magic-2 batch (bad CRC, bad lengths, compressed, truncated records)."""


@dataclass(frozen=True, slots=True)
class LogRecord:
    offset: int
    key: bytes | None
    value: bytes | None


@dataclass(frozen=True, slots=True)
class Batch:
    base_offset: int
    last_offset: int
    producer_id: int
    producer_epoch: int
    transactional: bool
    control_type: int | None
    """ABORT or COMMIT for a control batch, None for a data batch."""
    records: tuple[LogRecord, ...]


def _zigzag(value: int) -> bytes:
    raw = (value << 1) ^ (value >> 63)
    out = bytearray()
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)
    return bytes(out)


def _nullable(value: bytes | None) -> bytes:
    return _zigzag(-1) if value is None else _zigzag(len(value)) + value


def encode_batch(records: Sequence[tuple[bytes | None, bytes | None]], *, producer_id: int, producer_epoch: int,
                 base_sequence: int, transactional: bool, timestamp_ms: int) -> bytes:
    """One batch holding `records` (key, value) at offset deltas 0..n-1, all stamped `timestamp_ms`."""
    if not records:
        raise ValueError("a batch holds at least one record")
    body = bytearray()
    for delta, (key, value) in enumerate(records):
        record = b"\x00" + _zigzag(0) + _zigzag(delta) + _nullable(key) + _nullable(value) + _zigzag(0)
        body += _zigzag(len(record)) + record
    after_crc = _AFTER_CRC.pack(TRANSACTIONAL if transactional else 0, len(records) - 1, timestamp_ms,
                                timestamp_ms, producer_id, producer_epoch, base_sequence, len(records)) + body
    length = 4 + 1 + _CRC.size + len(after_crc)  # partitionLeaderEpoch .. end
    return _HEAD.pack(0, length, -1, 2) + _CRC.pack(crc32c(after_crc)) + after_crc


def _varint(data: memoryview, pos: int) -> tuple[int, int]:
    shift = raw = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise CorruptBatch("truncated or overlong varint")
        byte = data[pos]
        pos += 1
        raw |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7


def _field(data: memoryview, pos: int) -> tuple[bytes | None, int]:
    size, pos = _varint(data, pos)
    if size < 0:
        return None, pos
    if pos + size > len(data):
        raise CorruptBatch("record field runs past its batch")
    return bytes(data[pos:pos + size]), pos + size


def _records(body: memoryview, base_offset: int, count: int) -> tuple[LogRecord, ...]:
    out = []
    pos = 0
    for _ in range(count):
        length, pos = _varint(body, pos)
        end = pos + length
        if length < 0 or end > len(body):
            raise CorruptBatch("record runs past its batch")
        pos += 1  # attributes
        _, pos = _varint(body, pos)  # timestamp delta
        delta, pos = _varint(body, pos)
        key, pos = _field(body, pos)
        value, pos = _field(body, pos)
        out.append(LogRecord(base_offset + delta, key, value))
        pos = end  # headers: not used by the log
    return tuple(out)


def decode_batches(data: bytes | bytearray | memoryview) -> list[Batch]:
    """The complete batches in a Fetch response's records (a partial last batch is left out, as a
    broker may cut one at `max_bytes`)."""
    view = memoryview(data)
    batches = []
    pos = 0
    while pos + HEADER_SIZE <= len(view):
        base_offset, length, _, magic = _HEAD.unpack_from(view, pos)
        end = pos + 12 + length
        if end > len(view):
            break
        if magic != 2 or length < HEADER_SIZE - 12:
            raise CorruptBatch(f"batch at offset {base_offset}: magic {magic}, length {length}")
        (crc,) = _CRC.unpack_from(view, pos + _HEAD.size)
        after_crc = view[pos + _HEAD.size + _CRC.size:end]
        if crc32c(after_crc) != crc:
            raise CorruptBatch(f"batch at offset {base_offset}: CRC mismatch")
        attributes, last_delta, _, _, producer_id, producer_epoch, _, count = _AFTER_CRC.unpack_from(after_crc, 0)
        if attributes & COMPRESSION:
            raise CorruptBatch(f"batch at offset {base_offset} is compressed; the log never writes one")
        records = _records(after_crc[_AFTER_CRC.size:], base_offset, count)
        control_type = None
        if attributes & CONTROL:
            key = records[0].key if records else None
            if key is None or len(key) < _CONTROL_KEY.size:
                raise CorruptBatch(f"control batch at offset {base_offset} without its marker key")
            control_type = _CONTROL_KEY.unpack_from(key, 0)[1]
        batches.append(Batch(base_offset, base_offset + last_delta, producer_id, producer_epoch,
                             bool(attributes & TRANSACTIONAL), control_type, records))
        pos = end
    return batches
