"""A standby that replayed a write the owner's disk then refused starts over, so it never serves a
change no client was told about.

The owner's write is refused (ENOSPC) after the whole entry reached the file, and the owner's cut
waits until the standby has replayed that entry: the worst instant. The owner then writes another
entry (in a new segment, as the writer does after a cut); the standby finds the segment it read
shorter than where it stopped, replays the log again into a new core, and takes over with the
owner's real state.
"""

from __future__ import annotations

import asyncio
import errno
import threading
from pathlib import Path

import pytest

from coordinator.core.offsets import offset_commit_record
from coordinator.core.records import OffsetCommitValue, encode_record
from coordinator.core.shard import CoordinatorShard
from coordinator.recordlog import LogConfig, MemoryFileSystem, RecordLog, WriteRefused, encode_entry
from coordinator.recordlog.fs import AppendHandle
from coordinator.recordlog.lock import lock_data_dir
from coordinator.runtime import ownership
from tests.support.polling import eventually

DATA = Path("/data")
LOG = DATA / "log"


class _GatedCut:
    """An append handle whose `truncate` (the writer's cut) waits for the test's go-ahead."""

    def __init__(self, inner: AppendHandle, gate: threading.Event) -> None:
        self._inner = inner
        self._gate = gate

    def write(self, data: bytes) -> None:
        self._inner.write(data)

    def fsync(self) -> None:
        self._inner.fsync()

    def size(self) -> int:
        return self._inner.size()

    def truncate(self, size: int) -> None:
        assert self._gate.wait(10), "the standby never read the refused entry"
        self._inner.truncate(size)

    def close(self) -> None:
        self._inner.close()


class GatedFileSystem(MemoryFileSystem):
    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()

    def open_append(self, path: str) -> AppendHandle:
        return _GatedCut(super().open_append(path), self.gate)


def commit_entry(offset: int) -> list[tuple[int, bytes, bytes | None]]:
    return [encode_record(offset_commit_record("g", "t", 0, OffsetCommitValue(offset)))]


def committed(core: CoordinatorShard) -> int | None:
    value = core.offsets.get("g", "t", 0)
    return None if value is None else value.committed_offset


@pytest.mark.asyncio
async def test_a_standby_that_replayed_a_refused_write_replays_the_log_again() -> None:
    fs = GatedFileSystem()
    owner_lock = lock_data_dir(fs, str(DATA))
    owner = RecordLog.open(fs, str(LOG))
    owner.append(commit_entry(1), 0)
    owner.flush()

    cores: list[CoordinatorShard] = []

    def new_core() -> CoordinatorShard:
        cores.append(CoordinatorShard())
        return cores[-1]

    async def on_owner() -> None:
        pass

    standby = asyncio.create_task(ownership.acquire(fs, DATA, LOG, LogConfig(), new_core, on_owner))
    await eventually(lambda: cores and committed(cores[0]) == 1)

    owner.append(commit_entry(2), 0)
    frame = len(encode_entry(1, owner.writer_epoch, 0, commit_entry(2)))
    fs.fail_next("write", partial_bytes=frame, error=OSError(errno.ENOSPC, "No space left on device"))
    refused = asyncio.ensure_future(asyncio.to_thread(owner.flush))
    await eventually(lambda: committed(cores[0]) == 2)  # it replayed what is about to be cut off
    fs.gate.set()
    with pytest.raises(WriteRefused):
        await refused
    owner.rewind()
    owner.append(commit_entry(3), 0)
    await asyncio.to_thread(owner.flush)

    await eventually(lambda: len(cores) == 2 and committed(cores[1]) == 3, message="a second replay")
    owner.close()
    owner_lock.release()
    lock, log, loaded = await asyncio.wait_for(standby, 10)
    try:
        assert loaded.core is cores[-1] and committed(loaded.core) == 3
        assert log.next_offset == 3  # entry 0, the unused 1 (refused), entry 2 (written after the cut)
    finally:
        log.close()
        lock.release()
