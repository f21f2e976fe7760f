"""What the share group offsets APIs check, as Kafka's KafkaApis handlers do, with raw kio requests
from a SASL-authenticated principal: DescribeShareGroupOffsets needs DESCRIBE on the group and leaves
out topics it may not DESCRIBE; AlterShareGroupOffsets needs READ on the group and on each topic;
DeleteShareGroupOffsets needs DELETE on the group and READ on each topic; the private
DescribeSharePartitions is authorized as ShareGroupDescribe (DESCRIBE on the group)."""

from __future__ import annotations

import pytest

from protocol.private import DESCRIBE_SHARE_PARTITIONS
from tests.security import test_authorization
from tests.security.test_authorization import (
    DELETE,
    DESCRIBE,
    GROUP,
    GROUP_DENIED,
    PREFIXED,
    READ,
    TOPIC,
    TOPIC_DENIED,
    binding,
    req,
)

DESCRIBE_OFFSETS, ALTER_OFFSETS, DELETE_OFFSETS = 90, 91, 92
secured = test_authorization.secured  # the fixture: a SASL server with an authorizer, alice and bob


def alter(group: str, *topics: str):
    return req(ALTER_OFFSETS, 0, group_id=group, topics=[
        {"topic_name": t, "partitions": [{"partition_index": 0, "start_offset": 0}]} for t in topics])


def delete(group: str, *topics: str):
    return req(DELETE_OFFSETS, 0, group_id=group, topics=[{"topic_name": t} for t in topics])


def describe(group: str, *topics: str):
    named = [{"topic_name": t, "partitions": [0]} for t in topics] if topics else None
    return req(DESCRIBE_OFFSETS, 1, groups=[{"group_id": group, "topics": named}])


@pytest.mark.asyncio
async def test_share_group_offsets_apis_check_kafkas_operations(secured) -> None:
    root = secured.admin
    for topic in ("orders", "secret"):
        created = await root.request(req(19, 7, topics=[{"name": topic, "num_partitions": 1, "replication_factor": 1,
                                                         "assignments": [], "configs": []}],
                                         timeout=5000, validate_only=False))
        assert created.topics[0].error_code == 0
    for group in ("app-q", "hidden-q"):  # root (a super user) makes two empty share groups
        assert (await root.request(alter(group, "orders", "secret"))).error_code == 0
    alice = await secured.login("alice")

    assert (await alice.request(describe("app-q"))).groups[0].error_code == GROUP_DENIED
    assert (await alice.request(alter("app-q", "orders"))).error_code == GROUP_DENIED
    assert (await alice.request(delete("app-q", "orders"))).error_code == GROUP_DENIED

    assert await secured.create(binding(GROUP, "app-", DESCRIBE, pattern=PREFIXED),
                                binding(TOPIC, "orders", DESCRIBE)) == [0, 0]
    for asked in (describe("app-q"), describe("app-q", "orders", "secret")):
        (group,) = (await alice.request(asked)).groups
        assert group.error_code == 0
        assert [t.topic_name for t in group.topics] == ["orders"], "secret is left out, without an error"
    assert (await alice.request(describe("hidden-q"))).groups[0].error_code == GROUP_DENIED
    private = await alice.request(req(DESCRIBE_SHARE_PARTITIONS, 0, groups=["app-q", "hidden-q"]))
    assert [(g.group_id, g.error_code) for g in private.groups] == [("app-q", 0), ("hidden-q", GROUP_DENIED)]
    assert (await alice.request(alter("app-q", "orders"))).error_code == GROUP_DENIED, "DESCRIBE is not READ"

    assert await secured.create(binding(GROUP, "app-", READ, pattern=PREFIXED), binding(TOPIC, "orders", READ)) == [0, 0]
    altered = await alice.request(alter("app-q", "orders", "secret"))
    assert altered.error_code == 0
    assert [(r.topic_name, [p.error_code for p in r.partitions]) for r in altered.responses] == [
        ("orders", [0]), ("secret", [TOPIC_DENIED])]
    assert (await alice.request(delete("app-q", "orders"))).error_code == GROUP_DENIED, "READ is not DELETE"

    assert await secured.create(binding(GROUP, "app-", DELETE, pattern=PREFIXED)) == [0]
    deleted = await alice.request(delete("app-q", "orders", "secret"))
    assert deleted.error_code == 0
    assert [(r.topic_name, r.error_code) for r in deleted.responses] == [("orders", 0), ("secret", TOPIC_DENIED)]
