"""`coordinator groups describe` shows a streams group: its epochs, each member's active, standby and
warm-up tasks and, for members that report task offsets (v1), each reported task's lag. The group is
made by raw StreamsGroupHeartbeat v1 requests against the real server process."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.runtime.test_consumer_group_wire import create_topic
from tests.support.wire import WireClient, request

TOPOLOGY = {"epoch": 0, "subtopologies": [{
    "subtopology_id": "0", "source_topics": ["described"], "source_topic_regex": [], "repartition_sink_topics": [],
    "state_changelog_topics": [{"name": "ops-streams-store-changelog", "partitions": 0, "replication_factor": 0,
                                "topic_configs": []}],
    "repartition_source_topics": [], "copartition_groups": []}]}


async def join(bootstrap_port: int, member_id: str, **fields: Any) -> Any:
    client = await WireClient.connect(bootstrap_port)
    try:
        return await client.request(request(
            88, 1, group_id="ops-streams", member_id=member_id, member_epoch=0, endpoint_information_epoch=0,
            instance_id=None, rack_id=None, rebalance_timeout=30_000, topology=TOPOLOGY, active_tasks=[],
            standby_tasks=[], warmup_tasks=[], process_id=f"p-{member_id}", user_endpoint=None, client_tags=None,
            shutdown_application=False, **{"task_offsets": None, "task_end_offsets": None, **fields}))
    finally:
        await client.close()


def test_describe_shows_a_streams_groups_members_tasks_and_lags(server, cli) -> None:
    async def setup() -> None:
        client = await WireClient.connect(server.port)
        try:
            await create_topic(client, "ops-streams-store-changelog", 3)
        finally:
            await client.close()
        joined = await join(server.port, "m1")
        assert joined.error_code == 0
        offsets = [{"subtopology_id": "0", "partition": 0, "offset": 40}]
        ends = [{"subtopology_id": "0", "partition": 0, "offset": 100}]
        assert (await join(server.port, "m2", task_offsets=offsets, task_end_offsets=ends)).error_code == 0

    asyncio.run(setup())
    description = cli("groups", "describe", "ops-streams", "--json").json()
    assert (description["group_type"], description["protocol_type"]) == ("streams", "streams")
    members = {m["member_id"]: m for m in description["members"]}
    assert set(members) == {"m1", "m2"}
    assert members["m1"]["assignment"] == {"0": [0, 1, 2]}  # m2 waits for m1 to revoke
    assert members["m2"]["task_lags"] == {"0_0": 60}
    assert description["offsets"] == []  # tasks are not partitions: no lag rows of their own

    text = cli("groups", "describe", "ops-streams")
    assert text.code == 0
    lines = text.out.splitlines()
    assert lines[0].startswith("GROUP ops-streams  TYPE streams")
    assert "ACTIVE" in lines[3] and "WARMUP" in lines[3] and "TASK-LAGS" in lines[3]
    assert any("0_0:60" in line for line in lines)
