"""Shard k's copy of shard 0's security state and the channel its writes take, in one process over
real record logs and a real Unix socket: the copy takes only the SCRAM and ACL records of shard 0's
log; a forwarded write is applied by shard 0's runtime and is in the copy when `forward` returns;
the channel carries nothing but the three security writes; shard 0 absent is REQUEST_TIMED_OUT."""

from __future__ import annotations

import asyncio
import os
import struct
from collections.abc import AsyncIterator
from pathlib import Path

import msgspec
import pytest
import pytest_asyncio

from coordinator.core.records import (
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
)
from coordinator.core.shard import CoordinatorShard
from coordinator.recordlog import GroupCommitter, LogRecord, RealFileSystem, RecordLog
from coordinator.runtime.durable import DurableSink
from coordinator.runtime.shard import ShardRuntime
from coordinator.security import requests as core
from coordinator.security.acls import AclBinding
from coordinator.security.records import CODEC, AclKey, AclValue
from coordinator.security.store import SecurityStore, security_of
from coordinator.shards import security_channel
from coordinator.shards.security_channel import SecurityChannel, SecurityForwarder
from coordinator.shards.security_mirror import SecurityMirror
from protocol.errors import ErrorCode

pytestmark = pytest.mark.asyncio

ACL = AclBinding(3, "app-", 4, "User:alice", "*", 3, 3)  # GROUP app- PREFIXED alice READ ALLOW


def _entry(log: RecordLog, *records: Record) -> None:
    log.append([LogRecord(*CODEC.encode_record(r)) for r in records], 0)
    log.flush()


async def test_the_copy_takes_only_security_records_and_follows_deletes(tmp_path: Path) -> None:
    log = RecordLog.open(RealFileSystem(), str(tmp_path / "log"))
    _entry(log, Record(OffsetCommitKey("g", "t", 0), OffsetCommitValue(5)))
    _entry(log, Record(AclKey(*ACL), AclValue()), Record(OffsetCommitKey("g", "t", 1), OffsetCommitValue(7)))
    mirror = SecurityMirror(tmp_path / "log")
    await mirror.catch_up()
    assert mirror.store.acls == {ACL}
    assert mirror.records_applied == 1  # the offset commits were read past, never applied
    assert mirror.next_offset == log.next_offset
    version = mirror.store.version
    _entry(log, Record(AclKey(*ACL), None))
    assert await mirror.wait_for(log.next_offset, 5.0)
    assert mirror.store.acls == set()
    assert mirror.store.version > version
    log.close()


async def test_a_copy_that_read_a_write_shard_0_then_cut_off_is_rebuilt_without_it(tmp_path: Path) -> None:
    log = RecordLog.open(RealFileSystem(), str(tmp_path / "log"))
    _entry(log, Record(OffsetCommitKey("g", "t", 0), OffsetCommitValue(5)))
    segment = tmp_path / "log" / "00000000000000000000.log"
    before = segment.stat().st_size
    _entry(log, Record(AclKey(*ACL), AclValue()))
    mirror = SecurityMirror(tmp_path / "log")
    await mirror.catch_up()
    assert mirror.store.acls == {ACL}
    old_store = mirror.store
    log.close()
    # What shard 0's writer does when the disk refuses a write after some of it reached the file
    # (and the copy read it in that instant): the segment is cut back to where it was.
    os.truncate(segment, before)
    await mirror.catch_up()
    assert mirror.store is not old_store and mirror.store.acls == set()
    assert mirror.next_offset == 1


async def test_a_copy_of_a_log_not_created_yet_is_empty(tmp_path: Path) -> None:
    mirror = SecurityMirror(tmp_path / "no-log-yet")
    await mirror.catch_up()
    assert mirror.store.acls == set() and mirror.store.credentials == {}
    assert not await mirror.wait_for(1, 0.1)


@pytest_asyncio.fixture
async def shard0(tmp_path: Path) -> AsyncIterator[tuple[Path, ShardRuntime]]:
    """Shard 0's runtime over a real log in `root/log`, with its channel open in `root`."""
    root = tmp_path / "root"
    root.mkdir()
    log = await asyncio.to_thread(RecordLog.open, RealFileSystem(), str(root / "log"))
    committer = GroupCommitter(log, on_fatal=lambda exc: None)
    committer.start()
    runtime = ShardRuntime(CoordinatorShard(services=(SecurityStore(),)), DurableSink(committer))
    await runtime.start()
    channel = SecurityChannel(root, lambda: runtime, lambda: committer.log.durable_end)
    await channel.start()
    try:
        yield root, runtime
    finally:
        await channel.stop()
        await runtime.stop()
        await committer.close()
    assert not (root / "security.sock").exists()


async def test_a_forwarded_write_is_shard_0s_and_in_the_copy_when_answered(shard0) -> None:
    root, runtime = shard0
    mirror = SecurityMirror(root / "log")
    forwarder = SecurityForwarder(root, 1, mirror, lambda: mirror.store)
    assert (root / "security.sock").stat().st_mode & 0o777 == 0o600
    created = await forwarder.forward("User:admin", core.CreateAcls(0, (ACL,)))
    assert created == core.CreateAclsResponse(((ErrorCode.NONE, None),))
    assert security_of(runtime.core).acls == {ACL}
    assert mirror.store.acls == {ACL}  # no tail interval: the answer waited for the copy
    deleted = await forwarder.forward("User:admin", core.DeleteAcls(0, (
        core.AclFilter(1, None, 1, None, None, 1, 1),)))
    assert [r.deleted for r in deleted.results] == [(ACL,)]
    assert mirror.store.acls == set()


async def test_the_channel_serves_only_the_security_writes(shard0) -> None:
    root, runtime = shard0
    reader, writer = await asyncio.open_unix_connection(str(root / "security.sock"))
    body = msgspec.msgpack.encode(["OffsetCommit", 1, "User:mallory", b"\x90"])
    writer.write(struct.pack(">I", len(body)) + body)
    await writer.drain()
    assert await asyncio.wait_for(reader.read(), 5) == b""  # dropped, nothing answered
    writer.close()
    assert security_of(runtime.core).acls == set()


async def test_shard_0_unreachable_is_request_timed_out(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(security_channel, "FORWARD_TIMEOUT_S", 0.3)
    mirror = SecurityMirror(tmp_path / "log")
    forwarder = SecurityForwarder(tmp_path, 1, mirror, lambda: mirror.store)
    answer = await forwarder.forward("User:admin", core.CreateAcls(0, (ACL,)))
    assert answer == ErrorCode.REQUEST_TIMED_OUT
