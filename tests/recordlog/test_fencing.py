"""Fencing: the data directory lock, and the writer-epoch safety net behind it."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from coordinator.recordlog import (
    FencedWriter,
    LogConfig,
    LogEntry,
    LogFailed,
    LogTailer,
    MemoryFileSystem,
    RealFileSystem,
    RecordLog,
    encode_entry,
    lock_data_dir,
    try_lock_data_dir,
)
from coordinator.recordlog.segments import list_segments, segment_path
from tests.recordlog.support import LOG_DIR, read_all, rec

EPOCH_RECORD = 100  # stands in for the core's CoordinatorEpoch record type


def files(fs: MemoryFileSystem) -> dict[str, bytes]:
    return {name: fs.content(f"{LOG_DIR}/{name}") for name in fs.list_dir(LOG_DIR)}


@pytest.mark.parametrize("b_rolls", [False, True], ids=["same-segment", "b-rolls"])
def test_stalled_writer_is_fenced_and_writes_nothing(b_rolls: bool) -> None:
    fs = MemoryFileSystem()
    a = RecordLog.open(fs, LOG_DIR, writer_epoch=1)
    a.append([rec(1, "g", "from A")], 0)
    a.flush()
    a.append([rec(1, "g", "A after stall")], 0)  # A stalls before flushing this

    config = LogConfig(segment_bytes=1 if b_rolls else 10**6)
    b = RecordLog.open(fs, LOG_DIR, config=config)
    assert b.writer_epoch == 2
    b.append([rec(EPOCH_RECORD, "", "2")], 0)
    b.flush()
    assert len(list_segments(fs, LOG_DIR)) == (2 if b_rolls else 1)
    before = files(fs)

    with pytest.raises(FencedWriter):
        a.flush()
    assert files(fs) == before  # A wrote nothing
    with pytest.raises(LogFailed):
        a.append([rec(1, "g", "more")], 0)
    a.close()

    b.append([rec(1, "g", "from B")], 0)
    b.close()
    assert [(e.offset, e.writer_epoch, e.records[0].value) for e in read_all(fs)] == [
        (0, 1, b"from A"),
        (1, 2, b"2"),
        (2, 2, b"from B"),
    ]


def test_open_refuses_an_epoch_lower_than_the_log() -> None:
    fs = MemoryFileSystem()
    log = RecordLog.open(fs, LOG_DIR, writer_epoch=5)
    log.append([rec(1, "k", "v")], 0)
    log.close()
    with pytest.raises(FencedWriter, match="epoch 5"):
        RecordLog.open(fs, LOG_DIR, writer_epoch=4)
    # the same epoch is allowed (a restarted coordinator that kept its epoch) and so is higher
    RecordLog.open(fs, LOG_DIR, writer_epoch=5).close()
    assert RecordLog.open(fs, LOG_DIR).writer_epoch == 6


def test_entries_of_a_zombie_writer_are_skipped_on_replay() -> None:
    # The race the size check cannot close: A checks, B appends, A writes. A's entry then sits
    # after B's with a lower epoch, and readers must ignore it.
    fs = MemoryFileSystem()
    a = RecordLog.open(fs, LOG_DIR, writer_epoch=1)
    a.append([rec(1, "g", "A-0")], 0)
    a.close()
    b = RecordLog.open(fs, LOG_DIR, writer_epoch=2)
    b.append([rec(1, "g", "B-1")], 0)
    b.flush()
    handle = fs.open_append(segment_path(LOG_DIR, 0))
    handle.write(encode_entry(1, 1, 0, [rec(1, "g", "zombie, same offset")]))
    handle.write(encode_entry(2, 1, 0, [rec(1, "g", "zombie, new offset")]))
    handle.close()
    b.close()  # b was not asked to write again, so it is not fenced itself

    replayed: list[LogEntry] = []
    log = RecordLog.open(fs, LOG_DIR, replay=replayed.append)
    assert [e.records[0].value for e in replayed] == [b"A-0", b"B-1"]
    assert log.recovery.duplicates_skipped == 1
    assert log.recovery.fenced_skipped == 1
    # the zombie's offset is not reused
    assert log.append([rec(1, "g", "C")], 0) == 3
    log.close()

    tailed = LogTailer(fs, LOG_DIR).poll()
    assert [e.records[0].value for e in tailed] == [b"A-0", b"B-1", b"C"]


def test_try_lock_is_exclusive_until_released() -> None:
    fs = MemoryFileSystem()
    first = try_lock_data_dir(fs, "/data")
    assert first is not None and first.held
    assert try_lock_data_dir(fs, "/data") is None
    first.release()
    assert not first.held
    second = try_lock_data_dir(fs, "/data")
    assert second is not None
    with second:  # released on exit
        assert try_lock_data_dir(fs, "/data") is None
    assert try_lock_data_dir(fs, "/data") is not None


def test_blocking_lock_waits_for_the_holder_on_a_real_filesystem(tmp_path: Path) -> None:
    fs = RealFileSystem()
    holder = try_lock_data_dir(fs, str(tmp_path))
    assert holder is not None
    acquired = threading.Event()

    def standby() -> None:
        with lock_data_dir(fs, str(tmp_path)):
            acquired.set()

    thread = threading.Thread(target=standby)
    thread.start()
    assert not acquired.is_set()
    assert try_lock_data_dir(fs, str(tmp_path)) is None  # still held by `holder`
    holder.release()
    thread.join(timeout=30)
    assert acquired.is_set()
