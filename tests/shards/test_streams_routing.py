"""Streams group APIs with `coordinator.shards=2`: a heartbeat is served by its group's node, which
creates the internal topics in the shared catalog (the other node sees them), and refused
NOT_COORDINATOR on the other; StreamsGroupDescribe serves its node's groups and refuses the rest."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from protocol.errors import ErrorCode
from tests.shards.cluster import ShardCluster, group_on, running_cluster
from tests.shards.test_routing import ask, create_topic, req


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ShardCluster]:
    with running_cluster(tmp_path_factory.mktemp("streams-routing")) as started:
        yield started


def join(group_id: str) -> Any:
    subtopology = {"subtopology_id": "0", "source_topics": ["streams-in"], "source_topic_regex": [],
                   "repartition_sink_topics": [], "repartition_source_topics": [], "copartition_groups": [],
                   "state_changelog_topics": [{"name": f"{group_id}-store-changelog", "partitions": 0,
                                               "replication_factor": 0, "topic_configs": []}]}
    return req(88, 1, group_id=group_id, member_id="m1", member_epoch=0, endpoint_information_epoch=0,
               instance_id=None, rack_id=None, rebalance_timeout=30_000,
               topology={"epoch": 0, "subtopologies": [subtopology]}, active_tasks=[], standby_tasks=[],
               warmup_tasks=[], process_id="p1", user_endpoint=None, client_tags=None, task_offsets=None,
               task_end_offsets=None, shutdown_application=False)


@pytest.mark.asyncio
async def test_a_streams_group_is_served_by_its_node_only(cluster: ShardCluster) -> None:
    await create_topic(cluster, 1, "streams-in", 2)  # on the group's node: its shard knows it at once
    mine, theirs = group_on(1, prefix="streams"), group_on(0, prefix="streams")
    served = await ask(cluster, 1, join(mine))
    assert served.error_code == 0 and served.member_epoch >= 1
    refused = await ask(cluster, 1, join(theirs))
    assert refused.error_code == ErrorCode.NOT_COORDINATOR
    # The changelog node 1 created is in the shared catalog: node 0 lists it.
    metadata = await ask(cluster, 0, req(3, 12, topics=[{"name": f"{mine}-store-changelog", "topic_id": None}],
                                         allow_auto_topic_creation=False, include_topic_authorized_operations=False))
    assert metadata.topics[0].error_code == 0 and len(metadata.topics[0].partitions) == 2

    described = await ask(cluster, 1, req(89, 0, group_ids=[mine, theirs], include_authorized_operations=False))
    by_id = {g.group_id: g for g in described.groups}
    assert by_id[mine].error_code == 0 and [m.member_id for m in by_id[mine].members] == ["m1"]
    assert by_id[theirs].error_code == ErrorCode.NOT_COORDINATOR
