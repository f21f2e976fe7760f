"""A standby that waited while the partitions were moved does not serve what it read.

A standby tails the owner's log while it waits for the data directory. If, between the owner
stopping and the standby taking over, `coordinator serve` moves the partitions to two shards and
back to one, the layout is again the standby's but its log directory was replaced: everything the
standby read is of the old logs. It must refuse with one line and a non-zero exit (its supervisor
then starts it afresh), and a standby that waited through no move must take over as always.

The standby is stopped (SIGSTOP) while the test moves the partitions, so that it cannot take the
lock between the owner stopping and the move: the race a real deployment would have to lose.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from coordinator.recordlog import RealFileSystem, try_lock_data_dir
from coordinator.shards.placement import ShardLayout, read_layout
from coordinator.shards.reshard import ensure_layout
from tests.support.server import ServerProcess, wait_until
from tests.support.wire import call, request

pytestmark = pytest.mark.interop

PARTITIONS = 50
TOPIC = "t"
GROUP = "standby-group"




def commit_offset(port: int, offset: int) -> None:
    async def run() -> None:
        created = await call(port, request(19, 7, topics=[{"name": TOPIC, "num_partitions": 1, "replication_factor": -1,
                                                           "assignments": [], "configs": []}], timeout=5000))
        assert created.topics[0].error_code == 0
        committed = await call(port, request(8, 8, group_id=GROUP, generation_id_or_member_epoch=-1, member_id="",
                                             group_instance_id=None, topics=[
                                                 {"name": TOPIC, "partitions": [{"partition_index": 0,
                                                                                 "committed_offset": offset,
                                                                                 "committed_leader_epoch": -1,
                                                                                 "committed_metadata": ""}]}]))
        assert committed.topics[0].partitions[0].error_code == 0

    asyncio.run(run())


def fetched_offset(port: int) -> int:
    async def run() -> int:
        got = await call(port, request(9, 8, groups=[{"group_id": GROUP, "member_id": None, "member_epoch": -1,
                                                      "topics": [{"name": TOPIC, "partition_indexes": [0]}]}],
                                       require_stable=False))
        return int(got.groups[0].topics[0].partitions[0].committed_offset)

    return asyncio.run(run())


@pytest.fixture
def root(tmp_path: Path) -> Iterator[Path]:
    """A one-shard data directory whose log holds a committed offset (so a move has entries to move)."""
    data = tmp_path / "data"
    owner = ServerProcess(data)
    try:
        owner.start()
        commit_offset(owner.port, 42)
        assert owner.terminate() == 0
    finally:
        owner.stop()
    yield data


def waiting_standby(root: Path) -> tuple[ServerProcess, Any]:
    """A standby `coordinator serve` waiting on `root`, whose lock the test holds as the owner would."""
    lock = try_lock_data_dir(RealFileSystem(), str(root))
    assert lock is not None
    standby = ServerProcess(root).start(wait=False)
    wait_until(lambda: '"standby_waiting"' in standby.log(), message="the standby to wait for the lock")
    return standby, lock


def test_a_standby_that_waited_through_a_move_to_two_shards_and_back_refuses_with_one_line(root: Path) -> None:
    standby, lock = waiting_standby(root)
    try:
        assert standby.proc is not None
        standby.proc.send_signal(signal.SIGSTOP)
        lock.release()
        ensure_layout(root, ShardLayout(PARTITIONS, 2))
        ensure_layout(root, ShardLayout(PARTITIONS, 1))
        assert read_layout(root) == ShardLayout(PARTITIONS, 1)  # the standby's own layout again
        standby.proc.send_signal(signal.SIGCONT)
        assert standby.proc.wait(30) == 2
        log = standby.log()
        assert "was replaced by a move of the partitions while this process waited as a standby" in log
        assert "Traceback" not in log
    finally:
        standby.stop()
    # Started again, it loads the moved log from the start: the offset is there.
    fresh = ServerProcess(root)
    try:
        fresh.start()
        assert fetched_offset(fresh.port) == 42
    finally:
        fresh.stop()


def test_a_standby_that_waited_through_no_move_takes_over_with_what_it_read(root: Path) -> None:
    standby, lock = waiting_standby(root)
    try:
        lock.release()
        standby.wait_ready()
        assert fetched_offset(standby.port) == 42
        assert '"standby_takeover"' in standby.log()
    finally:
        standby.stop()
