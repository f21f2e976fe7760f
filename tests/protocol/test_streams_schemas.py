"""StreamsGroupHeartbeat v0-v1 and StreamsGroupDescribe v0 through the codec: v0 is kio's own, v1
(`protocol.newer`) is laid out as Apache trunk's message JSON says."""

from __future__ import annotations

import struct

import pytest
from kio.schema.streams_group_describe.v0.request import StreamsGroupDescribeRequest
from kio.schema.streams_group_heartbeat.v0.request import StreamsGroupHeartbeatRequest

from protocol.build import build
from protocol.client import decode_response, encode_request, request_class, response_class
from protocol.codec import RequestCodec, encode_response
from protocol.errors import MalformedRequest
from protocol.newer import StreamsGroupHeartbeatRequestV1, StreamsGroupHeartbeatResponseV1

CODEC = RequestCodec({88: (0, 1), 89: (0, 0)})

JOIN = {
    "group_id": "app", "member_id": "m-1", "member_epoch": 0, "endpoint_information_epoch": 0,
    "rebalance_timeout": 300000, "process_id": "p-1",
    "topology": {"epoch": 0, "subtopologies": [{
        "subtopology_id": "0", "source_topics": ["input"],
        "state_changelog_topics": [{"name": "app-store-changelog", "topic_configs": [
            {"key": "cleanup.policy", "value": "compact"}]}],
        "repartition_sink_topics": [], "repartition_source_topics": [],
        "copartition_groups": [],
    }]},
    "active_tasks": [], "standby_tasks": [], "warmup_tasks": [],
    "user_endpoint": {"host": "localhost", "port": 65535},
    "client_tags": [{"key": "zone", "value": "a"}],
    "task_offsets": [{"subtopology_id": "0", "partition": 3, "offset": 2**40}],
    "task_end_offsets": [{"subtopology_id": "0", "partition": 3, "offset": 2**41}],
}


def test_the_codec_serves_heartbeat_v1_with_the_entity_of_protocol_newer() -> None:
    assert request_class(88, 1) is StreamsGroupHeartbeatRequestV1
    assert response_class(88, 1) is StreamsGroupHeartbeatResponseV1
    assert request_class(88, 0) is StreamsGroupHeartbeatRequest


def test_heartbeat_request_v1_has_v0s_fields_and_bytes() -> None:
    v0 = build(StreamsGroupHeartbeatRequest, JOIN)
    v1 = build(StreamsGroupHeartbeatRequestV1, JOIN)
    frame0 = encode_request(88, 7, "c", v0)[4:]
    frame1 = encode_request(88, 7, "c", v1)[4:]
    # Same header but the version, same body: v1 only exists to negotiate the response.
    assert frame0[:2] == frame1[:2] and struct.unpack(">h", frame1[2:4]) == (1,)
    assert frame0[4:] == frame1[4:]
    decoded = CODEC.decode(frame1)
    assert decoded.api_version == 1
    body = decoded.body
    assert type(body) is StreamsGroupHeartbeatRequestV1
    assert body.task_offsets[0].offset == 2**40 and body.task_end_offsets[0].offset == 2**41
    assert body.user_endpoint.port == 65535
    assert body.topology.subtopologies[0].state_changelog_topics[0].topic_configs[0].value == "compact"
    assert CODEC.decode(frame0).body == v0


RESPONSE = {
    "member_id": "m-1", "member_epoch": 5, "heartbeat_interval": 5000, "task_offset_interval": 60000,
    "acceptable_recovery_lag": 2**33, "status": [{"status_code": 5, "status_detail": "delayed"}],
    "active_tasks": [{"subtopology_id": "0", "partitions": [0, 2]}], "standby_tasks": [],
    "warmup_tasks": [{"subtopology_id": "0", "partitions": [1]}], "topology_description_required": True,
    "endpoint_information_epoch": 3,
    "partitions_by_user_endpoint": [{"user_endpoint": {"host": "h", "port": 8080},
                                     "active_partitions": [{"topic": "input", "partitions": [0, 2]}],
                                     "standby_partitions": [{"topic": "input", "partitions": [1]}]}],
}


def test_heartbeat_response_v1_round_trips_with_an_int64_recovery_lag_and_the_description_flag() -> None:
    response = build(StreamsGroupHeartbeatResponseV1, RESPONSE)
    correlation_id, decoded = decode_response(88, 1, encode_response(11, response)[4:])
    assert correlation_id == 11 and decoded == response
    assert decoded.acceptable_recovery_lag == 2**33
    assert decoded.topology_description_required is True
    assert decoded.warmup_tasks[0].partitions == (1,)


def test_heartbeat_response_v1_lays_out_fields_as_trunk_says() -> None:
    """v0: ... HeartbeatIntervalMs, AcceptableRecoveryLag(int32), TaskOffsetIntervalMs, Status ...;
    v1: ... HeartbeatIntervalMs, TaskOffsetIntervalMs, AcceptableRecoveryLag(int64), Status ... and
    TopologyDescriptionRequired after WarmupTasks. Read the v1 bytes by hand."""
    minimal = {"member_id": "m", "member_epoch": 1, "heartbeat_interval": 5000, "task_offset_interval": 60000,
               "acceptable_recovery_lag": 10000, "status": [], "topology_description_required": True,
               "endpoint_information_epoch": 9}
    body = encode_response(0, build(StreamsGroupHeartbeatResponseV1, minimal))[4 + 4 + 1:]  # size, id, header tags
    throttle, error = struct.unpack_from(">ih", body, 0)
    assert (throttle, error) == (0, 0)
    pos = 6
    assert body[pos] == 0  # ErrorMessage: null compact string
    pos += 1
    assert body[pos:pos + 2] == b"\x02m"  # MemberId
    pos += 2
    assert struct.unpack_from(">iiiq", body, pos) == (1, 5000, 60000, 10000)
    pos += 20
    assert body[pos:pos + 5] == b"\x01\x00\x00\x00\x01"  # Status [], then three null task lists, then True
    assert struct.unpack_from(">i", body, pos + 5) == (9,)
    assert body[pos + 9:] == b"\x00\x00"  # PartitionsByUserEndpoint null, no tagged fields

    v0 = encode_response(0, build(response_class(88, 0), {**minimal, "acceptable_recovery_lag": 7}))[9:]
    assert struct.unpack_from(">iii", v0, 6 + 1 + 2 + 4) == (5000, 7, 60000)
    assert len(v0) == len(body) - 4 - 1  # int32 instead of int64, no flag


@pytest.mark.parametrize("version", [0, 1])
def test_heartbeat_response_decodes_at_both_versions_from_one_description(version: int) -> None:
    response = build(response_class(88, version), {**RESPONSE, "acceptable_recovery_lag": 0})
    _, decoded = decode_response(88, version, encode_response(1, response)[4:])
    assert decoded.member_epoch == 5 and decoded.active_tasks[0].partitions == (0, 2)


def test_describe_v0_round_trips_through_kio() -> None:
    request = StreamsGroupDescribeRequest(group_ids=("a", "b"), include_authorized_operations=True)
    decoded = CODEC.decode(encode_request(89, 3, "c", request)[4:])
    assert decoded.body == request
    response = build(response_class(89, 0), {"groups": [{
        "group_id": "a", "group_state": "Stable", "group_epoch": 4, "assignment_epoch": 4,
        "topology": {"epoch": 0, "subtopologies": [{"subtopology_id": "0", "source_topics": ["input"]}]},
        "members": [{"member_id": "m", "member_epoch": 4, "client_id": "c", "client_host": "/127.0.0.1",
                     "topology_epoch": 0, "process_id": "p", "client_tags": [], "task_offsets": [],
                     "task_end_offsets": [],
                     "assignment": {"active_tasks": [{"subtopology_id": "0", "partitions": [0]}],
                                    "standby_tasks": [], "warmup_tasks": []},
                     "target_assignment": {"active_tasks": [], "standby_tasks": [], "warmup_tasks": []},
                     "is_classic": False}],
    }]})
    _, back = decode_response(89, 0, encode_response(2, response)[4:])
    assert back == response
    assert back.groups[0].members[0].assignment.active_tasks[0].partitions == (0,)


def test_the_guard_walks_into_a_present_topology_and_skips_a_null_one() -> None:
    """A nullable struct is an int8 marker then the struct: the guard reads the marker, so a join
    heartbeat's topology is walked (its arrays checked) and a null one is skipped."""
    plain = encode_request(88, 1, "c", build(StreamsGroupHeartbeatRequestV1, {**JOIN, "topology": None}))[4:]
    assert CODEC.decode(plain).body.topology is None
    frame = bytearray(encode_request(88, 1, "c", build(StreamsGroupHeartbeatRequestV1, JOIN))[4:])
    at = frame.index(b"\x02\x020\x02\x06input")  # Subtopologies: one, then its id "0"
    frame[at:at + 1] = b"\xff\xff\xff\xff\x0f"  # a 5-byte varint count far beyond the frame
    with pytest.raises(MalformedRequest, match="Tried to allocate a collection of size"):
        CODEC.decode(bytes(frame))
