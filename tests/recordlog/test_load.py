"""Loading (`load`): the fused reader accepts what `iter_frames` accepts, stops where it stops,
applies the reading rules of `segments`, and keeps the latest value per key in order of latest
write; a coordinator loading a log in windows ends in the state of an entry-by-entry replay."""

from __future__ import annotations

import struct

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator.recordlog import (
    LoadBatch,
    LogConfig,
    LogEntry,
    LogRecord,
    LogTailer,
    MemoryFileSystem,
    RecordLog,
    UnsupportedFormatVersion,
    encode_entry,
)
from coordinator.recordlog.format import FrameStatus, decode_frames
from coordinator.recordlog.load import LoadState, load_segment, scan
from coordinator.recordlog.record import record_identity, split_identity
from coordinator.recordlog.segments import ReplayFilter, SegmentReader

from .support import LOG_DIR, State, batch_apply, load_all, rec, replay_state

# Few keys and types, so that keys repeat (and collide across types, as coordinator keys do).
records_st = st.lists(
    st.builds(LogRecord, st.sampled_from([0, 1, 2, 1000]), st.sampled_from([b"", b"a", b"bb", b"a" * 130]),
              st.none() | st.binary(max_size=40)),
    min_size=1,
    max_size=4,
)


@st.composite
def logs_st(draw: st.DrawFn) -> list[LogEntry]:
    """Entries with increasing offsets and epochs, and some duplicates and fenced writes."""
    entries = []
    epoch = 1
    for offset in range(draw(st.integers(0, 25))):
        kind = draw(st.sampled_from(["next", "next", "next", "duplicate", "fenced", "new epoch"]))
        if kind == "new epoch":
            epoch += 1
        entry_offset = max(0, offset - draw(st.integers(1, 3))) if kind == "duplicate" else offset
        entry_epoch = max(0, epoch - 1) if kind == "fenced" else epoch
        entries.append(LogEntry(entry_offset, 1_000 + offset, entry_epoch, tuple(draw(records_st))))
    return entries


def frames(entries: list[LogEntry]) -> bytes:
    return b"".join(encode_entry(e.offset, e.writer_epoch, e.timestamp_ms, e.records) for e in entries)


def expected(buf: bytes, state: LoadState, from_offset: int = 0) -> tuple[list[tuple[bytes, bytes | None]], ReplayFilter]:
    """The model: `decode_frames`, `ReplayFilter`, then every record of the accepted entries in order."""
    replay_filter = ReplayFilter(state.max_offset, state.max_epoch)
    kept: list[tuple[bytes, bytes | None]] = []
    for _, entry in decode_frames(buf).entries:
        if replay_filter.accept(entry) and entry.offset >= from_offset:
            kept += [(record_identity(r.record_type, r.key), r.value) for r in entry.records]
    return kept, replay_filter


def gathered(state: LoadState) -> list[tuple[bytes, bytes | None]]:
    return list(state.batch.items())


def scanned(buf: bytes, from_offset: int = 0) -> tuple[LoadState, int, FrameStatus]:
    state = LoadState(lambda batch: None, from_offset=from_offset)
    consumed, status = scan(buf, 0, state)
    return state, consumed, status


@given(logs_st(), st.integers(0, 10))
def test_scan_keeps_every_record_of_the_accepted_entries_in_order(entries: list[LogEntry], from_offset: int) -> None:
    buf = frames(entries)
    state, consumed, status = scanned(buf, from_offset)
    assert (consumed, status) == (len(buf), FrameStatus.END)
    kept, replay_filter = expected(buf, LoadState(None), from_offset)
    assert gathered(state) == kept
    assert (state.max_offset, state.max_epoch) == (replay_filter.max_offset, replay_filter.max_epoch)
    assert (state.duplicates_skipped, state.fenced_skipped) == (
        replay_filter.duplicates_skipped, replay_filter.fenced_skipped)
    accepted = [e for e in entries if e.offset >= from_offset]
    assert state.entries_loaded == state.batch.entries <= len(accepted)


@settings(max_examples=300)
@given(logs_st(), st.data())
def test_scan_stops_where_iter_frames_stops_on_damaged_data(entries: list[LogEntry], data: st.DataObject) -> None:
    buf = bytearray(frames(entries) + data.draw(st.binary(max_size=50)))
    for _ in range(data.draw(st.integers(0, 3))):
        if buf:
            buf[data.draw(st.integers(0, len(buf) - 1))] = data.draw(st.integers(0, 255))
    buf = buf[: data.draw(st.integers(0, len(buf)))]
    check_same_as_iter_frames(bytes(buf))


@given(st.binary(max_size=200))
def test_scan_of_arbitrary_bytes_agrees_with_iter_frames(buf: bytes) -> None:
    check_same_as_iter_frames(buf)


def with_valid_crc(body: bytes) -> bytes:
    return struct.pack(">II", len(body) + 4, crc32c.crc32c(body)) + body


@settings(max_examples=300)
@given(logs_st(), st.data())
def test_scan_agrees_with_iter_frames_on_malformed_bodies_with_valid_crcs(entries: list[LogEntry],
                                                                          data: st.DataObject) -> None:
    """Damage behind a valid CRC drives the structure checks (of one and of several records)."""
    good = [frames([e]) for e in entries] or [b""]
    index = data.draw(st.integers(0, len(good) - 1))
    body = bytearray(good[index][8:])
    if body:
        for _ in range(data.draw(st.integers(1, 3))):
            at = data.draw(st.integers(min(len(body) - 1, 21), len(body) - 1))  # after offset & co
            body[at] = data.draw(st.sampled_from([0, 1, 0x7F, 0x80, 0xFF, data.draw(st.integers(0, 255))]))
        cut = data.draw(st.integers(0, 2))
        good[index] = with_valid_crc(bytes(body[: len(body) - cut] if cut < len(body) else body))
    check_same_as_iter_frames(b"".join(good))


@given(st.binary(max_size=120))
def test_scan_agrees_with_iter_frames_on_random_v1_bodies(body: bytes) -> None:
    check_same_as_iter_frames(with_valid_crc(struct.pack(">BIqq", 1, 0, 0, 0) + body))


def check_same_as_iter_frames(buf: bytes) -> None:
    reference: tuple[object, ...]
    try:
        decoded = decode_frames(buf)
    except UnsupportedFormatVersion as exc:
        reference = ("unsupported", exc.args)
    else:
        reference = (decoded.consumed, decoded.status)
    got: tuple[object, ...]
    try:
        state, consumed, status = scanned(buf)
    except UnsupportedFormatVersion as exc:
        got = ("unsupported", exc.args)
    else:
        got = (consumed, status)
        kept, _ = expected(buf[:consumed], LoadState(None))
        assert gathered(state) == kept
    assert got == reference


def test_every_record_is_kept_in_order() -> None:
    k1, k2 = record_identity(1, b"k"), record_identity(2, b"k")
    one = [LogEntry(0, 1, 1, (rec(1, "k", "v1"),)), LogEntry(1, 1, 1, (rec(2, "k", "x"),)),
           LogEntry(2, 1, 1, (rec(1, "k", "v2"),)), LogEntry(3, 1, 1, (rec(1, "k", None),)),
           LogEntry(4, 1, 1, (rec(2, "k", "y"),))]
    records = [(k1, b"v1"), (k2, b"x"), (k1, b"v2"), (k1, None), (k2, b"y")]
    state, _, _ = scanned(frames(one))
    assert gathered(state) == records
    # the same records in multi-record entries (split inline)
    many = [LogEntry(0, 1, 1, (rec(1, "k", "v1"), rec(2, "k", "x"), rec(1, "k", "v2"))),
            LogEntry(1, 1, 1, (rec(1, "k", None), rec(2, "k", "y")))]
    state, _, _ = scanned(frames(many))
    assert gathered(state) == records


def test_identity_round_trip() -> None:
    assert split_identity(record_identity(1000, b"key")) == (1000, b"key")
    assert record_identity(1, b"k")[:6] == b"\x00\x01\x00\x00\x00\x01"


def test_without_a_sink_entries_are_counted_not_gathered() -> None:
    buf = frames([LogEntry(0, 1, 1, (rec(1, "a", "x"), rec(1, "b", None))), LogEntry(1, 1, 1, (rec(1, "a", "y"),))])
    state = LoadState(None)
    scan(buf, 0, state)
    assert len(state.batch) == 0
    assert (state.batch.entries, state.batch.last_offset, state.entries_loaded) == (2, 1, 2)


@pytest.mark.parametrize("chunk", [64, 100, 4096])
@pytest.mark.parametrize("tail", [b"", b"\x00\x00\x00", b"\x00" * 40, "torn"])
def test_segments_are_read_across_chunk_boundaries(chunk: int, tail: bytes | str) -> None:
    """Frames straddle chunks and some are larger than a chunk; the end is the same as the
    entry reader's, whatever the tail."""
    entries = [LogEntry(i, 0, 1, (rec(1, f"k{i % 4}", "v" * (i * 13 % 300)),)) for i in range(40)]
    data = frames(entries)
    data += data[-50:-10] if tail == "torn" else tail  # type: ignore[operator]
    fs = MemoryFileSystem()
    fs.write_file("/seg.log", data)
    state = LoadState(lambda batch: None, read_chunk=chunk)
    handle = fs.open_read("/seg.log")
    end = load_segment(handle, 0, state)
    reader = SegmentReader(fs.open_read("/seg.log"))
    by_entries = [entry for _, entry in reader]
    assert reader.end is not None
    assert end == (reader.end.valid_length, reader.end.file_size, reader.end.status)
    state.hand_over(full_only=False)
    assert state.entries_loaded == len(by_entries) == 40


def test_batches_are_handed_over_by_window_and_apply_to_the_replayed_state() -> None:
    fs = MemoryFileSystem()
    log = RecordLog.open(fs, LOG_DIR)
    for i in range(200):
        log.append([rec(1, f"k{i % 7}", None if i % 5 == 0 else f"v{i}")], i)
        if i % 10 == 9:
            log.flush()
    log.close()
    entries: list[LogEntry] = []
    RecordLog.open(fs, LOG_DIR, replay=entries.append).close()
    state, batches, recovery = load_all(fs, window=3)
    assert state == replay_state(entries)
    assert recovery.entries_replayed == 200 == sum(b.entries for b in batches)
    assert len(batches) > 1
    # a batch is handed over once it holds a window of records, checked after each read chunk
    # (100 bytes: two of these ~49-byte frames), so it holds at most 3 - 1 + 2
    assert all(len(b) <= 4 for b in batches)
    whole, [one], _ = load_all(fs, window=10**6, read_chunk=10**6)
    assert whole == state and len(one) == 200


def test_from_offset_gathers_only_the_rest() -> None:
    fs = MemoryFileSystem()
    log = RecordLog.open(fs, LOG_DIR)
    for i in range(5):
        log.append([rec(1, f"k{i}", "v")], i)
    log.close()
    state, _, recovery = load_all(fs, from_offset=3)
    assert state == {(1, b"k3"): b"v", (1, b"k4"): b"v"}
    assert recovery.entries_replayed == 2 and recovery.entries_read == 5 and recovery.next_offset == 5


def test_recover_takes_one_consumer() -> None:
    with pytest.raises(ValueError):
        RecordLog.open(MemoryFileSystem(), LOG_DIR, replay=lambda e: None, load=lambda b: None)


def test_tailer_load_follows_the_writer_in_batches() -> None:
    fs = MemoryFileSystem()
    log = RecordLog.open(fs, LOG_DIR, config=LogConfig(segment_bytes=1024))
    tailer = LogTailer(fs, LOG_DIR)
    state: State = {}
    batches: list[LoadBatch] = []

    def sink(batch: LoadBatch) -> None:
        batches.append(batch)
        batch_apply(state, batch)

    assert tailer.load(sink) == 0 and not batches
    written: list[LogEntry] = []
    for round_ in range(4):
        for i in range(30):
            records = (rec(1, f"k{i % 9}", None if i % 4 == 0 else f"{round_}-{i}"),)
            offset = log.append(list(records), i)
            written.append(LogEntry(offset, i, log.writer_epoch, records))
        log.flush()
        assert tailer.load(sink, window=4, read_chunk=100) == 30
        assert state == replay_state(written)
        assert tailer.next_offset == len(written)
    assert len(list(fs.list_dir(LOG_DIR))) > 2  # it followed segment rolls
    assert len(batches) > 8  # and handed over several batches a poll
    log.close()


def test_unknown_version_with_a_valid_crc_raises_on_load() -> None:
    """An older coordinator refuses a newer log rather than truncating it."""
    fs = MemoryFileSystem()
    good = encode_entry(0, 1, 0, [rec(1, "k", "v")])
    body = bytearray(good[8:])
    body[0] = 2  # format version 2
    bad = struct.pack(">II", len(body) + 4, crc32c.crc32c(bytes(body))) + bytes(body)
    fs.write_file(LOG_DIR + "/00000000000000000000.log", good + bad)
    with pytest.raises(UnsupportedFormatVersion):
        load_all(fs)
    assert fs.content(LOG_DIR + "/00000000000000000000.log") == good + bad
