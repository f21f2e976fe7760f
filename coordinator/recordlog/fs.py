"""The filesystem the record log runs on: a small protocol and the real (os) implementation.

Everything the log does to disk goes through `FileSystem`, so tests can substitute
`MemoryFileSystem`, which models what survives a crash. The protocol is deliberately the
handful of calls the log needs, with their durability meaning spelled out:

- bytes written to an `AppendHandle` are durable only after `fsync()` on it;
- a created, renamed or removed directory entry is durable only after `fsync_dir()` on the
  directory that holds it;
- `rename` atomically replaces the destination;
- `lock` is an exclusive advisory lock (flock): held until released or the process dies.

Paths are plain strings; implementations must be safe to call from several threads (the
committer writes from an executor thread while compaction runs in another).
"""

from __future__ import annotations

import errno
import fcntl
import os
from collections.abc import Hashable
from typing import Protocol


class AppendHandle(Protocol):
    """A file opened for appending. One writer uses it from one thread at a time."""

    def write(self, data: bytes) -> None:
        """Append all of `data` (not durable until `fsync`)."""

    def fsync(self) -> None:
        """Make every byte written so far durable."""

    def size(self) -> int:
        """Current size of the file, including bytes other handles appended (fstat)."""

    def truncate(self, size: int) -> None:
        """Cut the file to `size` bytes (durable after `fsync`)."""

    def close(self) -> None: ...


class ReadHandle(Protocol):
    """A file opened for reading; reads see one file even if its path is renamed over."""

    @property
    def file_id(self) -> Hashable:
        """Identity of the underlying file (device, inode): changes when the path is replaced."""

    def read(self, position: int, size: int) -> bytes:
        """Up to `size` bytes from `position`; fewer (or none) at the end of the file."""

    def size(self) -> int: ...

    def close(self) -> None: ...


class LockHandle(Protocol):
    def release(self) -> None: ...


class FileSystem(Protocol):
    def open_append(self, path: str) -> AppendHandle:
        """Open `path` for appending, creating it if missing (the new entry needs fsync_dir)."""

    def open_read(self, path: str) -> ReadHandle:
        """Open an existing file; raises FileNotFoundError if there is none."""

    def list_dir(self, path: str) -> list[str]:
        """Names (not paths) in the directory, in no particular order."""

    def make_dirs(self, path: str) -> None:
        """Create the directory and its parents if missing."""

    def rename(self, src: str, dst: str) -> None:
        """Atomically move `src` to `dst`, replacing `dst` (durable after fsync_dir)."""

    def remove(self, path: str) -> None:
        """Remove a file (durable after fsync_dir)."""

    def fsync_dir(self, path: str) -> None:
        """Make the directory's entries (creates, renames, removes) durable."""

    def lock(self, path: str, *, blocking: bool) -> LockHandle | None:
        """Take an exclusive lock on `path` (created if missing).

        Non-blocking: None if another holder has it. Blocking: waits until it is free.
        """


class _OsAppendHandle:
    __slots__ = ("_fd",)

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        # os.write may write less than asked (signals, pipes, quotas); a short write that we
        # did not finish would look like a torn entry to the next reader.
        while view:
            written = os.write(self._fd, view)
            view = view[written:]

    def fsync(self) -> None:
        # fdatasync also flushes the size change an append makes; it skips mtime, which the
        # log does not need, and is measurably cheaper on ext4.
        os.fdatasync(self._fd)

    def size(self) -> int:
        return os.fstat(self._fd).st_size

    def truncate(self, size: int) -> None:
        os.ftruncate(self._fd, size)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class _OsReadHandle:
    __slots__ = ("_fd", "_file_id")

    def __init__(self, fd: int) -> None:
        self._fd = fd
        st = os.fstat(fd)
        self._file_id = (st.st_dev, st.st_ino)

    @property
    def file_id(self) -> Hashable:
        return self._file_id

    def read(self, position: int, size: int) -> bytes:
        return os.pread(self._fd, size, position)

    def size(self) -> int:
        return os.fstat(self._fd).st_size

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class _FlockHandle:
    __slots__ = ("_fd",)

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def release(self) -> None:
        if self._fd >= 0:
            # Closing the descriptor drops the flock; no explicit LOCK_UN needed.
            os.close(self._fd)
            self._fd = -1


class RealFileSystem:
    """`FileSystem` on the operating system's files (POSIX; flock for locks)."""

    def open_append(self, path: str) -> AppendHandle:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
        return _OsAppendHandle(fd)

    def open_read(self, path: str) -> ReadHandle:
        return _OsReadHandle(os.open(path, os.O_RDONLY | os.O_CLOEXEC))

    def list_dir(self, path: str) -> list[str]:
        return os.listdir(path)

    def make_dirs(self, path: str) -> None:
        os.makedirs(path, exist_ok=True)

    def rename(self, src: str, dst: str) -> None:
        os.replace(src, dst)

    def remove(self, path: str) -> None:
        os.remove(path)

    def fsync_dir(self, path: str) -> None:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def lock(self, path: str, *, blocking: bool) -> LockHandle | None:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if blocking else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if not blocking and exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                return None
            raise
        except BaseException:
            os.close(fd)
            raise
        return _FlockHandle(fd)
