"""The streams group APIs under an authorizer: StreamsGroupHeartbeat needs READ on the group,
StreamsGroupDescribe DESCRIBE on each group (the others answered GROUP_AUTHORIZATION_FAILED)."""

from __future__ import annotations

import pytest

from tests.runtime.test_consumer_group_wire import create_topic
from tests.security.test_authorization import (
    DESCRIBE,
    GROUP,
    GROUP_DENIED,
    PREFIXED,
    READ,
    binding,
    req,
    secured,  # noqa: F401 - the fixture
)


def join(group_id: str) -> object:
    topology = {"epoch": 0, "subtopologies": [{
        "subtopology_id": "0", "source_topics": ["sin"], "source_topic_regex": [], "repartition_sink_topics": [],
        "state_changelog_topics": [], "repartition_source_topics": [], "copartition_groups": []}]}
    return req(88, 1, group_id=group_id, member_id="m1", member_epoch=0, endpoint_information_epoch=0,
               instance_id=None, rack_id=None, rebalance_timeout=30_000, topology=topology, active_tasks=[],
               standby_tasks=[], warmup_tasks=[], process_id="p1", user_endpoint=None, client_tags=None,
               task_offsets=None, task_end_offsets=None, shutdown_application=False)


@pytest.mark.asyncio
async def test_streams_apis_need_read_to_heartbeat_and_describe_to_describe(secured) -> None:  # noqa: F811
    await create_topic(secured.admin, "sin", 1)
    assert await secured.create(binding(GROUP, "app-", READ, pattern=PREFIXED),
                                binding(GROUP, "app-", DESCRIBE, pattern=PREFIXED)) == [0, 0]
    alice, bob = await secured.login("alice"), await secured.login("bob")
    assert (await alice.request(join("app-s"))).error_code == 0
    assert (await bob.request(join("app-s"))).error_code == GROUP_DENIED
    assert (await alice.request(join("other-s"))).error_code == GROUP_DENIED
    described = await alice.request(req(89, 0, group_ids=["app-s", "other-s"], include_authorized_operations=False))
    assert [(g.group_id, g.error_code) for g in described.groups] == [("app-s", 0), ("other-s", GROUP_DENIED)]
