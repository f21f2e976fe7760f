"""The streams group APIs under an authorizer, as Kafka's KafkaApis asks: StreamsGroupHeartbeat
needs READ on the group and DESCRIBE on every topic a joining member's topology names (else
TOPIC_AUTHORIZATION_FAILED, unless a name is one Kafka refuses outright: STREAMS_INVALID_TOPOLOGY
first), and its internal topics are created only with CREATE on the cluster or on each of them
(else none is, and the MISSING_INTERNAL_TOPICS status says which were unauthorized).
StreamsGroupDescribe needs DESCRIBE on each group (the others answered GROUP_AUTHORIZATION_FAILED)."""

from __future__ import annotations

from typing import Any

import pytest

from coordinator.core.streams.status import Status
from tests.runtime.test_consumer_group_wire import create_topic
from tests.security.test_authorization import (
    CLUSTER,
    CREATE,
    DESCRIBE,
    GROUP,
    GROUP_DENIED,
    LITERAL,
    PREFIXED,
    READ,
    TOPIC,
    TOPIC_DENIED,
    binding,
    req,
    secured,  # noqa: F401 - the fixture
)
from tests.support.polling import eventually

STREAMS_INVALID_TOPOLOGY = 130


def topology(group_id: str, source: str = "sin") -> dict[str, Any]:
    return {"epoch": 0, "subtopologies": [{
        "subtopology_id": "0", "source_topics": [source], "source_topic_regex": [], "repartition_sink_topics": [],
        "state_changelog_topics": [{"name": f"{group_id}-store-changelog", "partitions": 0, "replication_factor": 0,
                                    "topic_configs": [{"key": "cleanup.policy", "value": "compact"}]}],
        "repartition_source_topics": [], "copartition_groups": []}]}


def heartbeat(group_id: str, member_id: str = "m1", epoch: int = 0, **fields: Any) -> object:
    joining = epoch == 0
    return req(88, 1, **{
        "group_id": group_id, "member_id": member_id, "member_epoch": epoch, "endpoint_information_epoch": 0,
        "instance_id": None, "rack_id": None, "rebalance_timeout": 30_000 if joining else -1,
        "topology": topology(group_id) if joining else None, "active_tasks": [] if joining else None,
        "standby_tasks": [] if joining else None, "warmup_tasks": [] if joining else None,
        "process_id": "p1" if joining else None, "user_endpoint": None, "client_tags": None, "task_offsets": None,
        "task_end_offsets": None, "shutdown_application": False, **fields})


def missing_internal(response: Any) -> str | None:
    return next((s.status_detail for s in response.status if s.status_code == Status.MISSING_INTERNAL_TOPICS), None)


@pytest.mark.asyncio
async def test_heartbeat_needs_read_on_the_group_and_describe_on_the_topology_topics(secured) -> None:  # noqa: F811
    await create_topic(secured.admin, "sin", 1)
    assert await secured.create(binding(GROUP, "app-", READ, pattern=PREFIXED),
                                binding(TOPIC, "sin", DESCRIBE)) == [0, 0]
    alice, bob = await secured.login("alice"), await secured.login("bob")
    assert (await bob.request(heartbeat("app-s"))).error_code == GROUP_DENIED
    assert (await alice.request(heartbeat("other-s"))).error_code == GROUP_DENIED
    # READ on the group, DESCRIBE on the source topic, but not on the changelog the topology names.
    assert (await alice.request(heartbeat("app-s"))).error_code == TOPIC_DENIED
    assert await secured.create(binding(TOPIC, "app-s-", DESCRIBE, pattern=PREFIXED)) == [0]
    assert (await alice.request(heartbeat("app-s"))).error_code == 0
    # Kafka checks the names before the ACLs: an internal topic is an invalid topology, whatever
    # the principal may DESCRIBE.
    invalid = heartbeat("app-t", topology=topology("app-t", source="__consumer_offsets"))
    refused = await alice.request(invalid)
    assert refused.error_code == STREAMS_INVALID_TOPOLOGY
    assert "__consumer_offsets" in refused.error_message


@pytest.mark.asyncio
async def test_internal_topics_are_created_only_with_create_on_each_or_on_the_cluster(secured) -> None:  # noqa: F811
    await create_topic(secured.admin, "sin", 2)
    assert await secured.create(binding(GROUP, "app-", READ, pattern=PREFIXED), binding(TOPIC, "sin", DESCRIBE),
                                binding(TOPIC, "app-", DESCRIBE, pattern=PREFIXED)) == [0, 0, 0]
    alice = await secured.login("alice")
    catalog = secured.server.catalog

    # No CREATE: the heartbeat succeeds, nothing is created, and the status says why.
    first = await alice.request(heartbeat("app-a"))
    assert first.error_code == 0
    assert missing_internal(first) == ("Internal topics are missing: app-a-store-changelog; "
                                       "Unauthorized to CREATE on topics app-a-store-changelog.")
    assert catalog.get("app-a-store-changelog") is None
    again = await alice.request(heartbeat("app-a", epoch=first.member_epoch))
    assert "Unauthorized to CREATE on topics app-a-store-changelog." in missing_internal(again)
    assert catalog.get("app-a-store-changelog") is None

    # CREATE on the topic: the next heartbeat creates it, with the partitions the topology implies.
    assert await secured.create(binding(TOPIC, "app-a-store-changelog", CREATE, pattern=LITERAL)) == [0]
    created = await alice.request(heartbeat("app-a", epoch=first.member_epoch))
    assert "Unauthorized" not in (missing_internal(created) or "")
    changelog = catalog.get("app-a-store-changelog")
    assert changelog is not None and changelog.num_partitions == 2
    assert changelog.configs == {"cleanup.policy": "compact"}

    async def ready() -> Any:
        response = await alice.request(heartbeat("app-a", epoch=first.member_epoch))
        return response if missing_internal(response) is None and response.error_code == 0 else None

    await eventually(ready, message="the group sees its changelog")

    # CREATE on the cluster covers every topic.
    assert await secured.create(binding(CLUSTER, "kafka-cluster", CREATE)) == [0]
    other = await alice.request(heartbeat("app-b"))
    assert other.error_code == 0 and "Unauthorized" not in (missing_internal(other) or "")
    assert catalog.get("app-b-store-changelog") is not None


@pytest.mark.asyncio
async def test_describe_needs_describe_on_each_group(secured) -> None:  # noqa: F811
    await create_topic(secured.admin, "sin", 1)
    assert await secured.create(binding(GROUP, "app-", READ, pattern=PREFIXED),
                                binding(GROUP, "app-", DESCRIBE, pattern=PREFIXED),
                                binding(TOPIC, "sin", DESCRIBE), binding(TOPIC, "app-", DESCRIBE, pattern=PREFIXED),
                                ) == [0, 0, 0, 0]
    alice = await secured.login("alice")
    assert (await alice.request(heartbeat("app-s"))).error_code == 0
    described = await alice.request(req(89, 0, group_ids=["app-s", "other-s"], include_authorized_operations=False))
    assert [(g.group_id, g.error_code) for g in described.groups] == [("app-s", 0), ("other-s", GROUP_DENIED)]
