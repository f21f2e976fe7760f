"""MemoryFileSystem models crashes honestly; RealFileSystem behaves the same on the basics."""

from __future__ import annotations

import errno
import threading
from pathlib import Path

import pytest

from coordinator.recordlog import FileSystem, MemoryFileSystem, RealFileSystem
from coordinator.recordlog.memfs import StaleHandle


def test_crash_drops_unsynced_bytes() -> None:
    fs = MemoryFileSystem()
    fs.make_dirs("/d")
    handle = fs.open_append("/d/f")
    fs.fsync_dir("/d")
    handle.write(b"abc")
    handle.fsync()
    handle.write(b"def")
    assert fs.content("/d/f") == b"abcdef"
    fs.crash()
    assert fs.content("/d/f") == b"abc"


def test_crash_can_keep_a_prefix_of_unsynced_bytes() -> None:
    fs = MemoryFileSystem()
    fs.make_dirs("/d")
    handle = fs.open_append("/d/f")
    fs.fsync_dir("/d")
    handle.write(b"abc")
    handle.fsync()
    handle.write(b"defgh")
    fs.crash(keep_unsynced_bytes=2)
    assert fs.content("/d/f") == b"abcde"


def test_file_created_without_dir_fsync_vanishes() -> None:
    fs = MemoryFileSystem()
    fs.make_dirs("/d")
    handle = fs.open_append("/d/f")
    handle.write(b"x")
    handle.fsync()  # data durable, directory entry not
    fs.crash()
    assert fs.list_dir("/d") == []


def test_unsynced_rename_and_remove_are_undone() -> None:
    fs = MemoryFileSystem()
    fs.write_file("/d/a", b"old")
    fs.write_file("/d/tmp", b"new")
    fs.rename("/d/tmp", "/d/a")
    fs.write_file("/d/b", b"b")
    fs.remove("/d/b")
    assert fs.content("/d/a") == b"new"
    fs.crash()
    assert fs.content("/d/a") == b"old"
    assert sorted(fs.list_dir("/d")) == ["a", "b", "tmp"]


def test_synced_rename_survives() -> None:
    fs = MemoryFileSystem()
    fs.write_file("/d/a", b"old")
    fs.write_file("/d/tmp", b"new")
    fs.rename("/d/tmp", "/d/a")
    fs.fsync_dir("/d")
    fs.crash()
    assert fs.content("/d/a") == b"new"
    assert fs.list_dir("/d") == ["a"]


def test_handles_from_before_a_crash_are_dead() -> None:
    fs = MemoryFileSystem()
    fs.make_dirs("/d")
    handle = fs.open_append("/d/f")
    fs.crash()
    with pytest.raises(StaleHandle):
        handle.write(b"x")


def test_injected_failures() -> None:
    fs = MemoryFileSystem()
    fs.make_dirs("/d")
    handle = fs.open_append("/d/f")
    fs.fail_next("fsync")
    handle.write(b"abc")
    with pytest.raises(OSError) as info:
        handle.fsync()
    assert info.value.errno == errno.EIO
    handle.fsync()  # only the next one fails
    fs.fail_next("write", partial_bytes=2, error=OSError(errno.ENOSPC, "full"))
    with pytest.raises(OSError):
        handle.write(b"xyz")
    assert fs.content("/d/f") == b"abcxy"


def test_truncate_is_durable_only_after_fsync() -> None:
    fs = MemoryFileSystem()
    fs.write_file("/d/f", b"abcdef")
    handle = fs.open_append("/d/f")
    handle.truncate(2)
    assert fs.content("/d/f") == b"ab"
    fs.crash()
    assert fs.content("/d/f") == b"abcdef"


def test_memory_lock_excludes_and_blocks_until_released() -> None:
    fs = MemoryFileSystem()
    fs.make_dirs("/d")
    first = fs.lock("/d/L", blocking=False)
    assert first is not None
    assert fs.lock("/d/L", blocking=False) is None
    acquired = threading.Event()

    def waiter() -> None:
        handle = fs.lock("/d/L", blocking=True)
        assert handle is not None
        acquired.set()
        handle.release()

    thread = threading.Thread(target=waiter)
    thread.start()
    assert not acquired.is_set()
    first.release()
    thread.join(timeout=10)
    assert acquired.is_set()


def test_crash_releases_locks() -> None:
    fs = MemoryFileSystem()
    fs.make_dirs("/d")
    assert fs.lock("/d/L", blocking=False) is not None
    fs.crash()
    assert fs.lock("/d/L", blocking=False) is not None


@pytest.fixture(params=["memory", "real"])
def any_fs(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[FileSystem, str]:
    if request.param == "memory":
        return MemoryFileSystem(), "/data"
    return RealFileSystem(), str(tmp_path / "data")


def test_basic_operations_agree(any_fs: tuple[FileSystem, str]) -> None:
    fs, root = any_fs
    fs.make_dirs(root)
    handle = fs.open_append(f"{root}/a")
    handle.write(b"hello ")
    handle.write(b"world")
    handle.fsync()
    assert handle.size() == 11
    handle.truncate(5)
    assert handle.size() == 5
    handle.close()
    fs.fsync_dir(root)
    reader = fs.open_read(f"{root}/a")
    assert reader.read(1, 100) == b"ello"
    assert reader.read(5, 10) == b""
    first_id = reader.file_id
    reader.close()
    other = fs.open_append(f"{root}/b")
    other.close()
    fs.rename(f"{root}/b", f"{root}/a")
    reader = fs.open_read(f"{root}/a")
    assert reader.file_id != first_id  # replaced: a tailer must notice
    assert reader.size() == 0
    reader.close()
    assert sorted(fs.list_dir(root)) == ["a"]
    fs.remove(f"{root}/a")
    with pytest.raises(FileNotFoundError):
        fs.open_read(f"{root}/a")


def test_real_flock_is_exclusive_between_handles(tmp_path: Path) -> None:
    fs = RealFileSystem()
    first = fs.lock(str(tmp_path / "L"), blocking=False)
    assert first is not None
    assert fs.lock(str(tmp_path / "L"), blocking=False) is None
    first.release()
    second = fs.lock(str(tmp_path / "L"), blocking=True)
    assert second is not None
    second.release()
