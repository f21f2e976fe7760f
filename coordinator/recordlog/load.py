"""Loading a log for replay: every record, in order, read in one pass.

A coordinator that loads its log (at start-up, or a standby tailing it) replays its records in
order. Loading reads the records of a run of entries into a `LoadBatch`: each record's identity
(`record.record_identity`: type, key length, key, as the frame holds them) and value bytes, in
two lists, in log order. Nothing is decoded here and nothing is dropped: what the records mean,
and which values a later one overwrites, is the consumer's business (the coordinator stores
offset commit values encoded, so a superseded one costs a store, `core.offsets`).

This is a second reader of the frame format (`format.iter_frames` is the first, for whoever
needs entries: compaction, tools, tests), fused for speed: frame checks, CRC, the reading rules
of `segments` (duplicates, fencing, `from_offset`) and the gathering happen in one loop, and an
entry is never materialised. It accepts exactly the frames `iter_frames` accepts, stops where it
stops and applies the same rules (tests/recordlog/test_load.py proves both on arbitrary bytes).
Like `iter_frames`, one-record v1 entries (nearly all of a coordinator's log) are decoded inline,
other v1 entries are split inline and anything else goes through `format._decode_body`.

Memory is bounded: a batch is handed to the sink once it holds `window` records (checked between
read chunks of `read_chunk` bytes), so a batch holds at most a window plus one chunk of records.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable

import crc32c

from coordinator.recordlog.errors import CorruptEntry
from coordinator.recordlog.format import (
    _MIN_LENGTH,
    _V1_HEADER,
    _VALUE_LENGTH,
    FORMAT_V1,
    FRAME_PREFIX_SIZE,
    FrameStatus,
    _decode_body,
)
from coordinator.recordlog.fs import ReadHandle
from coordinator.recordlog.record import IDENTITY_HEAD_SIZE, record_identity

# Records kept before a batch is handed over: bounds memory (about 100 bytes a record, besides
# what the consumer keeps of it).
DEFAULT_WINDOW = 65_536
READ_CHUNK = 256 * 1024  # small: a batch overshoots its window by up to a chunk


class LoadBatch:
    """The records of a run of entries to replay, in log order (see the module docstring).

    `identities[i]` and `values[i]` (None: a tombstone) are the i-th record; `items()` pairs
    them. `entries` counts the entries read into the batch; `last_offset` is the offset of its
    last entry (-1 if none).
    """

    __slots__ = ("entries", "identities", "last_offset", "values")

    def __init__(self) -> None:
        self.identities: list[bytes] = []
        self.values: list[bytes | None] = []
        self.entries = 0
        self.last_offset = -1

    def __bool__(self) -> bool:
        return self.entries > 0

    def __len__(self) -> int:
        return len(self.identities)

    def items(self) -> Iterable[tuple[bytes, bytes | None]]:
        return zip(self.identities, self.values, strict=True)


LoadSink = Callable[[LoadBatch], None]


class LoadState:
    """The reading rules' state across segments and batches (see `segments.ReplayFilter`).

    `max_offset` covers every valid entry read, skipped or not; `entries_read` counts the
    accepted entries, `entries_loaded` those at or above `from_offset` (the ones gathered).
    """

    __slots__ = (
        "batch",
        "duplicates_skipped",
        "entries_loaded",
        "entries_read",
        "fenced_skipped",
        "from_offset",
        "max_epoch",
        "max_offset",
        "read_chunk",
        "sink",
        "window",
    )

    def __init__(
        self,
        sink: LoadSink | None,
        *,
        from_offset: int = 0,
        max_offset: int = -1,
        max_epoch: int = 0,
        window: int = DEFAULT_WINDOW,
        read_chunk: int = READ_CHUNK,
    ) -> None:
        self.sink = sink
        self.from_offset = from_offset
        self.max_offset = max_offset
        self.max_epoch = max_epoch
        self.window = window
        self.read_chunk = read_chunk
        self.duplicates_skipped = 0
        self.fenced_skipped = 0
        self.entries_read = 0
        self.entries_loaded = 0
        self.batch = LoadBatch()

    def hand_over(self, *, full_only: bool) -> None:
        """Give the gathered batch to the sink (if `full_only`, only once it keeps `window` records)."""
        batch = self.batch
        if not batch or (full_only and len(batch) < self.window):
            return
        self.batch = LoadBatch()
        if self.sink is not None:
            self.sink(batch)


def load_segment(handle: ReadHandle, start_position: int, state: LoadState) -> tuple[int, int, FrameStatus]:
    """Read one open segment from `start_position` into `state`, in chunks.

    Returns (valid_length, file_size, status) as `segments.SegmentEnd` has them: the position
    just after the last complete valid frame, the bytes seen, and why reading stopped.
    """
    position = start_position
    chunk_size = state.read_chunk
    while True:
        # Re-read from the first unconsumed frame rather than concatenating the leftover: a
        # read is cheaper than copying a chunk's worth of bytes.
        buf = handle.read(position, chunk_size)
        if not buf:
            return position, position, FrameStatus.END
        consumed, status = scan(buf, position, state)
        position += consumed
        state.hand_over(full_only=True)
        if status is FrameStatus.CORRUPT:
            return position, handle.size(), status
        if status is FrameStatus.INCOMPLETE:
            if len(buf) < chunk_size:
                return position, position + len(buf) - consumed, status  # end of file: torn
            if not consumed:
                chunk_size *= 2  # one frame larger than a chunk
        else:
            chunk_size = state.read_chunk


# The fast path's view of a one-record v1 frame: length, crc, the v1 header without the
# timestamp (replay does not need it), and the record head without its type (key length).
_V1_ONE_RECORD = struct.Struct(">II" + "BIq8xI" + "2xI")
assert _V1_HEADER.format == ">BIqqI"
_V1_ONE_RECORD_SIZE = _V1_ONE_RECORD.size
assert FRAME_PREFIX_SIZE + _V1_HEADER.size + IDENTITY_HEAD_SIZE == _V1_ONE_RECORD_SIZE
_VALUE_LENGTH_SIZE = _VALUE_LENGTH.size
_IDENTITY_HEAD_SIZE = IDENTITY_HEAD_SIZE  # a record's head in a frame is its identity's head
_PREFIX = struct.Struct(">II")
_IDENTITY_AT = _V1_ONE_RECORD_SIZE - _IDENTITY_HEAD_SIZE  # where a one-record frame's identity starts
_V1_RECORDS_AT = FRAME_PREFIX_SIZE + _V1_HEADER.size  # where a v1 frame's records start
_MIN_RECORD_SIZE = _IDENTITY_HEAD_SIZE + _VALUE_LENGTH_SIZE
_unpack_key_length = struct.Struct(">2xI").unpack_from
_unpack_value_length = _VALUE_LENGTH.unpack_from


def _split_v1_records(buf: bytes, pos: int, end: int, count: int) -> tuple[list[bytes], list[bytes | None]] | None:
    """The identities and values of the `count` records of a v1 frame, from `pos` (after its header)
    to `end`; None where `format._decode_body` would find them malformed (the same checks)."""
    if count == 0 or count * _MIN_RECORD_SIZE > end - pos:
        return None
    identities: list[bytes] = []
    values: list[bytes | None] = []
    keep_identity = identities.append
    keep_value = values.append
    for _ in range(count):
        if pos + _IDENTITY_HEAD_SIZE > end:
            return None
        (key_length,) = _unpack_key_length(buf, pos)
        key_end = pos + _IDENTITY_HEAD_SIZE + key_length
        if key_end + _VALUE_LENGTH_SIZE > end:
            return None
        (value_length,) = _unpack_value_length(buf, key_end)
        value_start = key_end + _VALUE_LENGTH_SIZE
        keep_identity(buf[pos:key_end])
        if value_length == -1:
            keep_value(None)
            pos = value_start
        elif value_length < -1 or value_start + value_length > end:
            return None
        else:
            pos = value_start + value_length
            keep_value(buf[value_start:pos])
    return (identities, values) if pos == end else None


def scan(buf: bytes, base_position: int, state: LoadState) -> tuple[int, FrameStatus]:
    """Gather the frames at the start of `buf` into `state.batch`; returns (consumed, status).

    `base_position` is the file position of `buf[0]` (for `UnsupportedFormatVersion`). Stops at
    the end of `buf`, at a frame it does not hold whole (INCOMPLETE) or at a bad frame
    (CORRUPT), exactly where `format.iter_frames` stops.
    """
    # Start-up runs this loop once per entry of the log: every name is a local, the reading
    # rules are inlined (written back in `finally`), and the common frame is decoded inline.
    size = len(buf)
    pos = 0
    unpack_one = _V1_ONE_RECORD.unpack_from
    unpack_value_length = _VALUE_LENGTH.unpack_from
    crc = crc32c.crc32c
    batch = state.batch
    keep_identity = batch.identities.append
    keep_value = batch.values.append
    keep_identities = batch.identities.extend
    keep_values = batch.values.extend
    from_offset = state.from_offset
    gather = state.sink is not None  # with no sink, only read and count (the log-level pass)
    max_offset = state.max_offset
    max_epoch = state.max_epoch
    last_offset = batch.last_offset
    duplicates = fenced = read = loaded = 0
    try:
        while pos < size:
            if size - pos >= _V1_ONE_RECORD_SIZE:
                (length, expected_crc, version, writer_epoch, offset, count, key_length) = unpack_one(buf, pos)
            elif size - pos < FRAME_PREFIX_SIZE:
                return pos, FrameStatus.INCOMPLETE
            else:
                length, expected_crc = _PREFIX.unpack_from(buf, pos)
                version = 0  # too short for a v1 frame: the checks below reject it
            if length < _MIN_LENGTH:
                return pos, FrameStatus.CORRUPT
            end = pos + 4 + length
            if end > size:
                return pos, FrameStatus.INCOMPLETE
            if crc(buf[pos + FRAME_PREFIX_SIZE : end]) != expected_crc:
                return pos, FrameStatus.CORRUPT
            if version == FORMAT_V1 and count == 1 and offset >= 0:
                key_end = pos + _V1_ONE_RECORD_SIZE + key_length
                value_start = key_end + _VALUE_LENGTH_SIZE
                if value_start <= end:
                    (value_length,) = unpack_value_length(buf, key_end)
                    # A value fills the frame exactly; a tombstone (-1) has nothing after it.
                    # Anything else is malformed: `_decode_body` below says why.
                    if value_start + value_length == end or (value_length == -1 and value_start == end):
                        if offset <= max_offset:
                            duplicates += 1
                        elif writer_epoch < max_epoch:
                            max_offset = offset
                            fenced += 1
                        else:
                            max_offset = offset
                            max_epoch = writer_epoch
                            read += 1
                            if offset >= from_offset:
                                loaded += 1
                                last_offset = offset
                                if gather:
                                    # The record head and key, as they are in the frame.
                                    keep_identity(buf[pos + _IDENTITY_AT : key_end])
                                    keep_value(buf[value_start:end] if value_length >= 0 else None)
                        pos = end
                        continue
            # Several records (or a v1 frame the inline path above found malformed, or another
            # version): split inline when `_decode_body` would accept it, else let it decide.
            split = None
            if version == FORMAT_V1 and offset >= 0:
                split = _split_v1_records(buf, pos + _V1_RECORDS_AT, end, count)
            if split is None:
                try:
                    offset, _, writer_epoch, decoded = _decode_body(
                        buf, pos + FRAME_PREFIX_SIZE, end, base_position + pos)
                except CorruptEntry:
                    return pos, FrameStatus.CORRUPT
                split = ([record_identity(r.record_type, r.key) for r in decoded], [r.value for r in decoded])
            pos = end
            if offset <= max_offset:
                duplicates += 1
                continue
            max_offset = offset
            if writer_epoch < max_epoch:
                fenced += 1
                continue
            max_epoch = writer_epoch
            read += 1
            if offset >= from_offset:
                loaded += 1
                last_offset = offset
                if gather:
                    keep_identities(split[0])
                    keep_values(split[1])
        return pos, FrameStatus.END
    finally:
        state.max_offset = max_offset
        state.max_epoch = max_epoch
        state.duplicates_skipped += duplicates
        state.fenced_skipped += fenced
        state.entries_read += read
        state.entries_loaded += loaded
        batch.entries += loaded
        batch.last_offset = last_offset
