"""The data directory lock: one active coordinator per data directory.

An exclusive `flock` on `<data dir>/coordinator.lock`. The kernel releases it when the holder
dies, however it dies, so a standby blocked on (or polling) the lock takes over exactly when the
active process is gone. The lock is the primary guard against two writers; the writer's epoch
check (`writer.py`) is the safety net for a writer that lost the lock without noticing.

Use `try_lock_data_dir` from an event loop (poll it between tail reads) and `lock_data_dir`
only from a thread that may block indefinitely.
"""

from __future__ import annotations

import os
from types import TracebackType

from coordinator.recordlog.fs import FileSystem, LockHandle

LOCK_FILE_NAME = "coordinator.lock"


class DataDirLock:
    """A held data directory lock. Release it, or use it as a context manager."""

    def __init__(self, directory: str, handle: LockHandle) -> None:
        self.directory = directory
        self._handle: LockHandle | None = handle

    @property
    def held(self) -> bool:
        return self._handle is not None

    def release(self) -> None:
        if self._handle is not None:
            self._handle.release()
            self._handle = None

    def __enter__(self) -> DataDirLock:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()


def try_lock_data_dir(fs: FileSystem, directory: str) -> DataDirLock | None:
    """Take the lock if it is free; None if another process (or handle) holds it."""
    fs.make_dirs(directory)
    handle = fs.lock(os.path.join(directory, LOCK_FILE_NAME), blocking=False)
    return None if handle is None else DataDirLock(directory, handle)


def lock_data_dir(fs: FileSystem, directory: str) -> DataDirLock:
    """Take the lock, waiting as long as another holder keeps it. Blocks the calling thread."""
    fs.make_dirs(directory)
    handle = fs.lock(os.path.join(directory, LOCK_FILE_NAME), blocking=True)
    assert handle is not None  # a blocking lock returns only once held
    return DataDirLock(directory, handle)
