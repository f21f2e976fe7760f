"""KIP-848 members across a crash and a standby takeover, and fencing of a revived old owner.

A `group.protocol=consumer` member's durable state is its member id, member epoch and assignment.
After the server is SIGKILLed and restarted on the same data directory, or replaced by a standby
that was tailing the log, the members keep all three: no rebalance, no partition changes owner.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time

import pytest
from kio.schema.consumer_group_describe.v1.request import ConsumerGroupDescribeRequest
from kio.schema.offset_commit.v9.request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)

from tests.support.clients import Member, make_member, owns_each_exactly_once, poll_until
from tests.support.metrics import scrape
from tests.support.server import ServerProcess, wait_until
from tests.support.wire import WireClient

pytestmark = pytest.mark.interop

TOPIC = "durable-topic"
PARTITIONS = 6
GROUP = "k848"
OVERRIDES = {"topics": f"{TOPIC}:{PARTITIONS}"}


async def describe(port: int) -> dict[str, tuple[int, frozenset[int]]]:
    """member id -> (member epoch, owned partitions) from ConsumerGroupDescribe."""
    client = await WireClient.connect(port)
    try:
        response = await client.request(ConsumerGroupDescribeRequest(group_ids=(GROUP,), include_authorized_operations=False))
    finally:
        await client.close()
    (group,) = response.groups
    assert group.error_code == 0
    return {
        m.member_id: (int(m.member_epoch),
                      frozenset(p for tp in m.assignment.topic_partitions for p in tp.partitions))
        for m in group.members
    }


def consumers(bootstrap: str) -> list[Member]:
    return [make_member(bootstrap, GROUP, f"k{i}", [TOPIC], **{"group.protocol": "consumer"})
            for i in range(3)]


def settle(members: list[Member], port: int) -> dict[str, tuple[int, frozenset[int]]]:
    poll_until(members, lambda: owns_each_exactly_once(members, PARTITIONS), message="consumer-group assignment")

    def stable() -> dict[str, tuple[int, frozenset[int]]] | None:
        view = asyncio.run(describe(port))
        owned = {m.consumer.memberid(): frozenset(m.assignment()) for m in members}
        # Settled = the server and the clients agree AND every partition is owned: between a
        # revocation and its reassignment they agree on a state that is still moving.
        held = sorted(p for partitions in owned.values() for p in partitions)
        return view if {k: v[1] for k, v in view.items()} == owned and held == list(range(PARTITIONS)) else None

    state: dict[str, tuple[int, frozenset[int]]] = {}

    def settled() -> bool:
        nonlocal state
        found = stable()
        if found:
            state = found
        return bool(found)

    poll_until(members, settled, message="server and clients agreeing on the assignment")
    return state


def heartbeats(metrics_port: int) -> float:
    return scrape(metrics_port).get('coordinator_requests_total{api="ConsumerGroupHeartbeat"}', 0.0)


def assert_members_kept_everything(members: list[Member], before: dict[str, tuple[int, frozenset[int]]],
                                   server: ServerProcess) -> None:
    for m in members:
        m.revoked_events.clear()
        m.assigned_events.clear()
    # Every member heartbeats the new owner a few times (5 s default interval is too slow for a
    # test, so the server's interval is lowered in OVERRIDES of the caller).
    poll_until(members, lambda: heartbeats(server.metrics_port) >= 3 * len(members),
               message="members heartbeating the new owner")
    after = asyncio.run(describe(server.port))
    assert after == before, "member ids, epochs or assignments changed"
    for m in members:
        assert not m.revoked_events and not m.assigned_events, f"{m.name} saw a rebalance"
        assert frozenset(m.assignment()) == before[m.consumer.memberid()][1]


FAST = {**OVERRIDES, "group.consumer.heartbeat.interval.ms": "500", "group.consumer.min.heartbeat.interval.ms": "500"}


def test_consumer_group_survives_sigkill_and_restart(tmp_path) -> None:
    server = ServerProcess(tmp_path / "data", overrides=FAST).start()
    members = consumers(server.bootstrap)
    try:
        before = settle(members, server.port)
        assert server.proc is not None
        server.proc.kill()
        server.proc.wait(10)
        server.start()
        assert_members_kept_everything(members, before, server)
    finally:
        for m in members:
            m.close()
        server.stop()


def test_consumer_group_survives_standby_takeover(tmp_path) -> None:
    data = tmp_path / "data"
    active = ServerProcess(data, overrides=FAST).start()
    # Same data directory and Kafka port: the standby binds the port only once it owns the data.
    standby = ServerProcess(data, overrides=FAST, port=active.port)
    standby.log_path = tmp_path / "standby.log"
    standby.start(wait=False)
    members = consumers(active.bootstrap)
    try:
        before = settle(members, active.port)
        wait_until(lambda: "standby_waiting" in standby.log(), message="the standby to be tailing")
        assert not standby.ready()
        assert active.proc is not None
        killed_at = time.monotonic()
        active.proc.kill()
        active.proc.wait(10)
        wait_until(standby.ready, timeout=20, interval=0.01, message="standby takeover")
        print(f"standby ready {time.monotonic() - killed_at:.3f}s after the active was killed")
        events = [json.loads(line) for line in standby.log().splitlines() if line.startswith("{")]
        assert any(e["event"] == "standby_takeover" for e in events)
        assert_members_kept_everything(members, before, standby)
    finally:
        for m in members:
            m.close()
        standby.stop()
        active.stop()


def test_revived_old_owner_cannot_append_after_a_newer_epoch(tmp_path) -> None:
    """The old owner is frozen (SIGSTOP), loses its lock (the lock file is replaced, as a careless
    operator or a broken shared filesystem might), a new owner takes over, then the old one wakes
    up and receives a commit: it must not append, and it stops instead of acknowledging."""
    data = tmp_path / "data"
    old = ServerProcess(data, overrides={"topics": "t:1"}).start()
    assert old.proc is not None
    os.kill(old.proc.pid, signal.SIGSTOP)
    try:
        (data / "coordinator.lock").unlink()
        new = ServerProcess(data, overrides={"topics": "t:1"})
        new.log_path = tmp_path / "new.log"
        new.start()

        async def commit(port: int) -> tuple[bool, int | None]:
            wire = await WireClient.connect(port)
            request = OffsetCommitRequest(group_id="fenced", generation_id_or_member_epoch=-1, member_id="",
                                          group_instance_id=None, topics=(OffsetCommitRequestTopic(
                                              name="t", partitions=(OffsetCommitRequestPartition(
                                                  partition_index=0, committed_offset=7, committed_leader_epoch=-1,
                                                  committed_metadata=None),)),))
            try:
                response = await wire.request(request, timeout=15)
                return True, int(response.topics[0].partitions[0].error_code)
            except (asyncio.IncompleteReadError, ConnectionError, TimeoutError):
                return False, None
            finally:
                await wire.close()

        assert asyncio.run(commit(new.port)) == (True, 0)
        os.kill(old.proc.pid, signal.SIGCONT)
        answered, _ = asyncio.run(commit(old.port))
        assert not answered, "the fenced owner acknowledged a commit"
        assert old.proc.wait(15) != 0
        assert "record_log_failed" in old.log()
        new.stop()
        # Nothing the old owner tried to write is in the log: replaying it shows the new owner's commit only.
        from coordinator.cli import main as cli

        dump = tmp_path / "dump.jsonl"
        assert cli(["log", "dump", "--data-dir", str(data), "--output", str(dump)]) == 0
        epochs = [json.loads(line)["writer_epoch"] for line in dump.read_text().splitlines()]
        assert epochs == sorted(epochs), "an entry of an older writer follows a newer one"
        assert cli(["log", "verify", "--data-dir", str(data)]) == 0
    finally:
        if old.proc.poll() is None:
            os.kill(old.proc.pid, signal.SIGCONT)
        old.stop()
