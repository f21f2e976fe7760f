"""Compaction keeps the replayed state: replay(compact(log)) == replay(log)."""

from __future__ import annotations

import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coordinator.recordlog import (
    LogConfig,
    LogEntry,
    LogRecord,
    MemoryFileSystem,
    RecordLog,
    compact,
    compact_offline,
    try_lock_data_dir,
)
from coordinator.recordlog.segments import list_segments, segment_path
from tests.recordlog.support import (
    LOG_DIR,
    SimulatedCrash,
    read_all,
    rec,
    replay_state,
)

entry_st = st.tuples(
    st.lists(
        st.builds(
            LogRecord,
            st.integers(0, 2),
            st.sampled_from([b"a", b"b", b"c", b"d", b"e", b"f"]),
            st.none() | st.binary(max_size=20),
        ),
        min_size=1,
        max_size=4,
    ),
    st.integers(0, 10_000),  # timestamp_ms
    st.booleans(),  # flush after this entry
)


def write_log(
    entries: list[tuple[list[LogRecord], int, bool]], segment_bytes: int
) -> MemoryFileSystem:
    fs = MemoryFileSystem()
    log = RecordLog.open(fs, LOG_DIR, config=LogConfig(segment_bytes=segment_bytes))
    for records, timestamp_ms, flush in entries:
        log.append(records, timestamp_ms)
        if flush:
            log.flush()
    log.close()
    return fs


@given(
    st.lists(entry_st, min_size=1, max_size=40),
    st.integers(60, 400),  # segment_bytes
    st.integers(0, 12_000),  # now_ms
    st.integers(0, 5_000),  # delete_retention_ms
)
def test_replay_of_compacted_log_equals_replay_of_log(
    entries: list[tuple[list[LogRecord], int, bool]],
    segment_bytes: int,
    now_ms: int,
    retention_ms: int,
) -> None:
    fs = write_log(entries, segment_bytes)
    before = read_all(fs)
    active = list_segments(fs, LOG_DIR)[-1]
    active_bytes = fs.content(segment_path(LOG_DIR, active))

    report = compact(
        fs, LOG_DIR, now_ms=now_ms, delete_retention_ms=retention_ms, segment_bytes=segment_bytes
    )
    after = read_all(fs)

    assert replay_state(after) == replay_state(before)
    # the active segment is never touched
    assert fs.content(segment_path(LOG_DIR, active)) == active_bytes
    closed_after = [e for e in after if e.offset < active]
    closed_before = [e for e in before if e.offset < active]
    # entries keep offset, timestamp, epoch; their surviving records keep their order
    originals = {e.offset: e for e in before}
    for entry in after:
        original = originals[entry.offset]
        assert entry._replace(records=()) == original._replace(records=())
        assert is_subsequence(entry.records, original.records)
    # closed segments hold at most one record per key, and only young tombstones
    keys = [(r.record_type, r.key) for e in closed_after for r in e.records]
    assert len(keys) == len(set(keys))
    for entry in closed_after:
        for record in entry.records:
            if record.value is None:
                assert now_ms - entry.timestamp_ms < retention_ms
    assert report.records_before == sum(len(e.records) for e in closed_before)
    assert report.records_after == len(keys)
    # compacting again changes nothing a replay can see
    compact(
        fs, LOG_DIR, now_ms=now_ms, delete_retention_ms=retention_ms, segment_bytes=segment_bytes
    )
    assert replay_state(read_all(fs)) == replay_state(before)


def is_subsequence(part: tuple[LogRecord, ...], whole: tuple[LogRecord, ...]) -> bool:
    it = iter(whole)
    return all(any(p == w for w in it) for p in part)


def test_tombstones_are_kept_until_retention_then_dropped() -> None:
    fs = MemoryFileSystem()
    log = RecordLog.open(fs, LOG_DIR, config=LogConfig(segment_bytes=1))  # one entry per segment
    for records, timestamp_ms in [
        ([rec(1, "g", "v1")], 1_000),
        ([rec(1, "g", None)], 2_000),
        ([rec(1, "other", "x")], 3_000),  # the active segment
    ]:
        log.append(records, timestamp_ms)
        log.flush()
    log.close()

    report = compact(fs, LOG_DIR, now_ms=2_500, delete_retention_ms=1_000)
    assert report.superseded_dropped == 1
    assert report.tombstones_dropped == 0
    assert [e.records for e in read_all(fs)] == [(rec(1, "g", None),), (rec(1, "other", "x"),)]

    report = compact(fs, LOG_DIR, now_ms=3_000, delete_retention_ms=1_000)
    assert report.tombstones_dropped == 1
    assert [e.records for e in read_all(fs)] == [(rec(1, "other", "x"),)]
    assert list_segments(fs, LOG_DIR) == [2]  # the emptied segments are gone


def test_record_type_is_part_of_the_key() -> None:
    fs = MemoryFileSystem()
    log = RecordLog.open(fs, LOG_DIR, config=LogConfig(segment_bytes=1))
    log.append([rec(1, "k", "type-1"), rec(2, "k", "type-2")], 0)
    log.flush()
    log.append([rec(3, "z", "active")], 0)
    log.close()
    compact(fs, LOG_DIR, now_ms=0)
    assert read_all(fs)[0].records == (rec(1, "k", "type-1"), rec(2, "k", "type-2"))


def test_small_segments_are_merged_up_to_segment_bytes() -> None:
    fs = MemoryFileSystem()
    log = RecordLog.open(fs, LOG_DIR, config=LogConfig(segment_bytes=1))
    for i in range(20):
        log.append([rec(1, f"key-{i:02d}", "value")], 0)
        log.flush()
    log.close()
    assert len(list_segments(fs, LOG_DIR)) == 20
    frame = len(fs.content(segment_path(LOG_DIR, 0)))

    report = compact(fs, LOG_DIR, now_ms=0, segment_bytes=5 * frame)

    # 19 closed segments of one entry each, nothing to drop, merged five at a time
    assert list_segments(fs, LOG_DIR) == [0, 5, 10, 15, 19]
    assert report.segments_before == 19
    assert report.segments_after == 4
    assert report.bytes_after == report.bytes_before
    assert [e.offset for e in read_all(fs)] == list(range(20))


def test_clean_single_segments_are_not_rewritten() -> None:
    fs = write_log([([rec(1, f"k{i}", "v")], 0, True) for i in range(6)], segment_bytes=1)
    renames = fs.op_counts.get("rename", 0)
    report = compact(fs, LOG_DIR, now_ms=0, segment_bytes=1)
    assert fs.op_counts.get("rename", 0) == renames
    assert report.segments_after == report.segments_before == 5


def test_offline_compaction_includes_the_active_segment_and_keeps_offsets() -> None:
    fs = MemoryFileSystem()
    log = RecordLog.open(fs, LOG_DIR)  # everything in one (active) segment
    for i in range(10):
        log.append([rec(1, "same-key", f"v{i}")], 0)
    log.append([rec(1, "gone", None)], 0)
    log.close()
    lock = try_lock_data_dir(fs, "/data")
    assert lock is not None
    with lock:
        report = compact_offline(fs, LOG_DIR, lock, now_ms=10**9)
    assert report.records_after == 1
    assert [(e.offset, e.records) for e in read_all(fs)] == [(9, (rec(1, "same-key", "v9"),))]
    # offsets are never reused, even though the last entries were compacted away
    log = RecordLog.open(fs, LOG_DIR)
    assert log.append([rec(1, "new", "x")], 0) == 11
    log.close()


def test_offline_compaction_requires_the_lock() -> None:
    fs = MemoryFileSystem()
    lock = try_lock_data_dir(fs, "/data")
    assert lock is not None
    lock.release()
    with pytest.raises(ValueError, match="lock"):
        compact_offline(fs, LOG_DIR, lock, now_ms=0)


def test_interrupted_compaction_leftovers_are_skipped_then_cleaned() -> None:
    fs = write_log([([rec(1, f"k{i % 3}", f"v{i}")], 0, True) for i in range(9)], segment_bytes=1)
    before = replay_state(read_all(fs))

    # crash just before the first remove: the merged file replaced segment 0, segments
    # 1..7 are still there with entries it already covers
    def hook(op: str, path: str) -> None:
        if op == "remove":
            raise SimulatedCrash(path)

    fs.hook = hook
    with pytest.raises(SimulatedCrash):
        compact(fs, LOG_DIR, now_ms=0, segment_bytes=10_000)
    fs.hook = None
    fs.crash()
    assert len(list_segments(fs, LOG_DIR)) == 9
    log = RecordLog.open(fs, LOG_DIR)
    assert log.recovery.duplicates_skipped > 0
    log.close()
    assert replay_state(read_all(fs)) == before

    report = compact(fs, LOG_DIR, now_ms=0, segment_bytes=10_000)
    assert report.stale_entries_dropped > 0
    assert list_segments(fs, LOG_DIR) == [0, 8]
    assert replay_state(read_all(fs)) == before


def test_compaction_runs_in_a_thread_while_the_writer_appends() -> None:
    fs = MemoryFileSystem()
    log = RecordLog.open(fs, LOG_DIR, config=LogConfig(segment_bytes=200))
    expected: dict[tuple[int, bytes], bytes] = {}
    for i in range(200):
        log.append([rec(1, f"k{i % 17}", f"v{i}")], 0)
        log.flush()
    started = threading.Event()
    errors: list[BaseException] = []

    def run() -> None:
        started.set()
        try:
            for _ in range(5):
                compact(fs, LOG_DIR, now_ms=0, segment_bytes=200)
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    started.wait()
    for i in range(200, 400):
        log.append([rec(1, f"k{i % 17}", f"v{i}")], 0)
        log.flush()
    thread.join()
    log.close()
    assert errors == []
    for i in range(400):
        expected[(1, f"k{i % 17}".encode())] = f"v{i}".encode()
    assert replay_state(read_all(fs)) == expected


def test_one_compaction_per_directory_at_a_time() -> None:
    fs = write_log([([rec(1, "k", f"v{i}")], 0, True) for i in range(4)], segment_bytes=1)
    nested: list[BaseException] = []

    def hook(op: str, path: str) -> None:
        if op == "rename" and not nested:
            try:
                compact(fs, LOG_DIR, now_ms=0)
            except RuntimeError as exc:
                nested.append(exc)

    fs.hook = hook
    compact(fs, LOG_DIR, now_ms=0)
    fs.hook = None
    assert len(nested) == 1 and "already running" in str(nested[0])


def test_compaction_of_a_log_with_one_segment_does_nothing() -> None:
    fs = write_log([([rec(1, "k", f"v{i}")], 0, False) for i in range(4)], segment_bytes=10_000)
    report = compact(fs, LOG_DIR, now_ms=0)
    assert report.segments_before == 0
    assert len(read_all(fs)) == 4


def test_compaction_keeps_entry_metadata() -> None:
    fs = MemoryFileSystem()
    log = RecordLog.open(fs, LOG_DIR, config=LogConfig(segment_bytes=1), writer_epoch=7)
    for records, timestamp_ms in [
        ([rec(1, "a", "1"), rec(1, "b", "1")], 111),
        ([rec(1, "a", "2")], 222),
        ([rec(1, "z", "active")], 333),
    ]:
        log.append(records, timestamp_ms)
        log.flush()
    log.close()
    compact(fs, LOG_DIR, now_ms=0)
    assert read_all(fs)[:2] == [
        LogEntry(0, 111, 7, (rec(1, "b", "1"),)),
        LogEntry(1, 222, 7, (rec(1, "a", "2"),)),
    ]
