"""ShareGroupDescribe and DescribeShareGroupOffsets descriptions, built into the real v1 response
entities and encoded, so they are shapes a client can read."""

from __future__ import annotations

from uuid import UUID

from coordinator.core.errors import ErrorCode
from coordinator.core.share.acknowledgement import AckBatch, acknowledge
from coordinator.core.share.acquisition import acquire
from coordinator.core.share.describe import describe_group, describe_offsets
from coordinator.core.share.membership import HeartbeatRequest, ShareGroups, heartbeat
from protocol.build import build
from protocol.codec import encode_response
from protocol.schemas import response_schema

from .twin import GROUP, TOPIC, Twin


def test_a_group_described_with_its_members_and_assignment() -> None:
    groups = ShareGroups()
    topics = {"orders": (TOPIC, 1)}
    heartbeat(groups, HeartbeatRequest(GROUP, "m1", 0, subscribed_topic_names=["orders"], client_id="c"), topics,
              lambda t: [0], 0)
    entry = describe_group(GROUP, groups.get(GROUP), {TOPIC: "orders"})
    assert (entry["group_state"], entry["assignor_name"], entry["group_epoch"]) == ("Stable", "simple", 1)
    assert entry["members"][0]["assignment"]["topic_partitions"] == [
        {"topic_id": TOPIC, "topic_name": "orders", "partitions": [0]}]
    unknown = describe_group("nope", None, {})
    assert unknown["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND
    response = build(response_schema(77, 1), {"groups": [entry, unknown]})
    assert len(encode_response(1, response)) > 50


def test_offsets_start_and_lag_per_partition() -> None:
    t = Twin(start_offset=10)
    t.log_records(acquire(t.p, "a", [(10, 19)], 10, 0, t.config).records)
    t.log_records(acknowledge(t.p, "a", [AckBatch(10, 11, (1,)), AckBatch(15, 15, (1,))], 0, t.config).records)
    groups = ShareGroups()
    heartbeat(groups, HeartbeatRequest(GROUP, "m1", 0, subscribed_topic_names=["orders"]), {}, lambda t: [], 0)
    entry = describe_offsets(GROUP, groups.get(GROUP), t.partitions,
                             [("orders", TOPIC, [0, 1]), ("gone", None, [0])], lambda tid, p: 30)
    rows = entry["topics"][0]["partitions"]
    assert (rows[0]["start_offset"], rows[0]["lag"]) == (12, 30 - 12 - 1)
    assert (rows[1]["start_offset"], rows[1]["lag"]) == (-1, -1), "no share state"
    assert entry["topics"][1]["topic_id"] == UUID(int=0)
    response = build(response_schema(90, 1), {"groups": [entry]})
    assert len(encode_response(1, response)) > 30
    assert describe_offsets("nope", None, t.partitions, [], lambda tid, p: 0)["error_code"] == 69
