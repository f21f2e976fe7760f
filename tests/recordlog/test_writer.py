"""RecordLog: round trip, segment roll, recovery of torn tails, flush policies, fail-stop."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from coordinator.recordlog import (
    CorruptLog,
    FlushPolicy,
    LogConfig,
    LogEntry,
    LogFailed,
    MemoryFileSystem,
    RealFileSystem,
    RecordLog,
    WriteRefused,
    encode_entry,
)
from coordinator.recordlog.segments import list_segments, segment_path
from tests.recordlog.support import LOG_DIR, read_all, rec


def test_round_trip_and_offsets() -> None:
    fs = MemoryFileSystem()
    log = RecordLog.open(fs, LOG_DIR)
    assert log.writer_epoch == 1
    assert log.append([rec(1, "a", "1")], 100) == 0
    assert log.append([rec(1, "b", "2"), rec(2, "a", None)], 101) == 1
    assert log.durable_end == 0  # nothing is durable before flush
    assert log.flush() == 2
    log.close()
    assert read_all(fs) == [
        LogEntry(0, 100, 1, (rec(1, "a", "1"),)),
        LogEntry(1, 101, 1, (rec(1, "b", "2"), rec(2, "a", None))),
    ]


def test_reopen_continues_offsets_and_bumps_epoch() -> None:
    fs = MemoryFileSystem()
    log = RecordLog.open(fs, LOG_DIR)
    log.append([rec(1, "a", "1")], 1)
    log.close()
    log = RecordLog.open(fs, LOG_DIR)
    assert log.writer_epoch == 2
    assert log.recovery.max_epoch == 1
    assert log.append([rec(1, "a", "2")], 2) == 1
    log.close()
    assert [(e.offset, e.writer_epoch) for e in read_all(fs)] == [(0, 1), (1, 2)]


def test_real_filesystem_round_trip(tmp_path: Path) -> None:
    fs = RealFileSystem()
    directory = str(tmp_path / "log")
    log = RecordLog.open(fs, directory, config=LogConfig(segment_bytes=300))
    for i in range(20):
        log.append([rec(1, f"k{i}", "v" * i)], i)
        log.flush()
    log.close()
    assert len(list_segments(fs, directory)) > 1
    replayed: list[LogEntry] = []
    RecordLog.open(fs, directory, replay=replayed.append).close()
    assert [e.records[0].value for e in replayed] == [b"v" * i for i in range(20)]


def test_segment_roll() -> None:
    fs = MemoryFileSystem()
    frame_size = len(encode_entry(0, 1, 0, [rec(1, "k00", "x" * 50)]))
    log = RecordLog.open(fs, LOG_DIR, config=LogConfig(segment_bytes=3 * frame_size))
    for i in range(10):
        log.append([rec(1, f"k{i:02d}", "x" * 50)], i)
        log.flush()
    log.close()
    # three entries per segment; each segment is named by the offset of its first entry
    assert list_segments(fs, LOG_DIR) == [0, 3, 6, 9]
    assert [e.offset for e in read_all(fs)] == list(range(10))
    # closed segments were fsynced before the roll: durable content equals content
    for base in (0, 3, 6):
        path = segment_path(LOG_DIR, base)
        assert fs.durable_content(path) == fs.content(path)
        assert len(fs.content(path)) == 3 * frame_size


def test_a_batch_is_never_split_across_segments() -> None:
    fs = MemoryFileSystem()
    log = RecordLog.open(fs, LOG_DIR, config=LogConfig(segment_bytes=100))
    for i in range(5):
        log.append([rec(1, f"k{i}", "x" * 40)], i)
    log.flush()
    log.append([rec(1, "next", "y")], 9)
    log.flush()
    log.close()
    assert list_segments(fs, LOG_DIR) == [0, 5]


def _write_three(fs: MemoryFileSystem) -> bytes:
    log = RecordLog.open(fs, LOG_DIR)
    for i in range(3):
        log.append([rec(1, f"k{i}", f"v{i}")], i)
    log.close()
    return fs.content(segment_path(LOG_DIR, 0))


def test_torn_tail_at_every_byte_boundary_is_truncated_and_reported() -> None:
    reference = MemoryFileSystem()
    whole = _write_three(reference)
    two = len(encode_entry(0, 1, 0, [rec(1, "k0", "v0")])) * 2
    for cut in range(two, len(whole) + 1):
        fs = MemoryFileSystem()
        fs.write_file(segment_path(LOG_DIR, 0), whole[:cut])
        replayed: list[LogEntry] = []
        log = RecordLog.open(fs, LOG_DIR, replay=replayed.append)
        complete = 3 if cut == len(whole) else 2
        assert [e.offset for e in replayed] == list(range(complete))
        assert log.recovery.truncated_bytes == (0 if complete == 3 else cut - two)
        assert log.next_offset == complete
        # the truncation is durable, and appending continues cleanly after it
        assert (
            fs.durable_content(segment_path(LOG_DIR, 0)) == whole[: two if complete == 2 else cut]
        )
        log.append([rec(1, "after", "x")], 9)
        log.close()
        assert [e.offset for e in read_all(fs)] == [*range(complete), complete]


def test_bad_crc_in_last_segment_is_truncated() -> None:
    fs = MemoryFileSystem()
    whole = _write_three(fs)
    damaged = bytearray(whole)
    damaged[-1] ^= 0xFF
    fs.write_file(segment_path(LOG_DIR, 0), bytes(damaged))
    replayed: list[LogEntry] = []
    log = RecordLog.open(fs, LOG_DIR, replay=replayed.append)
    assert [e.offset for e in replayed] == [0, 1]
    assert log.recovery.truncated_bytes == len(whole) - 2 * (len(whole) // 3)
    log.close()


def test_damage_in_a_closed_segment_refuses_to_open() -> None:
    fs = MemoryFileSystem()
    log = RecordLog.open(fs, LOG_DIR, config=LogConfig(segment_bytes=1))
    for i in range(3):
        log.append([rec(1, f"k{i}", "v")], i)
        log.flush()
    log.close()
    path = segment_path(LOG_DIR, 1)
    damaged = bytearray(fs.content(path))
    damaged[-1] ^= 0xFF
    fs.write_file(path, bytes(damaged))
    with pytest.raises(CorruptLog, match=r"00000000000000000001\.log"):
        RecordLog.open(fs, LOG_DIR)
    assert fs.content(path) == bytes(damaged)  # nothing was "repaired"


def test_stale_compaction_temporaries_are_removed_on_open() -> None:
    fs = MemoryFileSystem()
    _write_three(fs)
    fs.write_file(f"{LOG_DIR}/00000000000000000000.log.compacting", b"half")
    RecordLog.open(fs, LOG_DIR).close()
    assert sorted(fs.list_dir(LOG_DIR)) == ["00000000000000000000.log"]


def test_policy_always_fsyncs_once_per_batch() -> None:
    fs = MemoryFileSystem()
    log = RecordLog.open(fs, LOG_DIR)
    before = fs.op_counts.get("fsync", 0)
    for batch in range(4):
        for i in range(10):
            log.append([rec(1, f"{batch}-{i}", "v")], 0)
        assert log.flush() == (batch + 1) * 10
        assert fs.durable_content(segment_path(LOG_DIR, 0)) == fs.content(segment_path(LOG_DIR, 0))
    assert fs.op_counts["fsync"] - before == 4
    assert fs.op_counts["write"] == 4
    log.close()


def test_policy_none_never_fsyncs_but_counts_written_as_durable() -> None:
    fs = MemoryFileSystem()
    log = RecordLog.open(fs, LOG_DIR, config=LogConfig(flush_policy=FlushPolicy.NONE))
    log.append([rec(1, "a", "v")], 0)
    assert log.flush() == 1
    log.close()
    assert fs.op_counts.get("fsync", 0) == 0
    fs.crash()
    # the file was created (and its directory entry synced) by open, but no data is durable
    assert fs.content(segment_path(LOG_DIR, 0)) == b""


def test_policy_interval_fsyncs_at_most_every_interval() -> None:
    fs = MemoryFileSystem()
    config = LogConfig(flush_policy=FlushPolicy.INTERVAL, flush_interval_ms=100)
    log = RecordLog.open(fs, LOG_DIR, config=config)
    log.append([rec(1, "a", "v")], 0)
    assert log.flush(now_ms=1000) == 1  # first sync is due at once
    log.append([rec(1, "b", "v")], 0)
    assert log.flush(now_ms=1050) == 1  # written, not yet durable
    assert log.written_end == 2
    assert log.sync_due_ms() == 1100
    assert log.flush(now_ms=1099) == 1
    assert log.flush(now_ms=1100) == 2  # nothing new buffered, but the due sync happens
    assert fs.op_counts["fsync"] == 2
    assert log.sync_due_ms() is None
    log.append([rec(1, "c", "v")], 0)
    with pytest.raises(ValueError, match="now_ms"):
        log.flush()
    # the mistake cost nothing: the entry is still buffered and the log still works
    assert log.failed is None
    assert log.flush(now_ms=1300) == 3
    log.close()


def test_failed_fsync_is_fail_stop() -> None:
    fs = MemoryFileSystem()
    log = RecordLog.open(fs, LOG_DIR)
    log.append([rec(1, "a", "v")], 0)
    fs.fail_next("fsync")
    with pytest.raises(OSError):
        log.flush()
    assert log.durable_end == 0
    assert isinstance(log.failed, OSError)
    with pytest.raises(LogFailed):
        log.append([rec(1, "b", "v")], 0)
    with pytest.raises(LogFailed):
        log.sync()
    log.close()  # releases the file without trying again


def test_a_refused_short_write_is_cut_back_and_the_log_rewinds_to_its_written_end() -> None:
    fs = MemoryFileSystem()
    log = RecordLog.open(fs, LOG_DIR)
    log.append([rec(1, "a", "v")], 0)
    log.flush()
    log.append([rec(1, "b", "v")], 0)
    fs.fail_next("write", partial_bytes=7, error=OSError(errno.ENOSPC, "disk full"))
    with pytest.raises(WriteRefused, match="disk full") as refused:
        log.flush()
    assert refused.value.first_offset == 1
    assert len(fs.content(segment_path(LOG_DIR, 0))) == len(fs.durable_content(segment_path(LOG_DIR, 0)) or b"")
    log.rewind()
    assert log.append([rec(1, "c", "v")], 0) == 2  # the refused entry's offset stays unused
    log.flush()
    assert list_segments(fs, LOG_DIR) == [0, 2]  # and its bytes' place too: a new segment
    log.close()
    replayed: list[LogEntry] = []
    log = RecordLog.open(fs, LOG_DIR, replay=replayed.append)
    assert [(e.offset, e.records[0].key) for e in replayed] == [(0, b"a"), (2, b"c")]
    assert log.next_offset == 3
    assert log.recovery.truncated_bytes == 0
    log.close()


def test_a_failed_write_that_cannot_be_cut_back_is_fail_stop_and_recovered_on_restart() -> None:
    fs = MemoryFileSystem()
    log = RecordLog.open(fs, LOG_DIR)
    log.append([rec(1, "a", "v")], 0)
    log.flush()
    log.append([rec(1, "b", "v")], 0)
    fs.fail_next("write", partial_bytes=7, error=OSError(errno.ENOSPC, "disk full"))
    fs.fail_next("truncate", error=OSError(errno.EIO, "cut failed"))
    with pytest.raises(OSError, match="cut failed"):
        log.flush()
    with pytest.raises(LogFailed):
        log.flush()
    log.close()
    # the restart truncates the 7 bytes of the half-written entry and reports them
    replayed: list[LogEntry] = []
    log = RecordLog.open(fs, LOG_DIR, replay=replayed.append)
    assert [e.offset for e in replayed] == [0]
    assert log.recovery.truncated_bytes == 7
    log.close()


def test_invalid_records_are_rejected_without_buffering() -> None:
    fs = MemoryFileSystem()
    log = RecordLog.open(fs, LOG_DIR)
    with pytest.raises(ValueError):
        log.append([], 0)
    with pytest.raises(ValueError):
        log.append([rec(70000, "k", "v")], 0)
    assert log.append([rec(1, "k", "v")], 0) == 0
    log.close()
    assert len(read_all(fs)) == 1


def test_from_offset_replays_only_the_rest() -> None:
    fs = MemoryFileSystem()
    log = RecordLog.open(fs, LOG_DIR)
    for i in range(5):
        log.append([rec(1, f"k{i}", "v")], i)
    log.close()
    replayed: list[LogEntry] = []
    log = RecordLog.open(fs, LOG_DIR, replay=replayed.append, from_offset=3)
    assert [e.offset for e in replayed] == [3, 4]
    assert log.recovery.entries_read == 5
    log.close()


def test_corruption_early_in_a_large_last_segment_reports_every_dropped_byte() -> None:
    # The reader works in 4 MiB chunks; the report must count the bytes past the chunk too.
    fs = MemoryFileSystem()
    log = RecordLog.open(fs, LOG_DIR, config=LogConfig(flush_policy=FlushPolicy.NONE))
    for i in range(100):
        log.append([rec(1, f"k{i}", "x" * 100_000)], 0)
    log.close()
    path = segment_path(LOG_DIR, 0)
    content = bytearray(fs.content(path))
    first = len(encode_entry(0, 1, 0, [rec(1, "k0", "x" * 100_000)]))
    content[first + 20] ^= 0xFF  # inside the second entry
    fs.write_file(path, bytes(content))
    log = RecordLog.open(fs, LOG_DIR)
    assert log.recovery.truncated_bytes == len(content) - first
    assert log.next_offset == 1
    log.close()


def test_after_a_refused_write_the_next_one_starts_a_new_segment_whose_creation_may_be_refused_too() -> None:
    fs = MemoryFileSystem()
    log = RecordLog.open(fs, LOG_DIR)
    log.append([rec(1, "a", "v")], 0)
    log.flush()
    full = OSError(errno.ENOSPC, "disk full")
    fs.fail_next("write", error=full)
    log.append([rec(1, "b", "v")], 0)
    with pytest.raises(WriteRefused):
        log.flush()
    log.rewind()
    fs.fail_next("open_append", error=full)  # no room for the new segment's file either
    log.append([rec(1, "c", "v")], 0)
    with pytest.raises(WriteRefused, match="cannot create segment 2"):
        log.flush()
    assert list_segments(fs, LOG_DIR) == [0] and log.written_end == 2
    log.rewind()
    fs.fail_next("write", partial_bytes=9, error=full)  # in the new, empty segment this time
    log.append([rec(1, "d", "v")], 0)
    with pytest.raises(WriteRefused):
        log.flush()
    log.rewind()
    log.append([rec(1, "e", "v")], 0)
    assert log.flush() == 5
    # Never written again where it was cut back: the empty segment 3 stays, closed.
    assert list_segments(fs, LOG_DIR) == [0, 3, 4]
    log.close()
    assert [(e.offset, e.records[0].key) for e in read_all(fs)] == [(0, b"a"), (4, b"e")]
