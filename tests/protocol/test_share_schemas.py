"""The share-group APIs (KIP-932) as Kafka 4.3 speaks them, through this project's codec.

kio 0.6.5 generates every version Kafka 4.3 serves (ShareGroupHeartbeat v1, ShareGroupDescribe v1,
ShareFetch and ShareAcknowledge v1-v2, DescribeShareGroupOffsets v0-v1, Alter- and
DeleteShareGroupOffsets v0), so `protocol/` declares none of them. These tests pin that: each request
is framed as a client frames it and decoded by the server's `RequestCodec`, each response is encoded
by the server and read back as a client reads it, and the fields Kafka added per version (v2's
acquire mode and renew flag, the lock timeout, the lag) are carried.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from protocol.build import build
from protocol.client import decode_response, encode_request
from protocol.codec import RequestCodec, encode_response
from protocol.schemas import api_name, request_schema, response_schema

SHARE_APIS = {76: (1, 1), 77: (1, 1), 78: (1, 2), 79: (1, 2), 90: (0, 1), 91: (0, 0), 92: (0, 0)}
CODEC = RequestCodec(SHARE_APIS)
TOPIC = uuid.UUID("5b1f0a2e-7f43-4f43-9a8e-0c1d2e3f4a5b")

ACKS = [{"first_offset": 10, "last_offset": 12, "acknowledge_types": [1, 2, 4]}]
REQUESTS: dict[int, dict[str, Any]] = {
    76: {"group_id": "q", "member_id": "m" * 22, "member_epoch": 0, "rack_id": None,
         "subscribed_topic_names": ["orders"]},
    77: {"group_ids": ["q"], "include_authorized_operations": True},
    78: {"group_id": "q", "member_id": "m1", "share_session_epoch": 3, "max_wait": 500, "min_bytes": 1,
         "max_bytes": 1 << 20, "max_records": 500, "batch_size": 500, "share_acquire_mode": 1,
         "is_renew_ack": True,
         "topics": [{"topic_id": TOPIC, "partitions": [{"partition_index": 1, "acknowledgement_batches": ACKS}]}],
         "forgotten_topics_data": [{"topic_id": TOPIC, "partitions": [0]}]},
    79: {"group_id": "q", "member_id": "m1", "share_session_epoch": -1, "is_renew_ack": True,
         "topics": [{"topic_id": TOPIC, "partitions": [{"partition_index": 1, "acknowledgement_batches": ACKS}]}]},
    90: {"groups": [{"group_id": "q", "topics": None}, {"group_id": "r", "topics": [
        {"topic_name": "orders", "partitions": [0, 1]}]}]},
    91: {"group_id": "q", "topics": [{"topic_name": "orders", "partitions": [
        {"partition_index": 0, "start_offset": 42}]}]},
    92: {"group_id": "q", "topics": [{"topic_name": "orders"}]},
}
RESPONSES: dict[int, dict[str, Any]] = {
    76: {"error_code": 0, "member_id": "m", "member_epoch": 7, "heartbeat_interval": 5000,
         "assignment": {"topic_partitions": [{"topic_id": TOPIC, "partitions": [0, 1]}]}},
    77: {"groups": [{"group_id": "q", "group_state": "Stable", "group_epoch": 3, "assignment_epoch": 3,
                     "assignor_name": "simple", "authorized_operations": -2147483648,
                     "members": [{"member_id": "m", "member_epoch": 3, "client_id": "c", "client_host": "/h",
                                  "subscribed_topic_names": ["orders"],
                                  "assignment": {"topic_partitions": [
                                      {"topic_id": TOPIC, "topic_name": "orders", "partitions": [0]}]}}]}]},
    78: {"error_code": 0, "acquisition_lock_timeout": 30000, "responses": [{"topic_id": TOPIC, "partitions": [
        {"partition_index": 1, "acknowledge_error_code": 121, "acknowledge_error_message": "not acquired",
         "current_leader": {"leader_id": 1, "leader_epoch": 0}, "records": b"",
         "acquired_records": [{"first_offset": 0, "last_offset": 9, "delivery_count": 2}]}]}],
         "node_endpoints": []},
    79: {"error_code": 123, "acquisition_lock_timeout": 30000, "responses": [{"topic_id": TOPIC, "partitions": [
        {"partition_index": 1, "error_code": 0, "current_leader": {"leader_id": 1, "leader_epoch": 0}}]}],
         "node_endpoints": [{"node_id": 1, "host": "127.0.0.1", "port": 9092}]},
    90: {"groups": [{"group_id": "q", "topics": [{"topic_name": "orders", "topic_id": TOPIC, "partitions": [
        {"partition_index": 0, "start_offset": 42, "leader_epoch": 0, "lag": 8}]}]}]},
    91: {"error_code": 0, "responses": [{"topic_name": "orders", "topic_id": TOPIC, "partitions": [
        {"partition_index": 0, "error_code": 68, "error_message": "not empty"}]}]},
    92: {"error_code": 69, "error_message": "no such group", "responses": []},
}
VERSIONS = [(key, version) for key, (low, high) in SHARE_APIS.items() for version in range(low, high + 1)]


def _id(case: tuple[int, int]) -> str:
    return f"{api_name(case[0])}v{case[1]}"


@pytest.mark.parametrize("case", VERSIONS, ids=_id)
def test_request_decodes_as_the_client_encoded_it(case: tuple[int, int]) -> None:
    key, version = case
    request = build(request_schema(key, version), REQUESTS[key])
    frame = encode_request(key, 5, "share-client", request)[4:]
    decoded = CODEC.decode(frame)
    assert (decoded.api_key, decoded.api_version, decoded.correlation_id) == (key, version, 5)
    assert decoded.body == request


@pytest.mark.parametrize("case", VERSIONS, ids=_id)
def test_response_reads_back_as_the_server_encoded_it(case: tuple[int, int]) -> None:
    key, version = case
    response = build(response_schema(key, version), RESPONSES[key])
    correlation_id, decoded = decode_response(key, version, encode_response(11, response)[4:])
    assert correlation_id == 11
    assert decoded == response


def test_share_fetch_v2_carries_the_acquire_mode_and_the_renew_flag_that_v1_lacks() -> None:
    v2 = CODEC.decode(encode_request(78, 1, None, build(request_schema(78, 2), REQUESTS[78]))[4:]).body
    assert (int(v2.share_acquire_mode), v2.is_renew_ack) == (1, True)
    assert [int(t) for t in v2.topics[0].partitions[0].acknowledgement_batches[0].acknowledge_types] == [1, 2, 4]
    v1 = CODEC.decode(encode_request(78, 1, None, build(request_schema(78, 1), REQUESTS[78]))[4:]).body
    assert not hasattr(v1, "share_acquire_mode") and not hasattr(v1, "is_renew_ack")


def test_share_acknowledge_v2_answers_the_lock_timeout_and_v1_does_not() -> None:
    v2 = build(response_schema(79, 2), RESPONSES[79])
    assert v2.acquisition_lock_timeout.total_seconds() == 30
    assert not hasattr(build(response_schema(79, 1), RESPONSES[79]), "acquisition_lock_timeout")


def test_describe_share_group_offsets_v1_adds_the_lag_and_keeps_null_topics_for_all() -> None:
    request = CODEC.decode(encode_request(90, 1, None, build(request_schema(90, 1), REQUESTS[90]))[4:]).body
    assert request.groups[0].topics is None
    assert [p for p in request.groups[1].topics[0].partitions] == [0, 1]
    _, v1 = decode_response(90, 1, encode_response(1, build(response_schema(90, 1), RESPONSES[90]))[4:])
    assert v1.groups[0].topics[0].partitions[0].lag == 8
    assert not hasattr(build(response_schema(90, 0), RESPONSES[90]).groups[0].topics[0].partitions[0], "lag")


def test_version_0_that_kafka_removed_is_refused() -> None:
    from protocol.errors import UnsupportedVersion

    frame = encode_request(78, 1, None, build(request_schema(78, 1), REQUESTS[78]))[4:]
    as_v0 = frame[:2] + b"\x00\x00" + frame[4:]  # api key, then the version: 0 (4.0's early access)
    with pytest.raises(UnsupportedVersion):
        CODEC.decode(as_v0)

def test_share_fetch_records_are_sent_empty_not_null() -> None:
    # Kafka's schema makes PartitionData.Records nullable; kio 0.6.5 types it as non-nullable and
    # cannot write a null, so a partition without data (an ack-only answer) carries b"", which a
    # Java client reads as an empty record set just the same.
    partition = {"partition_index": 0, "records": b"", "acquired_records": []}
    response = build(response_schema(78, 2), {"responses": [{"topic_id": TOPIC, "partitions": [partition]}]})
    _, decoded = decode_response(78, 2, encode_response(3, response)[4:])
    assert decoded.responses[0].partitions[0].records in (b"", None)
    with pytest.raises(TypeError):
        encode_response(3, build(response_schema(78, 2), {"responses": [{"topic_id": TOPIC, "partitions": [
            {**partition, "records": None}]}]}))
