"""GroupCommitter: futures resolve only once durable, one fsync per batch, fail-stop."""

from __future__ import annotations

import asyncio
import errno
import threading

import pytest

from coordinator.recordlog import (
    FencedWriter,
    FlushPolicy,
    GroupCommitter,
    LogConfig,
    LogFailed,
    MemoryFileSystem,
    RecordLog,
    WriteRefused,
)
from coordinator.recordlog.format import decode_frames
from coordinator.recordlog.segments import segment_path
from tests.recordlog.support import LOG_DIR, read_all, rec


def durable_offsets(fs: MemoryFileSystem) -> list[int]:
    content = fs.durable_content(segment_path(LOG_DIR, 0)) or b""
    return [entry.offset for _, entry in decode_frames(content).entries]


class Fatal:
    def __init__(self) -> None:
        self.errors: list[BaseException] = []

    def __call__(self, exc: BaseException) -> None:
        self.errors.append(exc)


@pytest.mark.asyncio
async def test_each_future_resolves_after_its_entry_is_durable() -> None:
    fs = MemoryFileSystem()
    fatal = Fatal()
    committer = GroupCommitter(RecordLog.open(fs, LOG_DIR), on_fatal=fatal)
    committer.start()
    futures = [committer.append([rec(1, f"k{i}", "v")], 0) for i in range(5)]
    for i, future in enumerate(futures):
        assert await future == i
        assert i in durable_offsets(fs)  # durable at the moment the reply may be released
    await committer.close()
    assert fatal.errors == []


@pytest.mark.asyncio
async def test_entries_appended_together_share_one_write_and_one_fsync() -> None:
    fs = MemoryFileSystem()
    committer = GroupCommitter(RecordLog.open(fs, LOG_DIR), on_fatal=Fatal())
    committer.start()
    writes, fsyncs = fs.op_counts.get("write", 0), fs.op_counts.get("fsync", 0)
    futures = [committer.append([rec(1, f"k{i}", "v")], 0) for i in range(100)]
    assert await asyncio.gather(*futures) == list(range(100))
    assert fs.op_counts["write"] - writes == 1
    assert fs.op_counts["fsync"] - fsyncs == 1
    assert committer.batches_written == 1
    await committer.close()


@pytest.mark.asyncio
async def test_appends_during_a_write_form_the_next_batch() -> None:
    fs = MemoryFileSystem()
    committer = GroupCommitter(RecordLog.open(fs, LOG_DIR), on_fatal=Fatal())
    committer.start()
    in_write = threading.Event()
    release = threading.Event()

    def hook(op: str, path: str) -> None:
        if op == "write" and not release.is_set():
            in_write.set()
            release.wait()

    fs.hook = hook
    first = committer.append([rec(1, "a", "v")], 0)
    await asyncio.get_running_loop().run_in_executor(None, in_write.wait)
    # the first batch is blocked in the worker thread; the event loop is not
    later = [committer.append([rec(1, f"b{i}", "v")], 0) for i in range(10)]
    assert not first.done()
    release.set()
    assert await first == 0
    assert await asyncio.gather(*later) == list(range(1, 11))
    assert committer.batches_written == 2
    fs.hook = None
    await committer.close()


@pytest.mark.asyncio
async def test_barrier_waits_for_earlier_entries() -> None:
    fs = MemoryFileSystem()
    committer = GroupCommitter(RecordLog.open(fs, LOG_DIR), on_fatal=Fatal())
    done = committer.barrier()
    assert done.done() and done.result() == -1  # nothing outstanding
    committer.append([rec(1, "a", "v")], 0)
    barrier = committer.barrier()
    assert not barrier.done()
    committer.start()
    assert await barrier == 0  # the offset of the last entry it waited for
    assert durable_offsets(fs) == [0]
    await committer.close()


@pytest.mark.asyncio
async def test_failed_fsync_calls_on_fatal_and_fails_waiters() -> None:
    fs = MemoryFileSystem()
    fatal = Fatal()
    committer = GroupCommitter(RecordLog.open(fs, LOG_DIR), on_fatal=fatal)
    committer.start()
    fs.fail_next("fsync")
    futures = [committer.append([rec(1, f"k{i}", "v")], 0) for i in range(3)]
    for future in futures:
        with pytest.raises(LogFailed):
            await future
    assert len(fatal.errors) == 1 and isinstance(fatal.errors[0], OSError)
    with pytest.raises(LogFailed):
        committer.append([rec(1, "later", "v")], 0)
    await committer.close()
    assert durable_offsets(fs) == []  # nothing was acknowledged, nothing is durable


@pytest.mark.asyncio
@pytest.mark.parametrize("partial", [0, 40])
async def test_a_refused_write_is_cut_back_and_drops_every_later_entry_without_being_fatal(partial: int) -> None:
    fs = MemoryFileSystem()
    fatal = Fatal()
    refused: list[WriteRefused] = []
    committer = GroupCommitter(RecordLog.open(fs, LOG_DIR), on_fatal=fatal)
    committer.on_refused = refused.append
    committer.start()
    assert await committer.append([rec(1, "kept", "v")], 0) == 0
    fs.fail_next("write", partial_bytes=partial, error=OSError(errno.ENOSPC, "No space left on device"))
    dropped = [committer.append([rec(1, f"k{i}", "v")], 0) for i in range(3)]
    for future in dropped:
        with pytest.raises(WriteRefused):
            await future
    assert [e.first_offset for e in refused] == [1] and fatal.errors == []
    assert isinstance(refused[0].__cause__, OSError) and refused[0].__cause__.errno == errno.ENOSPC
    # The refused entries' offsets stay unused (a reader may have seen them): a gap, durable as
    # it is (it holds nothing), and the next entry comes after it.
    assert committer.durable_end == 4
    assert await committer.append([rec(1, "after", "v")], 0) == 4
    assert committer.durable_end == 5
    await committer.close()
    assert [(e.offset, [r.key for r in e.records]) for e in read_all(fs)] == [(0, [b"kept"]), (4, [b"after"])]
    assert not fatal.errors


@pytest.mark.asyncio
async def test_a_refused_write_whose_cut_fails_is_fatal() -> None:
    fs = MemoryFileSystem()
    fatal = Fatal()
    committer = GroupCommitter(RecordLog.open(fs, LOG_DIR), on_fatal=fatal)
    committer.start()
    fs.fail_next("write", partial_bytes=5, error=OSError(errno.ENOSPC, "No space left on device"))
    fs.fail_next("truncate")
    with pytest.raises(LogFailed):
        await committer.append([rec(1, "a", "v")], 0)
    assert len(fatal.errors) == 1
    await committer.close()


@pytest.mark.asyncio
async def test_fenced_writer_is_fatal() -> None:
    fs = MemoryFileSystem()
    fatal = Fatal()
    committer = GroupCommitter(RecordLog.open(fs, LOG_DIR), on_fatal=fatal)
    committer.start()
    other = RecordLog.open(fs, LOG_DIR)
    other.append([rec(1, "b", "v")], 0)
    other.close()
    with pytest.raises(LogFailed):
        await committer.append([rec(1, "a", "v")], 0)
    assert [type(e) for e in fatal.errors] == [FencedWriter]
    await committer.close()


@pytest.mark.asyncio
async def test_interval_policy_releases_entries_at_the_deferred_fsync() -> None:
    fs = MemoryFileSystem()
    config = LogConfig(flush_policy=FlushPolicy.INTERVAL, flush_interval_ms=20)
    committer = GroupCommitter(RecordLog.open(fs, LOG_DIR, config=config), on_fatal=Fatal())
    committer.start()
    assert await committer.append([rec(1, "a", "v")], 0) == 0  # first sync is due at once
    futures = [committer.append([rec(1, f"b{i}", "v")], 0) for i in range(3)]
    assert await asyncio.gather(*futures) == [1, 2, 3]
    assert durable_offsets(fs) == [0, 1, 2, 3]
    await committer.close()


@pytest.mark.asyncio
async def test_close_makes_everything_durable() -> None:
    fs = MemoryFileSystem()
    config = LogConfig(flush_policy=FlushPolicy.INTERVAL, flush_interval_ms=60_000)
    committer = GroupCommitter(RecordLog.open(fs, LOG_DIR, config=config), on_fatal=Fatal())
    committer.start()
    await committer.append([rec(1, "a", "v")], 0)
    pending = committer.append([rec(1, "b", "v")], 0)  # would wait a minute for its fsync
    await committer.close()
    assert pending.done() and pending.result() == 1
    fs.crash()
    assert [e.offset for e in read_all(fs)] == [0, 1]


@pytest.mark.asyncio
async def test_entries_appended_within_the_linger_share_one_write_and_one_fsync() -> None:
    fs = MemoryFileSystem()
    committer = GroupCommitter(RecordLog.open(fs, LOG_DIR), on_fatal=Fatal(), linger_ms=200)
    committer.start()
    writes, fsyncs = fs.op_counts.get("write", 0), fs.op_counts.get("fsync", 0)
    futures = []
    for i in range(20):  # appended over many loop turns, as requests arrive one by one
        futures.append(committer.append([rec(1, f"k{i}", "v")], 0))
        await asyncio.sleep(0)
    assert not any(future.done() for future in futures)  # lingering: nothing written yet
    assert await asyncio.gather(*futures) == list(range(20))
    assert fs.op_counts["write"] - writes == 1
    assert fs.op_counts["fsync"] - fsyncs == 1
    await committer.close()


@pytest.mark.asyncio
async def test_without_linger_an_entry_appended_on_a_later_turn_gets_its_own_write() -> None:
    fs = MemoryFileSystem()
    committer = GroupCommitter(RecordLog.open(fs, LOG_DIR), on_fatal=Fatal(), linger_ms=-1)
    committer.start()
    writes = fs.op_counts.get("write", 0)
    assert await committer.append([rec(1, "a", "v")], 0) == 0
    assert await committer.append([rec(1, "b", "v")], 0) == 1
    assert fs.op_counts["write"] - writes == 2
    await committer.close()


@pytest.mark.asyncio
async def test_a_full_batch_is_written_without_waiting_out_the_linger() -> None:
    fs = MemoryFileSystem()
    committer = GroupCommitter(RecordLog.open(fs, LOG_DIR), on_fatal=Fatal(), linger_ms=600_000)
    committer.start()
    value = "v" * 64 * 1024
    futures = [committer.append([rec(1, f"k{i}", value)], 0) for i in range(20)]  # > 1 MiB
    assert await asyncio.wait_for(asyncio.gather(*futures), timeout=30) == list(range(20))
    await committer.close()


@pytest.mark.asyncio
async def test_close_writes_a_lingering_entry_at_once() -> None:
    fs = MemoryFileSystem()
    committer = GroupCommitter(RecordLog.open(fs, LOG_DIR), on_fatal=Fatal(), linger_ms=600_000)
    committer.start()
    future = committer.append([rec(1, "k", "v")], 0)
    await asyncio.sleep(0)  # the committer task is lingering now
    await asyncio.wait_for(committer.close(), timeout=30)
    assert await future == 0
    assert durable_offsets(fs) == [0]


@pytest.mark.asyncio
async def test_the_linger_is_the_logs_append_linger_setting_whose_default_is_kafkas_adaptive_one() -> None:
    assert LogConfig().append_linger_ms == -1  # Kafka's adaptive group.coordinator.append.linger.ms
    with pytest.raises(ValueError):
        LogConfig(append_linger_ms=-2)
    fs = MemoryFileSystem()
    log = RecordLog.open(fs, LOG_DIR, config=LogConfig(append_linger_ms=600_000))
    committer = GroupCommitter(log, on_fatal=Fatal())
    committer.start()
    future = committer.append([rec(1, "k", "v")], 0)
    for _ in range(10):
        await asyncio.sleep(0)
    assert not future.done()
    await committer.close()
    assert await future == 0


@pytest.mark.asyncio
async def test_entries_appended_without_futures_are_announced_by_their_durable_end() -> None:
    # The shard's way: append_entry gives offsets, on_durable says how far the log is durable,
    # on_released how many entries each write made durable (a barrier is not an entry).
    fs = MemoryFileSystem()
    committer = GroupCommitter(RecordLog.open(fs, LOG_DIR), on_fatal=Fatal(), linger_ms=200)
    announced: list[int] = []
    released: list[int] = []
    committer.on_durable = announced.append
    committer.on_released = released.append
    committer.start()
    assert [committer.append_entry([rec(1, f"k{i}", "v")], 0) for i in range(3)] == [0, 1, 2]
    assert committer.durable_end == 0  # lingering: nothing written yet
    barrier = committer.barrier()
    assert await barrier == 2
    assert committer.durable_end == 3 and announced == [3] and released == [3]
    assert [e.offset for e in read_all(fs)] == [0, 1, 2]
    await committer.close()
