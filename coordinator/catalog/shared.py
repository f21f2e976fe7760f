"""One catalog file rewritten by several processes (the shards of one data directory): the writers'
lock, and whether the file changed since this process last looked.

- The lock: `fcntl.flock` (exclusive) on `<file>.lock` while a writer re-reads the file, changes
  it and renames the new version into place.
- The change counter: the lock file's first 8 bytes, memory-mapped (shared) by every process. A
  writer adds one after its rename, still under the lock and before it answers anyone. A reader
  compares the counter with the value it saw last, which is a memory read and no system call, and
  only when it moved stats the file and reads it again. A client told "created" by one node that
  then asks another node is therefore answered from the new file: its request arrives after the
  counter moved.
- The signature (inode, size, mtime and ctime in ns) of the file as last read or written: `look()`
  compares it too, and the catalog's periodic watch calls `look()` whatever the counter says, so a
  change that did not move the counter (a writer killed between its rename and its count; an
  operator's edit) is still found within the watch interval.
"""

from __future__ import annotations

import contextlib
import fcntl
import mmap
import os
from collections.abc import Iterator
from pathlib import Path

Signature = tuple[int, int, int, int]
COUNTER_BYTES = 8


class SharedFile:
    def __init__(self, path: Path) -> None:
        self._file = str(path)
        self._lock_file = self._file + ".lock"
        self._counter: memoryview | None = None
        self._generation = -1
        """The counter when this process last looked."""
        self.seen: Signature | None = None
        """The file's signature when this process last read or wrote it (set by the catalog)."""

    def moved(self) -> bool:
        """Whether another process may have changed the file since `look()` (a memory read; always
        True until the counter could be opened)."""
        counter = self._counter
        return counter is None or counter[0] != self._generation

    def look(self) -> bool:
        """Take note of the counter, then say whether the file differs from the one last seen."""
        counter = self._counter if self._counter is not None else self._open_counter()
        if counter is not None:
            self._generation = counter[0]
        return self.signature() != self.seen

    def wrote(self) -> None:
        """This process renamed a new version into place (holding the lock): count it."""
        counter = self._counter if self._counter is not None else self._open_counter()
        if counter is not None:
            counter[0] = self._generation = counter[0] + 1
        self.seen = self.signature()

    def signature(self) -> Signature | None:
        try:
            st = os.stat(self._file)
        except FileNotFoundError:
            return None
        return st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        fd = os.open(self._lock_file, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # releases the lock

    def _open_counter(self) -> memoryview | None:
        try:
            fd = os.open(self._lock_file, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError:
            return None  # no directory yet: every read stats the file until there is one
        try:
            if os.fstat(fd).st_size < COUNTER_BYTES:
                os.ftruncate(fd, COUNTER_BYTES)  # zeros; a second process doing the same changes nothing
            mapped = mmap.mmap(fd, COUNTER_BYTES)
        finally:
            os.close(fd)
        self._counter = memoryview(mapped).cast("Q")
        return self._counter
