"""Record batches (magic 2) as bytes: header parsing, produce-time validation, record timestamps.

The data plane never re-encodes records. A produced batch is validated the way Kafka validates a
client append (`ProduceRequest.validateRecords`, `UnifiedLog.analyzeAndValidateRecords`,
`LogValidator.validateBatch`), then stored as the bytes received with two header fields rewritten:
`baseOffset` (bytes 0..8) and `partitionLeaderEpoch` (bytes 12..16). Neither is covered by the
CRC, which runs from `attributes` (byte 21) to the end, so the stored batch stays valid. Only a
LogAppendTime topic changes covered bytes (attributes timestamp-type bit, `maxTimestamp`), and then
the CRC is recomputed, as Kafka does.

Header layout (61 bytes, big endian): baseOffset i64, batchLength i32, partitionLeaderEpoch i32,
magic i8, crc u32, attributes i16, lastOffsetDelta i32, baseTimestamp i64, maxTimestamp i64,
producerId i64, producerEpoch i16, baseSequence i32, recordsCount i32. Attributes: bits 0-2 codec
(0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd), bit 3 timestamp type (1 = LogAppendTime), bit 4
transactional, bit 5 control.

Validation order and error codes (Kafka 4.x, produce v3+):
1. no complete batch in `records` -> INVALID_RECORD; a batch length below the v0 minimum (14) or,
   for magic >= 2, a batch shorter than its 61-byte header -> CORRUPT_MESSAGE;
2. magic other than 2 -> INVALID_RECORD (Kafka 4 has no message format downgrade, so
   UNSUPPORTED_FOR_MESSAGE_FORMAT never arises for produce v3+); ZStandard below produce v7 ->
   UNSUPPORTED_COMPRESSION_TYPE; a second complete batch -> INVALID_RECORD;
3. baseOffset != 0 -> INVALID_RECORD; batch larger than `max.message.bytes` -> MESSAGE_TOO_LARGE;
   CRC mismatch -> CORRUPT_MESSAGE; unknown codec id (5..7) -> CORRUPT_MESSAGE (Kafka fails
   with an unknown server error there; ours is the more useful code);
4. control batch from a client, empty or inconsistent record count, producer id with a negative
   base sequence -> INVALID_RECORD; a transactional batch -> INVALID_TXN_STATE (this coordinator
   runs no transaction coordinator, so no transaction can have been verified: KIP-890).
Record-level checks (key presence on compacted topics, timestamp bounds) are not made: they need
decompression, and the embedded plane stores batches as they come.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

from crc32c import crc32c

from protocol.errors import ErrorCode

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12  # baseOffset + batchLength
MIN_LEGACY_RECORD = 14
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
MAX_TIMESTAMP_OFFSET = 35

CODEC_MASK = 0x07
CODEC_NONE, CODEC_GZIP, CODEC_SNAPPY, CODEC_LZ4, CODEC_ZSTD = 0, 1, 2, 3, 4
TIMESTAMP_TYPE_BIT = 0x08
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20

_BASE_OFFSET = struct.Struct(">q")
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_U32 = struct.Struct(">I")


@dataclass(frozen=True, slots=True)
class BatchHeader:
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def codec(self) -> int:
        return self.attributes & CODEC_MASK

    @property
    def log_append_time(self) -> bool:
        return bool(self.attributes & TIMESTAMP_TYPE_BIT)


def parse_header(data: bytes | bytearray | memoryview, offset: int = 0) -> BatchHeader:
    return BatchHeader(*HEADER.unpack_from(data, offset))


class InvalidBatch(Exception):
    """A produced `records` field Kafka would refuse; `code` is the partition's error code."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _complete_batch_at(data: bytes, offset: int) -> int | None:
    """Size of the complete batch at `offset`, None if the bytes end first; raises when corrupt."""
    remaining = len(data) - offset
    if remaining < LOG_OVERHEAD:
        return None
    batch_length: int = _I32.unpack_from(data, offset + 8)[0]
    if batch_length < MIN_LEGACY_RECORD:
        raise InvalidBatch(
            ErrorCode.CORRUPT_MESSAGE,
            f"Record size {batch_length} is less than the minimum record overhead ({MIN_LEGACY_RECORD})",
        )
    size = batch_length + LOG_OVERHEAD
    if remaining < MAGIC_OFFSET + 1:
        return None
    if data[offset + MAGIC_OFFSET] > 1 and size < HEADER_SIZE:
        raise InvalidBatch(
            ErrorCode.CORRUPT_MESSAGE,
            f"Record batch size {size} is smaller than the minimum allowed overhead {HEADER_SIZE}",
        )
    if remaining < size:
        return None
    return size


def validate_produce(
    records: bytes | None, *, api_version: int, max_message_bytes: int
) -> tuple[bytes, BatchHeader]:
    """The one batch of a produce partition, trimmed of trailing partial bytes, and its header."""
    data = bytes(records) if records is not None else b""
    size = _complete_batch_at(data, 0)
    if size is None:
        raise InvalidBatch(
            ErrorCode.INVALID_RECORD,
            f"Produce requests with version {api_version} must have at least one record batch per partition",
        )
    magic = data[MAGIC_OFFSET]
    if magic != 2:
        raise InvalidBatch(
            ErrorCode.INVALID_RECORD,
            f"Produce requests with version {api_version} are only allowed to contain record batches "
            "with magic version 2",
        )
    header = parse_header(data)
    if api_version < 7 and header.codec == CODEC_ZSTD:
        raise InvalidBatch(
            ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
            f"Produce requests with version {api_version} are not allowed to use ZStandard compression",
        )
    if _complete_batch_at(data, size) is not None:
        raise InvalidBatch(
            ErrorCode.INVALID_RECORD,
            f"Produce requests with version {api_version} are only allowed to contain exactly one "
            "record batch per partition",
        )
    batch = data[:size] if len(data) != size else data
    if header.base_offset != 0:
        raise InvalidBatch(
            ErrorCode.INVALID_RECORD,
            f"The baseOffset of the record batch in the append should be 0, but it is {header.base_offset}",
        )
    if size > max_message_bytes:
        raise InvalidBatch(
            ErrorCode.MESSAGE_TOO_LARGE,
            f"The record batch size in the append is {size} bytes which exceeds the maximum "
            f"configured value of {max_message_bytes}.",
        )
    computed = crc32c(memoryview(batch)[ATTRIBUTES_OFFSET:])
    if computed != header.crc:
        raise InvalidBatch(
            ErrorCode.CORRUPT_MESSAGE,
            f"Record is corrupt (stored crc = {header.crc}, computed crc = {computed})",
        )
    if header.codec > CODEC_ZSTD:
        raise InvalidBatch(ErrorCode.CORRUPT_MESSAGE, f"Unknown compression type id: {header.codec}")
    if header.attributes & CONTROL_BIT:
        raise InvalidBatch(ErrorCode.INVALID_RECORD, "Clients are not allowed to write control records")
    if header.records_count <= 0:
        raise InvalidBatch(
            ErrorCode.INVALID_RECORD, f"Invalid reported count for record batch: {header.records_count}"
        )
    if header.last_offset_delta + 1 != header.records_count:
        raise InvalidBatch(
            ErrorCode.INVALID_RECORD,
            f"Inconsistent batch offset range [0, {header.last_offset_delta}] and count of records "
            f"{header.records_count}",
        )
    if header.producer_id >= 0 and header.base_sequence < 0:
        raise InvalidBatch(
            ErrorCode.INVALID_RECORD,
            f"Invalid sequence number {header.base_sequence} in record batch with producerId "
            f"{header.producer_id}",
        )
    if header.attributes & TRANSACTIONAL_BIT:
        raise InvalidBatch(
            ErrorCode.INVALID_TXN_STATE,
            "Transactional records are not supported by the embedded data plane",
        )
    return batch, header


def stamp(batch: bytes, base_offset: int, leader_epoch: int, log_append_time_ms: int | None) -> bytes:
    """The batch as stored: offsets assigned, leader epoch set, LogAppendTime applied if asked."""
    out = bytearray(batch)
    _BASE_OFFSET.pack_into(out, 0, base_offset)
    _I32.pack_into(out, 12, leader_epoch)
    if log_append_time_ms is not None:
        (attributes,) = _I16.unpack_from(out, ATTRIBUTES_OFFSET)
        _I16.pack_into(out, ATTRIBUTES_OFFSET, attributes | TIMESTAMP_TYPE_BIT)
        _BASE_OFFSET.pack_into(out, MAX_TIMESTAMP_OFFSET, log_append_time_ms)
        _U32.pack_into(out, CRC_OFFSET, crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
    return bytes(out)


# -- record-level reading (ListOffsets by timestamp) ------------------------------------------------


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    """Zig-zag varint (Kafka's signed varint/varlong) at `pos`: (value, next position)."""
    shift = 0
    raw = 0
    while True:
        byte = data[pos]
        pos += 1
        raw |= (byte & 0x7F) << shift
        if not byte & 0x80:
            break
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")
    return (raw >> 1) ^ -(raw & 1), pos


def record_timestamps(batch: bytes, header: BatchHeader) -> Iterator[tuple[int, int]] | None:
    """(timestamp, offset) of every record, or None when the codec cannot be read here.

    Uncompressed and gzip batches are readable (the standard library has zlib); snappy, lz4 and
    zstd are not, and callers fall back to batch-level answers for them.
    """
    if header.log_append_time:
        return iter([(header.max_timestamp, header.base_offset + i) for i in range(header.records_count)])
    if header.codec == CODEC_NONE:
        body = batch[HEADER_SIZE:]
    elif header.codec == CODEC_GZIP:
        try:
            body = zlib.decompress(batch[HEADER_SIZE:], wbits=16 + zlib.MAX_WBITS)
        except zlib.error:
            return None
    else:
        return None
    return _iter_records(body, header)


def _iter_records(body: bytes, header: BatchHeader) -> Iterator[tuple[int, int]]:
    pos = 0
    for _ in range(header.records_count):
        try:
            length, pos = _varint(body, pos)
            end = pos + length
            ts_delta, p = _varint(body, pos + 1)  # skip the attributes byte
            offset_delta, _ = _varint(body, p)
        except (IndexError, ValueError):
            return
        yield header.base_timestamp + ts_delta, header.base_offset + offset_delta
        pos = end
