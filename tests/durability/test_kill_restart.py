"""What survives a SIGKILL of the server: acknowledged offset commits, classic generations.

The server runs as a child process with the record log's default `log.flush.policy=always`; it is
killed with SIGKILL (no shutdown code runs) and restarted on the same data directory and port.
"""

from __future__ import annotations

import asyncio
import os
import random
import subprocess
import sys
import time
from datetime import timedelta

import pytest
from kio.schema.heartbeat.v4.request import HeartbeatRequest
from kio.schema.join_group.v9.request import JoinGroupRequest, JoinGroupRequestProtocol
from kio.schema.offset_fetch.v8.request import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopics,
)
from kio.schema.sync_group.v5.request import SyncGroupRequest, SyncGroupRequestAssignment

from tests.support.server import ServerProcess, wait_until
from tests.support.wire import WireClient, request

pytestmark = pytest.mark.interop

KILL_POINTS = int(os.environ.get("DURABILITY_KILL_POINTS", "20"))


def kill(server: ServerProcess) -> None:
    assert server.proc is not None
    server.proc.kill()
    server.proc.wait(10)


async def committed_offset(port: int, group: str, topic: str) -> int:
    client = await WireClient.connect(port)
    try:
        response = await client.request(OffsetFetchRequest(
            groups=(OffsetFetchRequestGroup(group_id=group, topics=(OffsetFetchRequestTopics(name=topic, partition_indexes=(0,)),)),),
            require_stable=True))
    finally:
        await client.close()
    return int(response.groups[0].topics[0].partitions[0].committed_offset)


@pytest.mark.parametrize("kill_points", [KILL_POINTS, pytest.param(200, marks=pytest.mark.slow)])
def test_acknowledged_commits_survive_sigkill_at_random_points(tmp_path, kill_points: int) -> None:
    rng = random.Random(int(os.environ.get("DURABILITY_SEED", "848")))
    server = ServerProcess(tmp_path / "data", overrides={"topics": "t:1"})  # commits need the topic
    last_acked = -1  # nothing committed yet (OffsetFetch answers -1)
    try:
        server.start()
        for round_number in range(kill_points):
            producer = subprocess.Popen(
                [sys.executable, "-m", "tests.durability.commit_producer", server.bootstrap, "durable", "t", str(last_acked)],
                stdout=subprocess.PIPE, text=True)
            assert producer.stdout is not None
            target = rng.randint(1, 40)  # kill after this many acknowledgements, mid-stream
            acked_this_round = 0
            attempted = last_acked
            deadline = time.monotonic() + 30
            while acked_this_round < target:
                line = producer.stdout.readline()
                assert line, f"producer ended early in round {round_number}"
                kind, value = line.split()[:2]
                if kind == "attempt":
                    attempted = int(value)
                elif kind == "acked":
                    last_acked = int(value)
                    acked_this_round += 1
                assert time.monotonic() < deadline
            kill(server)
            producer.kill()
            for line in producer.stdout:  # acknowledgements that raced the kill still count
                kind, value = line.split()[:2]
                if kind == "attempt":
                    attempted = int(value)
                elif kind == "acked":
                    last_acked = int(value)
            producer.wait(10)
            producer.stdout.close()
            server.start()  # same data directory and port; also the next round's server
            found = asyncio.run(committed_offset(server.port, "durable", "t"))
            assert last_acked <= found <= attempted, (round_number, last_acked, found, attempted)
            last_acked = found  # a commit that was durable but unacknowledged is now the floor
    finally:
        server.stop()


def test_classic_members_keep_their_generation_across_sigkill(tmp_path) -> None:
    server = ServerProcess(tmp_path / "data").start()

    async def form_group() -> tuple[str, int]:
        client = await WireClient.connect(server.port)
        join = JoinGroupRequest(group_id="classic", session_timeout=timedelta(seconds=30), rebalance_timeout=timedelta(seconds=30),
                                member_id="", group_instance_id="instance-a", protocol_type="consumer",
                                protocols=(JoinGroupRequestProtocol(name="range", metadata=b"m"),), reason=None)
        joined = await client.request(join)
        assert joined.error_code == 0
        synced = await client.request(SyncGroupRequest(
            group_id="classic", generation_id=joined.generation_id, member_id=joined.member_id,
            group_instance_id="instance-a", protocol_type="consumer", protocol_name="range",
            assignments=(SyncGroupRequestAssignment(member_id=joined.member_id, assignment=b"a"),)))
        assert synced.error_code == 0
        await client.close()
        return joined.member_id, joined.generation_id

    async def heartbeat(member_id: str, generation: int) -> int:
        client = await WireClient.connect(server.port)
        try:
            response = await client.request(HeartbeatRequest(group_id="classic", generation_id=generation,
                                                             member_id=member_id, group_instance_id="instance-a"))
        finally:
            await client.close()
        return int(response.error_code)

    try:
        member_id, generation = asyncio.run(form_group())
        assert asyncio.run(heartbeat(member_id, generation)) == 0
        kill(server)
        server.start()
        wait_until(lambda: asyncio.run(heartbeat(member_id, generation)) == 0, timeout=10,
                   message="heartbeat with the pre-crash generation")
        assert asyncio.run(heartbeat(member_id, generation + 1)) == 22  # and the generation did not move
    finally:
        server.stop()


def test_a_kip848_member_told_a_new_epoch_without_a_record_keeps_it_across_sigkill(tmp_path) -> None:
    """A member that only moves to a new group epoch (its partitions stay) is told the epoch with no
    record of its own; after a kill -9 the restarted coordinator serves it at that epoch, and
    describes it there, as the live one did."""
    server = ServerProcess(tmp_path / "data", overrides={"topics": "foo:4,bar:1"}).start()

    async def heartbeat(client: WireClient, member_id: str, epoch: int, **fields: object) -> object:
        fields.setdefault("topic_partitions", None)
        return await client.request(request(68, 1, group_id="g", member_id=member_id, member_epoch=epoch, **fields))

    async def join(client: WireClient, member_id: str, topic: str) -> object:
        return await heartbeat(client, member_id, 0, rebalance_timeout=300_000, subscribed_topic_names=[topic],
                               subscribed_topic_regex="", topic_partitions=[])

    async def before_kill() -> tuple[int, int]:
        client = await WireClient.connect(server.port)
        try:
            a = await join(client, "A", "foo")
            assert (a.error_code, len(a.assignment.topic_partitions[0].partitions)) == (0, 4)
            z = await join(client, "Z", "bar")  # the group epoch moves; A's partitions do not
            assert z.error_code == 0 and z.member_epoch > a.member_epoch
            caught_up = await heartbeat(client, "A", a.member_epoch)
            assert (caught_up.error_code, caught_up.member_epoch, caught_up.assignment) == (0, z.member_epoch, None)
            return a.member_epoch, caught_up.member_epoch
        finally:
            await client.close()

    async def after_restart(told: int) -> tuple[int, int, int]:
        client = await WireClient.connect(server.port)
        try:
            response = await heartbeat(client, "A", told)
            described = await client.request(request(69, 0, group_ids=["g"], include_authorized_operations=False))
            (a,) = [m for m in described.groups[0].members if m.member_id == "A"]
            return response.error_code, response.member_epoch, a.member_epoch
        finally:
            await client.close()

    try:
        recorded, told = asyncio.run(before_kill())
        assert told > recorded
        kill(server)
        server.start()
        assert asyncio.run(after_restart(told)) == (0, told, told)
    finally:
        server.stop()
