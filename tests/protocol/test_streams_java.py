"""StreamsGroupHeartbeat bodies byte for byte against Kafka's own generated message classes (the
Apache trunk clients): our response v0 and v1 are the bytes Kafka writes, and the request v1 Kafka
writes decodes to what it says."""

from __future__ import annotations

from pathlib import Path

import pytest
from kio.serial import entity_reader

from protocol.build import build
from protocol.client import response_class
from protocol.codec import encode_response
from protocol.newer import StreamsGroupHeartbeatRequestV1
from tests.support.java import require_trunk_clients, run_java

RESPONSE = {
    "member_id": "m-1", "member_epoch": 5, "heartbeat_interval": 5000, "task_offset_interval": 60000,
    "status": [{"status_code": 5, "status_detail": "delayed"}],
    "active_tasks": [{"subtopology_id": "0", "partitions": [0, 2]}], "standby_tasks": [],
    "warmup_tasks": [{"subtopology_id": "0", "partitions": [1]}], "endpoint_information_epoch": 3,
    "partitions_by_user_endpoint": [{"user_endpoint": {"host": "h", "port": 8080},
                                     "active_partitions": [{"topic": "input", "partitions": [0, 2]}],
                                     "standby_partitions": [{"topic": "input", "partitions": [1]}]}],
}


@pytest.fixture(scope="module")
def kafka_bodies(tmp_path_factory: pytest.TempPathFactory) -> list[bytes]:
    jars = require_trunk_clients()
    source = Path(__file__).parent / "java" / "StreamsHeartbeatWire.java"
    lines = run_java(source, jars, tmp_path_factory.mktemp("java")).split()
    return [bytes.fromhex(line) for line in lines]


def body(response: object) -> bytes:
    return encode_response(0, response)[4 + 4 + 1:]  # size, correlation id, header tags


def test_response_v0_is_the_bytes_kafka_writes(kafka_bodies: list[bytes]) -> None:
    assert body(build(response_class(88, 0), RESPONSE)) == kafka_bodies[0]


def test_response_v1_is_the_bytes_kafka_writes(kafka_bodies: list[bytes]) -> None:
    v1 = {**RESPONSE, "acceptable_recovery_lag": 2**33, "topology_description_required": True}
    assert body(build(response_class(88, 1), v1)) == kafka_bodies[1]


def test_request_v1_written_by_kafka_decodes_to_what_it_says(kafka_bodies: list[bytes]) -> None:
    request, end = entity_reader(StreamsGroupHeartbeatRequestV1)(kafka_bodies[2], 0)
    assert end == len(kafka_bodies[2])
    assert (request.group_id, request.member_id, request.process_id) == ("app", "m-1", "p-1")
    assert request.topology.subtopologies[0].state_changelog_topics[0].topic_configs[0].value == "compact"
    assert request.user_endpoint.port == 65535 and request.client_tags[0].key == "zone"
    assert request.task_offsets[0].offset == 2**40 and request.task_end_offsets[0].offset == 2**41
    assert request.active_tasks == () and request.instance_id is None
