"""Byte format of one log entry (a "frame"), and decoding of a buffer of frames.

All integers are big-endian (as in Kafka). A segment file is frames back to back, nothing else.

Frame, format version 1::

    offset size field
    0      4    length         u32  number of bytes after this field (crc .. end of payload)
    4      4    crc32c         u32  CRC-32C (Castagnoli) of every byte after this field
    8      1    format_version u8   1
    9      4    writer_epoch   u32  epoch of the coordinator that wrote the entry (fencing)
    13     8    offset         i64  log offset of the entry (entry index), >= 0
    21     8    timestamp_ms   i64  wall clock at append; compaction ages tombstones by it
    29     4    record_count   u32  >= 1 (an entry is never empty)
    33     ...  record_count records:
                  record_type  u16
                  key_length   u32
                  key          key_length bytes
                  value_length i32  -1 = tombstone (no value bytes follow)
                  value        value_length bytes

The payload must be consumed exactly: trailing bytes make the frame corrupt.

Why the offset is stored, not implied by position: compaction drops entries but keeps the
offsets of the survivors, so offsets stay stable for tailing readers, and a reader can recognise
the duplicates an interrupted compaction may leave behind (see `segments`).

Versioning: `length` and `crc32c` are the same in every version; everything from
`format_version` on is version-specific. A reader dispatches on the version byte, so later
versions can add fields while v1 frames stay readable. A frame with a valid CRC and an unknown
version raises `UnsupportedFormatVersion` rather than being taken for a torn tail: an older
coordinator must refuse to run on a newer log, not truncate it.

Decoding arbitrary bytes never raises anything except `CorruptEntry` (from `decode_entry`) and
`UnsupportedFormatVersion`; `decode_frames` reports torn or corrupt data as a status.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Generator, Sequence
from typing import NamedTuple

import crc32c

from coordinator.recordlog.errors import CorruptEntry, UnsupportedFormatVersion
from coordinator.recordlog.record import LogEntry, LogRecord, RawRecord

FORMAT_V1 = 1

_LENGTH_CRC = struct.Struct(">II")
_V1_HEADER = struct.Struct(">BIqqI")  # format_version, writer_epoch, offset, timestamp_ms, count
_RECORD_HEAD = struct.Struct(">HI")  # record_type, key_length
_VALUE_LENGTH = struct.Struct(">i")
_NO_VALUE = _VALUE_LENGTH.pack(-1)  # a tombstone

FRAME_PREFIX_SIZE = _LENGTH_CRC.size  # length + crc
_MIN_RECORD_SIZE = _RECORD_HEAD.size + _VALUE_LENGTH.size  # empty key, empty value
# The smallest `length` field a v1 frame can have; anything smaller (zero-filled tails after a
# crash, for instance) is corrupt without looking further.
_MIN_LENGTH = 4 + _V1_HEADER.size + _MIN_RECORD_SIZE


def encode_entry(
    offset: int, writer_epoch: int, timestamp_ms: int, records: Sequence[RawRecord]
) -> bytes:
    """Encode one entry as a v1 frame. Raises ValueError for values the format cannot hold and
    TypeError for a key or value that is not bytes-like."""
    if not records:
        raise ValueError("an entry must hold at least one record")
    if offset < 0:  # the only field whose wire type (int64) takes values the format refuses
        raise ValueError(f"offset {offset} out of range")
    # Every other range is the struct format's own: a value it cannot pack raises struct.error.
    try:
        parts: list[bytes] = [
            _V1_HEADER.pack(FORMAT_V1, writer_epoch, offset, timestamp_ms, len(records))
        ]
        extend = parts.extend
        for record_type, key, value in records:
            if value is None:
                extend((_RECORD_HEAD.pack(record_type, len(key)), key, _NO_VALUE))
            else:
                extend((_RECORD_HEAD.pack(record_type, len(key)), key, _VALUE_LENGTH.pack(len(value)), value))
        body = b"".join(parts)  # TypeError for a key or value that is not bytes-like
        return _LENGTH_CRC.pack(len(body) + 4, crc32c.crc32c(body)) + body
    except struct.error as exc:
        raise ValueError(f"entry cannot be encoded: {exc}") from None


def decode_entry(frame: bytes) -> LogEntry:
    """Decode exactly one frame. Raises `CorruptEntry` or `UnsupportedFormatVersion`."""
    if len(frame) < FRAME_PREFIX_SIZE:
        raise CorruptEntry("shorter than a frame prefix")
    length, crc = _LENGTH_CRC.unpack_from(frame, 0)
    if length + 4 != len(frame):
        raise CorruptEntry(f"length field {length} does not match {len(frame) - 4} bytes")
    if length < _MIN_LENGTH:
        raise CorruptEntry(f"length field {length} below the minimum {_MIN_LENGTH}")
    if crc32c.crc32c(memoryview(frame)[FRAME_PREFIX_SIZE:]) != crc:
        raise CorruptEntry("CRC mismatch")
    return _decode_body(frame, FRAME_PREFIX_SIZE, len(frame), 0)


class FrameStatus(enum.Enum):
    """Why `decode_frames` stopped."""

    END = "end"  # every byte of the buffer was a complete, valid frame
    INCOMPLETE = "incomplete"  # the rest is shorter than the frame it starts: torn, or more to read
    CORRUPT = "corrupt"  # a complete frame (by its length) fails its CRC or structure checks


class DecodedFrames(NamedTuple):
    entries: list[tuple[int, LogEntry]]  # (file position of the frame, entry)
    consumed: int  # bytes of the buffer covered by `entries`
    status: FrameStatus


def decode_frames(buf: bytes, base_position: int = 0) -> DecodedFrames:
    """Decode frames from the start of `buf` until the end, a short tail or a bad frame.

    `base_position` is the file position of `buf[0]`, used for the positions in the result.
    Never raises except `UnsupportedFormatVersion` (valid CRC, unknown version).
    """
    frames = iter_frames(buf, base_position)
    entries: list[tuple[int, LogEntry]] = []
    while True:
        try:
            entries.append(next(frames))
        except StopIteration as stop:
            consumed, status = stop.value
            return DecodedFrames(entries, consumed, status)


def iter_frames(
    buf: bytes, base_position: int = 0
) -> Generator[tuple[int, LogEntry], None, tuple[int, FrameStatus]]:
    """`decode_frames` as a generator: yields `(position, entry)`, returns (consumed, status).

    Readers use this so that only the entry being replayed is alive, not a chunk's worth: the
    cyclic GC otherwise rescans tens of thousands of young tuples and doubles replay time.

    Start-up replay runs this over every entry of the log, and nearly every entry holds one
    record, so that case is decoded inline: one `unpack_from` reads the prefix, the v1 header
    and the record head together (`_V1_ONE_RECORD`; a valid frame is never shorter), one more
    reads the value length. Anything else -- other versions, several records, any bound not
    met -- goes through `_decode_body`, which decides what is corrupt. The fast path accepts
    exactly the frames `_decode_body` accepts with one record, and builds the same entry.
    """
    size = len(buf)
    pos = 0
    unpack_prefix = _LENGTH_CRC.unpack_from
    unpack_one = _unpack_v1_one_record
    unpack_value_length = _unpack_value_length
    tuple_new = _tuple_new
    crc = crc32c.crc32c
    entry: LogEntry | None
    while pos < size:
        if size - pos >= _V1_ONE_RECORD_SIZE:
            (length, expected_crc, version, writer_epoch, offset, timestamp_ms, count, record_type,
             key_length) = unpack_one(buf, pos)
        elif size - pos < FRAME_PREFIX_SIZE:
            return pos, FrameStatus.INCOMPLETE
        else:
            length, expected_crc = unpack_prefix(buf, pos)
            version = 0  # too short for a v1 frame: the checks below reject it
        if length < _MIN_LENGTH:
            return pos, FrameStatus.CORRUPT
        end = pos + 4 + length
        if end > size:
            return pos, FrameStatus.INCOMPLETE
        # A bytes slice: cheaper than a memoryview slice for the small frames replay sees.
        if crc(buf[pos + FRAME_PREFIX_SIZE : end]) != expected_crc:
            return pos, FrameStatus.CORRUPT
        entry = None
        if version == FORMAT_V1 and count == 1 and offset >= 0:
            key_start = pos + _V1_ONE_RECORD_SIZE
            value_length_at = key_start + key_length
            value_start = value_length_at + _VALUE_LENGTH_SIZE
            if value_start <= end:
                (value_length,) = unpack_value_length(buf, value_length_at)
                if value_start + value_length == end:  # so value_length >= 0: a value
                    record = tuple_new(
                        LogRecord, (record_type, buf[key_start:value_length_at], buf[value_start:end])
                    )
                    entry = tuple_new(LogEntry, (offset, timestamp_ms, writer_epoch, (record,)))
                elif value_length == -1 and value_start == end:  # a tombstone
                    record = tuple_new(LogRecord, (record_type, buf[key_start:value_length_at], None))
                    entry = tuple_new(LogEntry, (offset, timestamp_ms, writer_epoch, (record,)))
        if entry is None:
            try:
                entry = _decode_body(buf, pos + FRAME_PREFIX_SIZE, end, base_position + pos)
            except CorruptEntry:
                return pos, FrameStatus.CORRUPT
        yield base_position + pos, entry
        pos = end
    return pos, FrameStatus.END


# Replay decodes every record of the log at start-up, so this is the hot path: struct
# sizes are module constants, and the NamedTuples are built with tuple.__new__ directly
# (their generated __new__ is a Python-level call; this halves the cost of building them).
_V1_HEADER_SIZE = _V1_HEADER.size
_RECORD_HEAD_SIZE = _RECORD_HEAD.size
_VALUE_LENGTH_SIZE = _VALUE_LENGTH.size
_unpack_v1_header = _V1_HEADER.unpack_from
_unpack_record_head = _RECORD_HEAD.unpack_from
_unpack_value_length = _VALUE_LENGTH.unpack_from
_tuple_new = tuple.__new__
# Frame prefix + v1 header + the first record's head, read at once for one-record entries.
_V1_ONE_RECORD = struct.Struct(">II" + _V1_HEADER.format[1:] + _RECORD_HEAD.format[1:])
_V1_ONE_RECORD_SIZE = _V1_ONE_RECORD.size
_unpack_v1_one_record = _V1_ONE_RECORD.unpack_from
assert FRAME_PREFIX_SIZE + _V1_HEADER.size + _RECORD_HEAD.size == _V1_ONE_RECORD_SIZE
assert _V1_ONE_RECORD_SIZE <= 4 + _MIN_LENGTH  # every complete v1 frame holds these bytes


def _decode_body(buf: bytes, start: int, end: int, position: int) -> LogEntry:
    """Decode the CRC-checked bytes `buf[start:end]` (from format_version to frame end)."""
    version = buf[start]
    if version != FORMAT_V1:
        raise UnsupportedFormatVersion(version, position)
    if end - start < _V1_HEADER_SIZE:
        raise CorruptEntry("v1 header truncated")
    _, writer_epoch, offset, timestamp_ms, count = _unpack_v1_header(buf, start)
    if offset < 0:
        raise CorruptEntry(f"negative offset {offset}")
    pos = start + _V1_HEADER_SIZE
    # Each record takes at least _MIN_RECORD_SIZE bytes: reject absurd counts before looping.
    if count == 0 or count * _MIN_RECORD_SIZE > end - pos:
        raise CorruptEntry(f"record count {count} does not fit the frame")
    records: list[LogRecord] = []
    for _ in range(count):
        if pos + _RECORD_HEAD_SIZE > end:
            raise CorruptEntry("record header truncated")
        record_type, key_length = _unpack_record_head(buf, pos)
        pos += _RECORD_HEAD_SIZE
        if pos + key_length + _VALUE_LENGTH_SIZE > end:
            raise CorruptEntry("key truncated")
        key = buf[pos : pos + key_length]
        pos += key_length
        (value_length,) = _unpack_value_length(buf, pos)
        pos += _VALUE_LENGTH_SIZE
        value: bytes | None
        if value_length == -1:
            value = None
        elif value_length < -1 or pos + value_length > end:
            raise CorruptEntry(f"bad value length {value_length}")
        else:
            value = buf[pos : pos + value_length]
            pos += value_length
        records.append(_tuple_new(LogRecord, (record_type, key, value)))
    if pos != end:
        raise CorruptEntry(f"{end - pos} trailing bytes after the last record")
    return _tuple_new(LogEntry, (offset, timestamp_ms, writer_epoch, tuple(records)))
