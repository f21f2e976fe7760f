"""The frame format: round trip, torn and corrupt data, and arbitrary bytes."""

from __future__ import annotations

import contextlib
import struct

import crc32c
import pytest
from hypothesis import given
from hypothesis import strategies as st

from coordinator.recordlog import (
    CorruptEntry,
    LogEntry,
    LogRecord,
    RecordLogError,
    UnsupportedFormatVersion,
    decode_entry,
    encode_entry,
)
from coordinator.recordlog.format import FrameStatus, decode_frames

records_st = st.lists(
    st.builds(
        LogRecord,
        st.integers(0, 0xFFFF),
        st.binary(max_size=40),
        st.none() | st.binary(max_size=60),
    ),
    min_size=1,
    max_size=6,
)
entries_st = st.builds(
    LogEntry,
    st.integers(0, 2**63 - 1),
    st.integers(-(2**63), 2**63 - 1),
    st.integers(0, 2**32 - 1),
    records_st.map(tuple),
)


def frame(entry: LogEntry) -> bytes:
    return encode_entry(entry.offset, entry.writer_epoch, entry.timestamp_ms, entry.records)


SAMPLE = LogEntry(7, 1_700_000_000_000, 3, (LogRecord(1, b"g1", b"v"), LogRecord(2, b"", None)))


def test_documented_layout() -> None:
    data = frame(SAMPLE)
    length, crc = struct.unpack_from(">II", data)
    assert length == len(data) - 4
    assert crc == crc32c.crc32c(data[8:])
    assert struct.unpack_from(">BIqqI", data, 8) == (1, 3, 7, 1_700_000_000_000, 2)
    # first record: type 1, key "g1", value "v"
    assert data[33:39] == struct.pack(">HI", 1, 2)
    assert data[39:41] == b"g1"
    assert data[41:45] == struct.pack(">i", 1)
    # the tombstone: value length -1 and nothing after it
    assert data[-4:] == struct.pack(">i", -1)


@given(entries_st)
def test_round_trip(entry: LogEntry) -> None:
    assert decode_entry(frame(entry)) == entry


@given(st.lists(entries_st, min_size=1, max_size=5), st.integers(0, 1000))
def test_decode_frames_reports_positions(entries: list[LogEntry], base: int) -> None:
    frames = [frame(e) for e in entries]
    decoded = decode_frames(b"".join(frames), base)
    assert decoded.status is FrameStatus.END
    assert decoded.consumed == sum(map(len, frames))
    positions = [base + sum(map(len, frames[:i])) for i in range(len(frames))]
    assert decoded.entries == list(zip(positions, entries, strict=True))


def test_torn_tail_at_every_byte_boundary() -> None:
    good = frame(SAMPLE)
    last = frame(SAMPLE._replace(offset=8))
    for cut in range(len(last)):
        decoded = decode_frames(good + last[:cut])
        assert decoded.entries == [(0, SAMPLE)]
        assert decoded.consumed == len(good)
        expected = FrameStatus.END if cut == 0 else FrameStatus.INCOMPLETE
        assert decoded.status is expected, cut


@pytest.mark.parametrize("flip", range(len(frame(SAMPLE))))
def test_any_flipped_bit_is_detected(flip: int) -> None:
    # Bytes after the CRC are covered by it, the CRC itself must match them, and a changed
    # length moves the CRC window: a flipped bit anywhere makes the frame bad, never a
    # different entry. (A length that grows past the buffer reads as INCOMPLETE.)
    data = bytearray(frame(SAMPLE))
    data[flip] ^= 0x10
    expected = FrameStatus.INCOMPLETE if flip < 4 and data[flip] & 0x10 else FrameStatus.CORRUPT
    assert decode_frames(bytes(data)).status is expected
    with pytest.raises(CorruptEntry):
        decode_entry(bytes(data))


def test_bad_crc_stops_before_the_bad_frame() -> None:
    good = frame(SAMPLE)
    bad = bytearray(frame(SAMPLE._replace(offset=8)))
    bad[-1] ^= 0xFF
    decoded = decode_frames(good + bytes(bad) + good)
    assert decoded.entries == [(0, SAMPLE)]
    assert decoded.consumed == len(good)
    assert decoded.status is FrameStatus.CORRUPT


def test_zero_filled_tail_is_corrupt_not_incomplete() -> None:
    # ext4/XFS can show zero-filled blocks past the last write after a crash.
    decoded = decode_frames(frame(SAMPLE) + bytes(4096))
    assert decoded.status is FrameStatus.CORRUPT
    assert decoded.consumed == len(frame(SAMPLE))


def with_valid_crc(body: bytes) -> bytes:
    return struct.pack(">II", len(body) + 4, crc32c.crc32c(body)) + body


def test_unknown_version_with_valid_crc_raises_instead_of_truncating() -> None:
    body = bytearray(frame(SAMPLE)[8:])
    body[0] = 2
    data = frame(SAMPLE) + with_valid_crc(bytes(body))
    with pytest.raises(UnsupportedFormatVersion) as info:
        decode_frames(data)
    assert info.value.version == 2
    assert info.value.position == len(frame(SAMPLE))


@pytest.mark.parametrize(
    "body",
    [
        struct.pack(">BIqqI", 1, 0, 0, 0, 0) + bytes(10),  # zero records
        struct.pack(">BIqqI", 1, 0, -1, 0, 1) + struct.pack(">HIi", 0, 0, 0),  # negative offset
        struct.pack(">BIqqI", 1, 0, 0, 0, 1) + struct.pack(">HIi", 0, 0, 0) + b"x",  # trailing
        struct.pack(">BIqqI", 1, 0, 0, 0, 1) + struct.pack(">HIi", 0, 0, -2),  # bad value length
        struct.pack(">BIqqI", 1, 0, 0, 0, 1) + struct.pack(">HIi", 0, 50, 0),  # key overruns
        struct.pack(">BIqqI", 1, 0, 0, 0, 2**32 - 1) + struct.pack(">HIi", 0, 0, 0),  # count
    ],
)
def test_structurally_invalid_body_with_valid_crc_is_corrupt(body: bytes) -> None:
    data = with_valid_crc(body)
    with pytest.raises(CorruptEntry):
        decode_entry(data)
    assert decode_frames(data).status is FrameStatus.CORRUPT


@given(st.binary(max_size=400))
def test_random_bytes_never_raise_foreign_errors(data: bytes) -> None:
    try:
        decoded = decode_frames(data)
    except RecordLogError:
        return
    assert decoded.consumed <= len(data)
    with contextlib.suppress(RecordLogError):
        decode_entry(data)


@given(st.binary(max_size=300))
def test_random_body_with_valid_crc_never_raises_foreign_errors(body: bytes) -> None:
    # Random bytes almost never pass the CRC; this drives the payload decoder itself.
    data = with_valid_crc(b"\x01" + body)
    try:
        entry = decode_entry(data)
    except RecordLogError:
        return
    assert frame(entry) == data  # anything that decodes is exactly what we would have written


@given(st.lists(entries_st, min_size=1, max_size=4), st.data())
def test_random_corruption_of_valid_frames(entries: list[LogEntry], data: st.DataObject) -> None:
    buf = bytearray(b"".join(frame(e) for e in entries))
    index = data.draw(st.integers(0, len(buf) - 1))
    buf[index] = data.draw(st.integers(0, 255).filter(lambda b: b != buf[index]))
    try:
        decoded = decode_frames(bytes(buf))
    except RecordLogError:
        return
    # Whatever decodes is a prefix of the original entries.
    assert [e for _, e in decoded.entries] == entries[: len(decoded.entries)]


@pytest.mark.parametrize(
    ("args", "error"),
    [
        ((0, 0, 0, []), ValueError),
        ((-1, 0, 0, [LogRecord(1, b"k", None)]), ValueError),
        ((0, 2**32, 0, [LogRecord(1, b"k", None)]), ValueError),
        ((0, 0, 2**63, [LogRecord(1, b"k", None)]), ValueError),
        ((0, 0, 0, [LogRecord(0x10000, b"k", None)]), ValueError),
        ((0, 0, 0, [LogRecord(1, "k", None)]), TypeError),  # type: ignore[arg-type]
        ((0, 0, 0, [LogRecord(1, b"k", "v")]), TypeError),  # type: ignore[arg-type]
    ],
)
def test_encode_rejects_what_the_format_cannot_hold(args: tuple, error: type) -> None:  # type: ignore[type-arg]
    with pytest.raises(error):
        encode_entry(*args)
