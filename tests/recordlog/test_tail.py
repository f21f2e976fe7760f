"""LogTailer follows a log another writer appends to, across rolls and compactions."""

from __future__ import annotations

import errno
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coordinator.recordlog import (
    LoadBatch,
    LogConfig,
    LogEntry,
    LogRecord,
    LogRewound,
    LogTailer,
    MemoryFileSystem,
    RealFileSystem,
    RecordLog,
    WriteRefused,
    compact,
    encode_entry,
)
from coordinator.recordlog.segments import list_segments, segment_path
from tests.recordlog.support import LOG_DIR, State, batch_apply, read_all, rec, replay_state


def test_tail_of_a_log_that_does_not_exist_yet_is_empty() -> None:
    fs = MemoryFileSystem()
    tailer = LogTailer(fs, LOG_DIR)
    assert tailer.poll() == []
    assert tailer.next_offset == 0


def test_tail_returns_each_entry_once_in_order() -> None:
    fs = MemoryFileSystem()
    log = RecordLog.open(fs, LOG_DIR)
    tailer = LogTailer(fs, LOG_DIR)
    log.append([rec(1, "a", "1")], 0)
    assert tailer.poll() == []  # buffered, not written
    log.flush()
    assert [e.offset for e in tailer.poll()] == [0]
    assert tailer.poll() == []
    log.append([rec(1, "b", "2")], 0)
    log.append([rec(1, "c", "3")], 0)
    log.flush()
    assert [e.offset for e in tailer.poll()] == [1, 2]
    assert tailer.next_offset == 3
    assert tailer.max_epoch == 1
    log.close()


def test_partial_entry_being_written_is_waited_for_at_every_byte() -> None:
    fs = MemoryFileSystem()
    RecordLog.open(fs, LOG_DIR).close()
    tailer = LogTailer(fs, LOG_DIR)
    frame = encode_entry(0, 1, 0, [rec(1, "key", "value")])
    handle = fs.open_append(segment_path(LOG_DIR, 0))
    for i in range(len(frame) - 1):
        handle.write(frame[i : i + 1])
        assert tailer.poll() == [], f"returned a partial entry at byte {i + 1}"
    handle.write(frame[-1:])
    assert [e.records for e in tailer.poll()] == [(rec(1, "key", "value"),)]
    handle.close()


def test_tail_follows_segment_rolls_and_max_entries() -> None:
    fs = MemoryFileSystem()
    log = RecordLog.open(fs, LOG_DIR, config=LogConfig(segment_bytes=1))
    tailer = LogTailer(fs, LOG_DIR)
    for i in range(7):
        log.append([rec(1, f"k{i}", "v")], 0)
        log.flush()
    assert len(list_segments(fs, LOG_DIR)) == 7
    assert [e.offset for e in tailer.poll(max_entries=3)] == [0, 1, 2]
    assert [e.offset for e in tailer.poll(max_entries=3)] == [3, 4, 5]
    assert [e.offset for e in tailer.poll()] == [6]
    log.close()


def test_tail_from_an_offset() -> None:
    fs = MemoryFileSystem()
    log = RecordLog.open(fs, LOG_DIR, config=LogConfig(segment_bytes=1))
    for i in range(6):
        log.append([rec(1, f"k{i}", "v")], 0)
        log.flush()
    log.close()
    assert [e.offset for e in LogTailer(fs, LOG_DIR, from_offset=4).poll()] == [4, 5]


def test_standby_takeover_replays_only_what_it_has_not_tailed() -> None:
    fs = MemoryFileSystem()
    active = RecordLog.open(fs, LOG_DIR, config=LogConfig(segment_bytes=200))
    tailer = LogTailer(fs, LOG_DIR)
    standby_applied: list[LogEntry] = []
    for i in range(30):
        active.append([rec(1, f"k{i % 4}", f"v{i}")], 0)
        if i % 3 == 0:
            active.flush()
            standby_applied += tailer.poll()
    active.close()  # the active coordinator dies; its last entries were written by close()
    assert tailer.next_offset < 30

    taken_over: list[LogEntry] = []
    new = RecordLog.open(fs, LOG_DIR, replay=taken_over.append, from_offset=tailer.next_offset)
    assert [e.offset for e in taken_over] == list(range(tailer.next_offset, 30))
    assert new.writer_epoch == tailer.max_epoch + 1
    new.close()
    assert replay_state(standby_applied + taken_over) == replay_state(read_all(fs))


def test_standby_loading_takes_over_with_the_rest_of_the_log() -> None:
    """The server's standby: `tailer.load` while waiting, `RecordLog.open(load=...)` from the
    tailer's next offset on takeover; together they end in the writer's state."""
    fs = MemoryFileSystem()
    active = RecordLog.open(fs, LOG_DIR, config=LogConfig(segment_bytes=200))
    tailer = LogTailer(fs, LOG_DIR)
    state: State = {}
    loaded = 0

    def sink(batch: LoadBatch) -> None:
        nonlocal loaded
        loaded += batch.entries
        batch_apply(state, batch)

    for i in range(30):
        active.append([rec(1, f"k{i % 4}", None if i % 7 == 0 else f"v{i}")], 0)
        if i % 3 == 0:
            active.flush()
            tailer.load(sink, window=2, read_chunk=64)
    active.close()
    assert loaded == tailer.next_offset < 30
    new = RecordLog.open(fs, LOG_DIR, load=sink, from_offset=tailer.next_offset)
    assert new.recovery.entries_replayed == 30 - tailer.next_offset
    assert new.writer_epoch == tailer.max_epoch + 1
    new.close()
    assert state == replay_state(read_all(fs))


def _two_per_segment(fs: MemoryFileSystem) -> RecordLog:
    """A writer whose segments hold two of the entries these tests write (47 bytes each)."""
    return RecordLog.open(fs, LOG_DIR, config=LogConfig(segment_bytes=100))


def _append(log: RecordLog, key: str, value: str) -> None:
    log.append([rec(1, key, value)], 0)
    log.flush()


def test_tailed_segment_replaced_by_a_merge_is_reread() -> None:
    fs = MemoryFileSystem()
    log = _two_per_segment(fs)
    tailer = LogTailer(fs, LOG_DIR)
    _append(log, "a", "0")
    _append(log, "b", "1")
    assert [e.offset for e in tailer.poll()] == [0, 1]  # the tailer sits at the end of seg 0
    _append(log, "a", "2")
    _append(log, "c", "3")
    _append(log, "d", "4")
    assert list_segments(fs, LOG_DIR) == [0, 2, 4]
    compact(fs, LOG_DIR, now_ms=0, segment_bytes=200)
    # segments 0 and 2 were merged into a new file 0 holding offsets 1, 2, 3: its byte layout
    # has nothing to do with where the tailer stopped in the old file
    assert list_segments(fs, LOG_DIR) == [0, 4]
    assert [e.offset for e in tailer.poll()] == [2, 3, 4]
    log.close()


def test_tailed_segment_removed_by_a_merge_is_found_again() -> None:
    fs = MemoryFileSystem()
    log = _two_per_segment(fs)
    tailer = LogTailer(fs, LOG_DIR)
    _append(log, "a", "0")
    _append(log, "b", "1")
    _append(log, "a", "2")
    assert [e.offset for e in tailer.poll()] == [0, 1, 2]  # the tailer sits in seg 2
    _append(log, "c", "3")
    _append(log, "d", "4")
    compact(fs, LOG_DIR, now_ms=0, segment_bytes=200)
    assert list_segments(fs, LOG_DIR) == [0, 4]  # seg 2 is gone, merged into 0
    assert [e.offset for e in tailer.poll()] == [3, 4]
    log.close()


# Appends come in runs, mostly flushed, so that segments roll between polls and compactions.
step_st = st.one_of(
    st.tuples(
        st.just("append"),
        st.lists(st.tuples(st.integers(0, 6), st.none() | st.binary(max_size=12)), max_size=4),
    ),
    st.tuples(st.just("poll")),
    st.tuples(st.just("compact")),
)


@given(st.lists(step_st, max_size=60))
def test_tail_ends_in_the_writers_state_despite_compaction(steps: list[tuple[object, ...]]) -> None:
    fs = MemoryFileSystem()
    log = RecordLog.open(fs, LOG_DIR, config=LogConfig(segment_bytes=120))
    tailer = LogTailer(fs, LOG_DIR)
    loader = LogTailer(fs, LOG_DIR)  # the same, loading (the standby's way)
    loaded: State = {}
    seen: list[LogEntry] = []

    def load() -> None:
        loader.load(lambda batch: batch_apply(loaded, batch), window=2, read_chunk=50)

    for step in steps:
        if step[0] == "append":
            assert isinstance(step[1], list)
            for key, value in step[1]:
                log.append([LogRecord(1, b"k%d" % key, value)], 0)
                log.flush()
        elif step[0] == "poll":
            seen += tailer.poll()
            load()
        else:
            # retention far in the future: only superseded records go, which a tailer may miss
            compact(fs, LOG_DIR, now_ms=0, segment_bytes=240)
    log.close()
    seen += tailer.poll()
    load()
    offsets = [e.offset for e in seen]
    assert offsets == sorted(set(offsets))  # nothing returned twice, in order
    assert replay_state(seen) == replay_state(read_all(fs)) == loaded
    assert loader.next_offset == tailer.next_offset


def test_tail_on_a_real_filesystem(tmp_path: Path) -> None:
    fs = RealFileSystem()
    directory = str(tmp_path / "log")
    log = RecordLog.open(fs, directory, config=LogConfig(segment_bytes=150))
    tailer = LogTailer(fs, directory)
    got: list[int] = []
    for i in range(20):
        log.append([rec(1, f"k{i % 5}", f"v{i}")], 0)
        log.flush()
        if i == 10:
            compact(fs, directory, now_ms=0, segment_bytes=150)
        got += [e.offset for e in tailer.poll()]
    log.close()
    assert got == list(range(20))


def _refuse_next_write_while(fs: MemoryFileSystem, partial_bytes: int, during_cut: Callable[[], object]) -> None:
    """The next write is refused (ENOSPC) after `partial_bytes` reached the file; `during_cut` runs
    in the instant between the short write and the writer cutting it back."""
    fs.fail_next("write", partial_bytes=partial_bytes, error=OSError(errno.ENOSPC, "No space left on device"))

    def hook(op: str, path: str) -> None:
        if op == "truncate":
            fs.hook = None
            during_cut()

    fs.hook = hook


def test_a_tailer_that_read_a_refused_write_before_the_cut_is_told_the_log_rewound() -> None:
    fs = MemoryFileSystem()
    log = RecordLog.open(fs, LOG_DIR)
    tailer = LogTailer(fs, LOG_DIR)
    log.append([rec(1, "a", "1")], 0)
    log.flush()
    assert [e.offset for e in tailer.poll()] == [0]
    log.append([rec(1, "refused", "1")], 0)
    log.append([rec(1, "also-refused", "1")], 0)
    whole_first = len(encode_entry(1, log.writer_epoch, 0, [rec(1, "refused", "1")]))
    seen: list[LogEntry] = []
    _refuse_next_write_while(fs, whole_first + 3, lambda: seen.extend(tailer.poll()))
    with pytest.raises(WriteRefused):
        log.flush()
    assert [e.records[0].key for e in seen] == [b"refused"]  # it read an entry that is now gone
    log.rewind()
    log.append([rec(1, "b", "2")], 0)  # after the refused offsets, in a new segment
    log.flush()
    assert list_segments(fs, LOG_DIR) == [0, 3]
    with pytest.raises(LogRewound):
        tailer.poll()
    fresh = LogTailer(fs, LOG_DIR)  # what a reader that must start over gets
    assert [(e.offset, e.records[0].key) for e in fresh.poll()] == [(0, b"a"), (3, b"b")]
    log.close()


def test_a_tailer_that_did_not_read_the_refused_write_just_goes_on() -> None:
    fs = MemoryFileSystem()
    log = RecordLog.open(fs, LOG_DIR)
    tailer = LogTailer(fs, LOG_DIR)
    log.append([rec(1, "a", "1")], 0)
    log.flush()
    log.append([rec(1, "refused", "1")], 0)
    seen: list[LogEntry] = []
    _refuse_next_write_while(fs, 5, lambda: seen.extend(tailer.poll()))  # part of an entry: not returned
    with pytest.raises(WriteRefused):
        log.flush()
    assert [e.offset for e in seen] == [0]
    log.rewind()
    log.append([rec(1, "b", "2")], 0)
    log.flush()
    assert [(e.offset, e.records[0].key) for e in tailer.poll()] == [(2, b"b")]
    log.close()
