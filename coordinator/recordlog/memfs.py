"""An in-memory `FileSystem` that models what a crash keeps, and can inject failures.

Model (simple, but honest about the two things a log gets wrong most often):

- Each file (inode) has `data`, what reads see now, and `durable`, its content as of the last
  `fsync`. `crash()` resets every file to `durable` (optionally keeping a prefix of the
  unsynced appended bytes, as a real disk might have written back some of them).
- The namespace (path -> inode) also has a current and a durable version per directory.
  Creating, renaming and removing change the current one; `fsync_dir(d)` copies the current
  entries of `d` into the durable one. `crash()` restores the durable namespace: a file created
  without a directory fsync disappears, an unsynced rename or remove is undone.
- Directories themselves are durable as soon as they are made (a simplification: the log
  creates its directory once, before anything else).
- Locks are released by `crash()` (the process that held them is gone).

Handles opened before a crash raise `StaleHandle` afterwards, so a test cannot keep using the
"dead" process's file descriptors by accident.

Failure injection: `fail_next(op, ...)` makes the next matching operation raise OSError (for
`write`, optionally after writing a prefix), and `hook(op, path)` is called before every
operation, so a test can stop a workload at the N-th mutating operation and then `crash()`.
Operation names: open_append, open_read, write, fsync, truncate, read, list_dir, rename,
remove, fsync_dir, lock.
"""

from __future__ import annotations

import errno
import itertools
import os
import threading
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

from coordinator.recordlog.fs import AppendHandle, LockHandle, ReadHandle

MUTATING_OPS = frozenset(
    {"open_append", "write", "fsync", "truncate", "rename", "remove", "fsync_dir"}
)


class StaleHandle(RuntimeError):
    """A handle from before `crash()` was used: the process that owned it no longer exists."""


@dataclass(eq=False)  # identity semantics: two files with equal bytes are different files
class _Inode:
    ident: int
    data: bytearray = field(default_factory=bytearray)
    durable: bytes = b""


@dataclass
class _Fault:
    op: str
    path_contains: str
    error: OSError
    remaining: int
    partial_bytes: int


class MemoryFileSystem:
    """`FileSystem` in memory with crash and failure simulation. Thread-safe."""

    def __init__(self) -> None:
        self._mutex = threading.RLock()
        self._lock_released = threading.Condition(self._mutex)
        self._ids = itertools.count(1)
        self._dirs: set[str] = {"/"}
        self._names: dict[str, _Inode] = {}
        self._durable_names: dict[str, _Inode] = {}
        self._locks: dict[str, object] = {}
        self._generation = 0
        self._faults: list[_Fault] = []
        self.hook: Callable[[str, str], None] | None = None
        self.op_counts: dict[str, int] = {}

    # -- test controls -----------------------------------------------------------------------

    def crash(self, keep_unsynced_bytes: int = 0) -> None:
        """Simulate power loss: keep only durable bytes and durable directory entries.

        `keep_unsynced_bytes`: for each file whose current content extends its durable content,
        also keep up to that many of the appended-but-unsynced bytes (partial write-back).
        """
        with self._mutex:
            self._generation += 1
            self._names = dict(self._durable_names)
            for inode in set(self._names.values()):
                current = bytes(inode.data)
                kept = inode.durable
                if keep_unsynced_bytes and current.startswith(inode.durable):
                    kept = current[: len(inode.durable) + keep_unsynced_bytes]
                inode.data = bytearray(kept)
                inode.durable = kept
            self._locks.clear()
            self._lock_released.notify_all()

    def fail_next(
        self,
        op: str,
        *,
        path_contains: str = "",
        error: OSError | None = None,
        count: int = 1,
        partial_bytes: int = 0,
    ) -> None:
        """Make the next `count` operations `op` on a path containing `path_contains` raise.

        For `write`, `partial_bytes` of the data are appended before the error (a short write).
        """
        if error is None:
            error = OSError(errno.EIO, f"injected {op} failure")
        with self._mutex:
            self._faults.append(_Fault(op, path_contains, error, count, partial_bytes))

    def durable_content(self, path: str) -> bytes | None:
        """What `path` would hold after a crash now (None: it would not exist)."""
        with self._mutex:
            inode = self._durable_names.get(_norm(path))
            return None if inode is None else inode.durable

    def content(self, path: str) -> bytes:
        with self._mutex:
            return bytes(self._inode(_norm(path)).data)

    def write_file(self, path: str, data: bytes, *, durable: bool = True) -> None:
        """Create or replace a file directly (test set-up; e.g. planting corrupt bytes)."""
        path = _norm(path)
        with self._mutex:
            self.make_dirs(os.path.dirname(path))
            inode = _Inode(next(self._ids), bytearray(data), data if durable else b"")
            self._names[path] = inode
            if durable:
                self._durable_names[path] = inode

    # -- FileSystem --------------------------------------------------------------------------

    def open_append(self, path: str) -> AppendHandle:
        path = _norm(path)
        with self._mutex:
            self._before("open_append", path)
            self._require_dir(os.path.dirname(path))
            inode = self._names.get(path)
            if inode is None:
                inode = _Inode(next(self._ids))
                self._names[path] = inode
            return _MemAppendHandle(self, path, inode, self._generation)

    def open_read(self, path: str) -> ReadHandle:
        path = _norm(path)
        with self._mutex:
            self._before("open_read", path)
            return _MemReadHandle(self, path, self._inode(path), self._generation)

    def list_dir(self, path: str) -> list[str]:
        path = _norm(path)
        with self._mutex:
            self._before("list_dir", path)
            self._require_dir(path)
            names = [os.path.basename(p) for p in self._names if os.path.dirname(p) == path]
            names += [
                os.path.basename(d) for d in self._dirs if d != path and os.path.dirname(d) == path
            ]
            return names

    def make_dirs(self, path: str) -> None:
        path = _norm(path)
        with self._mutex:
            while path not in self._dirs:
                if path in self._names:
                    raise FileExistsError(errno.EEXIST, "file exists", path)
                self._dirs.add(path)
                path = os.path.dirname(path)

    def rename(self, src: str, dst: str) -> None:
        src, dst = _norm(src), _norm(dst)
        with self._mutex:
            self._before("rename", src)
            inode = self._inode(src)
            self._require_dir(os.path.dirname(dst))
            del self._names[src]
            self._names[dst] = inode

    def remove(self, path: str) -> None:
        path = _norm(path)
        with self._mutex:
            self._before("remove", path)
            self._inode(path)
            del self._names[path]

    def fsync_dir(self, path: str) -> None:
        path = _norm(path)
        with self._mutex:
            self._before("fsync_dir", path)
            self._require_dir(path)
            for p in [p for p in self._durable_names if os.path.dirname(p) == path]:
                del self._durable_names[p]
            for p, inode in self._names.items():
                if os.path.dirname(p) == path:
                    self._durable_names[p] = inode

    def lock(self, path: str, *, blocking: bool) -> LockHandle | None:
        path = _norm(path)
        with self._mutex:
            self._before("lock", path)
            if path not in self._names:
                # Like O_CREAT on a real lock file: the file exists from now on.
                self._require_dir(os.path.dirname(path))
                self._names[path] = _Inode(next(self._ids))
            while path in self._locks:
                if not blocking:
                    return None
                self._lock_released.wait()
            handle = _MemLockHandle(self, path, self._generation)
            self._locks[path] = handle
            return handle

    # -- internals used by the handles -------------------------------------------------------

    def _before(self, op: str, path: str) -> _Fault | None:
        """Count the op, run the hook, raise an injected fault.

        A `write` fault with `partial_bytes` is returned instead, for the handle to apply.
        """
        self.op_counts[op] = self.op_counts.get(op, 0) + 1
        if self.hook is not None:
            self.hook(op, path)
        for fault in self._faults:
            if fault.op == op and fault.path_contains in path and fault.remaining > 0:
                fault.remaining -= 1
                if op == "write" and fault.partial_bytes:
                    return fault
                raise fault.error
        return None

    def _check_generation(self, generation: int) -> None:
        if generation != self._generation:
            raise StaleHandle("handle used after crash()")

    def _inode(self, path: str) -> _Inode:
        inode = self._names.get(path)
        if inode is None:
            raise FileNotFoundError(errno.ENOENT, "no such file", path)
        return inode

    def _require_dir(self, path: str) -> None:
        if path not in self._dirs:
            raise FileNotFoundError(errno.ENOENT, "no such directory", path)

    def _release_lock(self, path: str, handle: object) -> None:
        with self._mutex:
            if self._locks.get(path) is handle:
                del self._locks[path]
                self._lock_released.notify_all()


class _MemAppendHandle:
    def __init__(self, fs: MemoryFileSystem, path: str, inode: _Inode, generation: int) -> None:
        self._fs = fs
        self._path = path
        self._inode = inode
        self._generation = generation
        self._closed = False

    def _live(self) -> None:
        if self._closed:
            raise ValueError("I/O on closed handle")
        self._fs._check_generation(self._generation)

    def write(self, data: bytes) -> None:
        with self._fs._mutex:
            self._live()
            fault = self._fs._before("write", self._path)
            if fault is not None:
                self._inode.data += data[: fault.partial_bytes]
                raise fault.error
            self._inode.data += data

    def fsync(self) -> None:
        with self._fs._mutex:
            self._live()
            self._fs._before("fsync", self._path)
            self._inode.durable = bytes(self._inode.data)

    def size(self) -> int:
        with self._fs._mutex:
            self._live()
            return len(self._inode.data)

    def truncate(self, size: int) -> None:
        with self._fs._mutex:
            self._live()
            self._fs._before("truncate", self._path)
            del self._inode.data[size:]

    def close(self) -> None:
        self._closed = True


class _MemReadHandle:
    def __init__(self, fs: MemoryFileSystem, path: str, inode: _Inode, generation: int) -> None:
        self._fs = fs
        self._path = path
        self._inode = inode
        self._generation = generation

    @property
    def file_id(self) -> Hashable:
        return self._inode.ident

    def read(self, position: int, size: int) -> bytes:
        with self._fs._mutex:
            self._fs._check_generation(self._generation)
            self._fs._before("read", self._path)
            return bytes(self._inode.data[position : position + size])

    def size(self) -> int:
        with self._fs._mutex:
            self._fs._check_generation(self._generation)
            return len(self._inode.data)

    def close(self) -> None:
        pass


class _MemLockHandle:
    def __init__(self, fs: MemoryFileSystem, path: str, generation: int) -> None:
        self._fs = fs
        self._path = path
        self._generation = generation

    def release(self) -> None:
        self._fs._release_lock(self._path, self)


def _norm(path: str) -> str:
    return os.path.normpath(os.path.join("/", path))
