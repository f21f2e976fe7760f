"""A write the disk refuses (a full disk) is a Kafka error, not a crash: the requests whose entries
were refused, and those parked in the core, are answered NOT_COORDINATOR (Kafka's answer for a
coordinator append that failed with KAFKA_STORAGE_ERROR), the shard reloads its state from the
log (so nothing refused is ever visible), and it keeps serving.

The shard runs on a real core over the real record log and group committer, on the in-memory
filesystem, whose injected ENOSPC models the full disk (tests/ops has the same on a real tmpfs).
"""

from __future__ import annotations

import asyncio
import errno
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from coordinator.core import requests as core
from coordinator.core.shard import CoordinatorShard
from coordinator.recordlog import GroupCommitter, LogTailer, MemoryFileSystem, RecordLog
from coordinator.runtime.durable import DurableSink
from coordinator.runtime.ownership import Replayer
from coordinator.runtime.shard import ShardRuntime
from protocol.errors import ErrorCode
from tests.support.polling import eventually

LOG_DIR = "/data/log"
ENOSPC = OSError(errno.ENOSPC, "No space left on device")


class Fatal:
    def __init__(self) -> None:
        self.errors: list[BaseException] = []

    def __call__(self, exc: BaseException) -> None:
        self.errors.append(exc)


async def load(fs: MemoryFileSystem) -> tuple[CoordinatorShard, list[Any]]:
    """The server's reload: a core from what the log holds now."""
    fresh = CoordinatorShard()
    await asyncio.to_thread(LogTailer(fs, LOG_DIR).load, Replayer(fresh))
    return fresh, []


@pytest_asyncio.fixture
async def served() -> AsyncIterator[tuple[ShardRuntime, MemoryFileSystem, Fatal]]:
    fs = MemoryFileSystem()
    fatal = Fatal()
    committer = GroupCommitter(RecordLog.open(fs, LOG_DIR), on_fatal=fatal)
    committer.start()
    runtime = ShardRuntime(CoordinatorShard(), DurableSink(committer), clock=lambda: 1_000_000,
                           reload=lambda: load(fs))
    await runtime.start(writer_id="node-0")
    try:
        yield runtime, fs, fatal
    finally:
        await runtime.stop()
        await committer.close()


async def commit(runtime: ShardRuntime, group: str, offset: int) -> int:
    response = await runtime.submit(core.OffsetCommit(
        ref=runtime.new_ref(), group_id=group, generation_id_or_member_epoch=-1, member_id="",
        group_instance_id=None, retention_time_ms=-1,
        topics=(core.OffsetCommitTopic("t", (core.OffsetCommitPartition(0, offset),)),)))
    return int(response.topics[0].partitions[0].error_code)


async def fetch(runtime: ShardRuntime, group: str) -> int:
    response = await runtime.submit(core.OffsetFetch(ref=runtime.new_ref(), groups=(core.OffsetFetchGroup(group),)))
    partitions = [p for topic in response.groups[0].topics for p in topic.partitions]
    return int(partitions[0].committed_offset) if partitions else -1


def join(runtime: ShardRuntime, group: str) -> Any:
    return runtime.submit(core.JoinGroup(
        ref=runtime.new_ref(), group_id=group, member_id="", group_instance_id=None, protocol_type="consumer",
        protocols=(("range", b"\x00"),), session_timeout_ms=10_000, rebalance_timeout_ms=30_000,
        client_id="c", client_host="/127.0.0.1", require_known_member_id=False, new_member_id="c-1"))


@pytest.mark.asyncio
async def test_a_refused_commit_is_answered_not_coordinator_and_leaves_the_committed_offset(
        served: tuple[ShardRuntime, MemoryFileSystem, Fatal]) -> None:
    runtime, fs, fatal = served
    assert await commit(runtime, "a", 42) == ErrorCode.NONE
    parked = join(runtime, "b")  # waits in the core for its group's first rebalance
    await asyncio.sleep(0)
    assert not parked.done()

    fs.fail_next("write", partial_bytes=20, error=ENOSPC)
    assert await commit(runtime, "a", 43) == ErrorCode.NOT_COORDINATOR
    assert (await asyncio.wait_for(parked, 5)).error_code == ErrorCode.NOT_COORDINATOR

    await eventually(lambda: runtime.loaded)
    assert runtime.reloads == 1 and not fatal.errors
    assert await fetch(runtime, "a") == 42  # the refused commit was never applied
    # Space again: writes go on from where the log was.
    assert await commit(runtime, "a", 44) == ErrorCode.NONE
    assert await fetch(runtime, "a") == 44
    restarted, _ = await load(fs)  # what a restart would read back
    stored = restarted.offsets.get("a", "t", 0)
    assert stored is not None and stored.committed_offset == 44


@pytest.mark.asyncio
async def test_a_disk_that_stays_full_keeps_refusing_writes_while_reads_are_served(
        served: tuple[ShardRuntime, MemoryFileSystem, Fatal]) -> None:
    runtime, fs, fatal = served
    assert await commit(runtime, "a", 1) == ErrorCode.NONE
    fs.fail_next("write", count=1000, error=ENOSPC)
    for attempt in range(3):
        await eventually(lambda: runtime.loaded)
        assert await fetch(runtime, "a") == 1
        assert await commit(runtime, "a", 10 + attempt) == ErrorCode.NOT_COORDINATOR
    await eventually(lambda: runtime.loaded)
    assert runtime.reloads == 3 and not fatal.errors
    assert await fetch(runtime, "a") == 1


@pytest.mark.asyncio
async def test_a_log_that_cannot_be_read_back_after_a_refusal_is_fatal() -> None:
    fs = MemoryFileSystem()
    fatal = Fatal()
    committer = GroupCommitter(RecordLog.open(fs, LOG_DIR), on_fatal=fatal)
    committer.start()

    async def unreadable() -> tuple[CoordinatorShard, list[Any]]:
        raise OSError(errno.EIO, "Input/output error")

    runtime = ShardRuntime(CoordinatorShard(), DurableSink(committer), clock=lambda: 1_000_000,
                           reload=unreadable, on_fatal=fatal)
    await runtime.start()
    try:
        fs.fail_next("write", error=ENOSPC)
        assert await commit(runtime, "a", 1) == ErrorCode.NOT_COORDINATOR
        await eventually(lambda: fatal.errors, message="the fatal call")
        assert [type(e) for e in fatal.errors] == [OSError] and not runtime.loaded
    finally:
        await runtime.stop()
        await committer.close()
