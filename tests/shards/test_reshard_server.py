"""A real single-process server's groups survive resharding to 2, 3, then 1 shard processes.

Classic (static member, SyncGroup done) and KIP-848 groups with committed offsets are formed on a
one-shard server over raw kio requests; the server is stopped, the data directory is moved to two
and three shards (`ensure_layout`, then `serve --shard K` processes) and back to one (plain
`coordinator serve`, which moves the partitions itself). Each time, every group is served by the
node of its shard with the same members, epochs, assignments and offsets, and by no other node.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from coordinator.shards.placement import ShardLayout, read_layout
from coordinator.shards.reshard import ensure_layout
from protocol.errors import ErrorCode
from tests.support.server import ServerProcess, free_port_block
from tests.support.shard_process import running_shards
from tests.support.wire import call, request

pytestmark = pytest.mark.interop

PARTITIONS = 50
TOPIC = "t"
TOPIC_PARTITIONS = 4
CLASSIC = [f"classic-{i}" for i in range(6)]
KIP848 = [f"kip848-{i}" for i in range(6)]




def offsets_of(group: str) -> dict[int, int]:
    """What each group commits: distinct per group and partition."""
    return {p: 1000 * (sum(map(ord, group)) % 97) + p for p in range(TOPIC_PARTITIONS)}


async def form_groups(port: int) -> dict[str, dict[str, Any]]:
    """Classic and KIP-848 groups, each one member, with offsets committed; returns what they are."""
    created = await call(port, request(19, 7, topics=[{"name": TOPIC, "num_partitions": TOPIC_PARTITIONS,
                                                       "replication_factor": -1, "assignments": [], "configs": []}],
                                       timeout=5000))
    assert created.topics[0].error_code == 0
    state: dict[str, dict[str, Any]] = {}
    for group in CLASSIC:
        joined = await call(port, request(
            11, 9, group_id=group, session_timeout=timedelta(seconds=60), rebalance_timeout=timedelta(seconds=60),
            member_id="", group_instance_id=f"{group}-instance", protocol_type="consumer",
            protocols=[{"name": "range", "metadata": b"m"}], reason=None))
        assert joined.error_code == 0, joined
        synced = await call(port, request(
            14, 5, group_id=group, generation_id=joined.generation_id, member_id=joined.member_id,
            group_instance_id=f"{group}-instance", protocol_type="consumer", protocol_name="range",
            assignments=[{"member_id": joined.member_id, "assignment": b"assigned"}]))
        assert synced.error_code == 0, synced
        await commit(port, group, joined.generation_id, joined.member_id, f"{group}-instance")
        state[group] = {"member_id": joined.member_id, "generation": joined.generation_id}
    for group in KIP848:
        member_id = str(uuid.uuid4())
        joined = await call(port, request(
            68, 1, group_id=group, member_id=member_id, member_epoch=0, rebalance_timeout=300_000,
            subscribed_topic_names=[TOPIC], subscribed_topic_regex="", topic_partitions=[]))
        assert joined.error_code == 0 and joined.assignment is not None, joined
        owned = [{"topic_id": tp.topic_id, "partitions": sorted(tp.partitions)}
                 for tp in joined.assignment.topic_partitions]
        acked = await call(port, request(68, 1, group_id=group, member_id=member_id,
                                         member_epoch=joined.member_epoch, topic_partitions=owned))
        assert acked.error_code == 0, acked
        await commit(port, group, acked.member_epoch, member_id, None)
        state[group] = {"member_id": member_id, "epoch": acked.member_epoch,
                        "assigned": sorted(p for tp in owned for p in tp["partitions"])}
    return state


async def commit(port: int, group: str, generation: int, member_id: str, instance: str | None) -> None:
    response = await call(port, request(8, 9, group_id=group, generation_id_or_member_epoch=generation,
                                        member_id=member_id, group_instance_id=instance, topics=[{
                                            "name": TOPIC, "partitions": [
                                                {"partition_index": p, "committed_offset": o,
                                                 "committed_leader_epoch": -1, "committed_metadata": ""}
                                                for p, o in offsets_of(group).items()]}]))
    assert all(p.error_code == 0 for t in response.topics for p in t.partitions), response


async def committed(port: int, group: str) -> tuple[int, dict[int, int]]:
    """(group-level error, partition -> committed offset) as `port`'s node answers OffsetFetch."""
    response = await call(port, request(9, 8, groups=[{"group_id": group, "topics": [
        {"name": TOPIC, "partition_indexes": list(range(TOPIC_PARTITIONS))}]}], require_stable=False))
    answer = response.groups[0]
    found = {int(p.partition_index): int(p.committed_offset) for t in answer.topics for p in t.partitions
             if int(p.committed_offset) >= 0}
    return int(answer.error_code), found


async def check_served(ports: list[int], state: dict[str, dict[str, Any]]) -> None:
    layout = ShardLayout(PARTITIONS, len(ports))
    for group, expected in state.items():
        owner = layout.shard_of_group(group)
        error, offsets = await committed(ports[owner], group)
        assert (error, offsets) == (0, offsets_of(group)), (group, owner, error, offsets)
        for k, port in enumerate(ports):
            if k != owner:  # nowhere else: NOT_COORDINATOR, or at least nothing of it
                error, offsets = await committed(port, group)
                assert error == ErrorCode.NOT_COORDINATOR or offsets == {}, (group, k, error, offsets)
        if group in KIP848:
            described = await call(ports[owner], request(69, 1, group_ids=[group], include_authorized_operations=False))
            g = described.groups[0]
            assert g.error_code == 0 and [m.member_id for m in g.members] == [expected["member_id"]], g
            member = g.members[0]
            assert member.member_epoch == expected["epoch"]
            assert sorted(p for tp in member.assignment.topic_partitions for p in tp.partitions) == expected["assigned"]
            beat = await call(ports[owner], request(68, 1, group_id=group, member_id=expected["member_id"],
                                                    member_epoch=expected["epoch"], topic_partitions=None))
            assert (beat.error_code, beat.member_epoch) == (0, expected["epoch"]), beat  # no rebalance
        else:
            described = await call(ports[owner], request(15, 5, groups=[group], include_authorized_operations=False))
            g = described.groups[0]
            assert (g.error_code, g.group_state) == (0, "Stable"), g
            assert [m.member_id for m in g.members] == [expected["member_id"]]
            beat = await call(ports[owner], request(12, 4, group_id=group, generation_id=expected["generation"],
                                                    member_id=expected["member_id"],
                                                    group_instance_id=f"{group}-instance"))
            assert beat.error_code == 0, beat


def test_groups_survive_resharding_1_2_3_1(tmp_path: Path) -> None:
    layouts = [ShardLayout(PARTITIONS, n) for n in (2, 3)]
    assert all({layout.shard_of_group(g) for g in CLASSIC + KIP848} == set(range(layout.shards))
               for layout in layouts)  # the groups really spread over every shard
    root = tmp_path / "data"
    port = free_port_block(3)
    single = ServerProcess(root, port=port)
    try:
        single.start()
        state = asyncio.run(form_groups(port))
        asyncio.run(check_served([port], state))
    finally:
        single.stop()
    assert single.proc is not None and single.proc.returncode == 0
    for layout in layouts:
        ensure_layout(root, layout)
        assert read_layout(root) == layout
        with running_shards(root, layout.shards, port) as shards:
            asyncio.run(check_served([s.node_port for s in shards], state))
    # Back to one process: plain `coordinator serve` moves the partitions itself before starting.
    single = ServerProcess(root, port=port)
    try:
        single.start()
        assert read_layout(root) == ShardLayout(PARTITIONS, 1)
        asyncio.run(check_served([port], state))
    finally:
        single.stop()
