"""Endpoint rewriting on real kio encodings: an upstream response is encoded as the upstream would
send it, rewritten, and decoded as a client would read it."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator.sidecar.rewrite import needs_rewrite, rewrite
from coordinator.sidecar.wire import fetch_tags_offset, find_tag, top_level_tags
from protocol.build import build
from protocol.codec import encode_response
from protocol.schemas import response_schema
from tests.support.wire import decode_response

UPSTREAM = {1: ("10.0.0.1", 9092), 2: ("10.0.0.2", 9092)}


class Endpoints:
    def __init__(self, shards: int = 1) -> None:
        self.shards = shards

    def address(self, node_id: int) -> tuple[str, int]:
        return "sidecar.local", 19092 + node_id

    @property
    def coordinators(self) -> list[tuple[int, str, int]]:
        return [(1_000_000 + k, "sidecar.local", 9092 + k) for k in range(self.shards)]


def through_sidecar(api_key: int, version: int, description: dict[str, Any], shards: int = 1) -> Any:
    upstream_frame = bytearray(encode_response(77, build(response_schema(api_key, version), description)))
    client_frame = rewrite(api_key, version, upstream_frame, 5, Endpoints(shards))
    correlation_id, response = decode_response(api_key, version, bytes(client_frame[4:]))
    assert correlation_id == 5
    return response


@pytest.mark.parametrize("version", [0, 1, 9, 12, 13])
def test_metadata_brokers_become_our_listeners_plus_the_coordinator(version: int) -> None:
    response = through_sidecar(3, version, {
        "brokers": [{"node_id": n, "host": h, "port": p, "rack": None} for n, (h, p) in UPSTREAM.items()],
        "controller_id": 2, "cluster_id": "c", "topics": []})
    assert {(int(b.node_id), b.host, int(b.port)) for b in response.brokers} == {
        (1, "sidecar.local", 19093), (2, "sidecar.local", 19094), (1_000_000, "sidecar.local", 9092)}


@pytest.mark.parametrize("version", [1, 12])
def test_metadata_lists_every_shard_coordinator_node(version: int) -> None:
    response = through_sidecar(3, version, {
        "brokers": [{"node_id": n, "host": h, "port": p, "rack": None} for n, (h, p) in UPSTREAM.items()],
        "controller_id": 2, "cluster_id": "c", "topics": []}, shards=3)
    assert [(int(b.node_id), b.host, int(b.port)) for b in response.brokers] == [
        (1, "sidecar.local", 19093), (2, "sidecar.local", 19094), (1_000_000, "sidecar.local", 9092),
        (1_000_001, "sidecar.local", 9093), (1_000_002, "sidecar.local", 9094)]


@pytest.mark.parametrize("version", [1, 9, 10, 12])
def test_the_topics_a_metadata_answer_describes_are_told(version: int) -> None:
    orders = uuid.uuid4()
    partitions = [{"error_code": 0, "partition_index": i, "leader_id": 1, "replica_nodes": [1], "isr_nodes": [1]}
                  for i in range(3)]
    upstream_frame = bytearray(encode_response(77, build(response_schema(3, version), {
        "brokers": [{"node_id": 1, "host": "10.0.0.1", "port": 9092, "rack": None}], "controller_id": 1,
        "topics": [{"error_code": 0, "name": "orders", "topic_id": orders, "partitions": partitions},
                   {"error_code": 3, "name": "missing", "partitions": []}]})))
    told: list[tuple[str, uuid.UUID | None, int]] = []
    rewrite(3, version, upstream_frame, 5, Endpoints(), seen=lambda topics: told.extend(topics))
    # An error at topic level describes nothing; before v10 an answer carries no topic ids.
    assert told == [("orders", orders if version >= 10 else None, 3)]


def test_describe_cluster_lists_every_shard_coordinator_node() -> None:
    response = through_sidecar(60, 1, {
        "brokers": [{"broker_id": n, "host": h, "port": p} for n, (h, p) in UPSTREAM.items()],
        "controller_id": 1, "cluster_id": "c", "endpoint_type": 1}, shards=2)
    assert [(int(b.broker_id), int(b.port)) for b in response.brokers] == [
        (1, 19093), (2, 19094), (1_000_000, 9092), (1_000_001, 9093)]


def test_describe_cluster_brokers_are_rewritten() -> None:
    response = through_sidecar(60, 1, {
        "brokers": [{"broker_id": n, "host": h, "port": p} for n, (h, p) in UPSTREAM.items()],
        "controller_id": 1, "cluster_id": "c", "endpoint_type": 1})
    assert {(b.host, int(b.port)) for b in response.brokers} == {
        ("sidecar.local", 19093), ("sidecar.local", 19094), ("sidecar.local", 9092)}


@pytest.mark.parametrize(("api_key", "version"), [(0, 10), (0, 12), (1, 16), (1, 17)])
def test_leader_hints_of_produce_and_fetch_are_rewritten(api_key: int, version: int) -> None:
    assert needs_rewrite(api_key, version)
    response = through_sidecar(api_key, version, {
        "responses": [], "node_endpoints": [{"node_id": 2, "host": "10.0.0.2", "port": 9092, "rack": None}]})
    assert [(int(e.node_id), e.host, int(e.port)) for e in response.node_endpoints] == [(2, "sidecar.local", 19094)]


def test_responses_without_endpoints_pass_through_byte_for_byte() -> None:
    assert not needs_rewrite(0, 9) and not needs_rewrite(1, 15) and not needs_rewrite(9, 8)
    frame = encode_response(3, build(response_schema(0, 11), {"responses": [], "node_endpoints": []}))
    assert rewrite(0, 11, bytearray(frame), 77, Endpoints()) == frame[:4] + (77).to_bytes(4, "big") + frame[8:]


partition_errors = st.lists(st.tuples(st.integers(0, 100), st.one_of(st.none(), st.text(max_size=5))), max_size=2)


@st.composite
def produce_response(draw: st.DrawFn) -> dict[str, Any]:
    return {"throttle_time": draw(st.integers(0, 100)), "responses": [
        {"name": draw(st.text("abc", min_size=1, max_size=4)), "topic_id": uuid.UUID(int=draw(st.integers(0, 2**64))),
         "partition_responses": [
             {"index": i, "error_code": draw(st.sampled_from([0, 6])), "base_offset": draw(st.integers(-1, 10**6)),
              "log_start_offset": 0, "error_message": draw(st.one_of(st.none(), st.text(max_size=8))),
              "record_errors": [{"batch_index": b, "batch_index_error_message": m} for b, m in draw(partition_errors)],
              "current_leader": draw(st.sampled_from([{"leader_id": -1, "leader_epoch": -1},
                                                       {"leader_id": 2, "leader_epoch": 7}]))}
             for i in range(draw(st.integers(0, 3)))]}
        for _ in range(draw(st.integers(0, 3)))],
        "node_endpoints": draw(st.sampled_from([[], [{"node_id": 2, "host": "10.0.0.2", "port": 9092}]]))}


@st.composite
def fetch_response(draw: st.DrawFn) -> dict[str, Any]:
    return {"throttle_time": 0, "error_code": 0, "session_id": draw(st.integers(0, 1000)), "responses": [
        {"topic_id": uuid.UUID(int=draw(st.integers(0, 2**64))), "partitions": [
            {"partition_index": i, "error_code": draw(st.sampled_from([0, 6])), "high_watermark": 10,
             "last_stable_offset": 10, "log_start_offset": 0, "preferred_read_replica": -1,
             "aborted_transactions": draw(st.sampled_from([None, [], [{"producer_id": 1, "first_offset": 2}]])),
             "records": draw(st.one_of(st.none(), st.binary(max_size=300))),
             "current_leader": draw(st.sampled_from([{"leader_id": -1, "leader_epoch": -1},
                                                      {"leader_id": 1, "leader_epoch": 3}]))}
            for i in range(draw(st.integers(0, 3)))]}
        for _ in range(draw(st.integers(0, 3)))],
        "node_endpoints": draw(st.sampled_from([[], [{"node_id": 1, "host": "10.0.0.1", "port": 9092}]]))}


@settings(max_examples=40)
@given(st.sampled_from([10, 11, 12, 13]), produce_response())
def test_leader_hints_are_found_in_produce_responses_without_decoding(version: int, description: dict[str, Any]) -> None:
    body = encode_response(3, build(response_schema(0, version), description))
    assert top_level_tags(0, version, body) == ({0} if description["node_endpoints"] else set())


@settings(max_examples=40)
@given(st.sampled_from([16, 17, 18]), fetch_response())
def test_leader_hints_are_found_in_fetch_responses_without_decoding(version: int, description: dict[str, Any]) -> None:
    body = encode_response(3, build(response_schema(1, version), description))
    assert top_level_tags(1, version, body) == ({0} if description["node_endpoints"] else set())


def test_a_walk_that_does_not_end_at_the_end_gives_up() -> None:
    body = encode_response(3, build(response_schema(1, 16), {"responses": []}))
    assert top_level_tags(1, 16, body + b"\x00") is None
    assert top_level_tags(1, 16, body[:-3]) is None


@settings(max_examples=40)
@given(st.sampled_from([13, 15, 16, 17, 18]), fetch_response(), st.data())
def test_a_streamed_fetch_prefix_never_reaches_the_top_level_tags(version: int, description: dict[str, Any],
                                                                   data: st.DataObject) -> None:
    """What a large Fetch response may stream before it is complete: every byte of any prefix,
    up to where the top-level tagged fields (the leader hints) begin, and not one byte more."""
    if version < 16:
        description = {**description, "node_endpoints": []}
    body = encode_response(3, build(response_schema(1, version), description))
    tags_at = fetch_tags_offset(body)
    assert tags_at is not None
    found = find_tag(body, tags_at, 0)
    assert found is not None and (found[0] >= 0) == bool(description["node_endpoints"])
    length = data.draw(st.integers(0, len(body)))
    prefix_tags_at = fetch_tags_offset(memoryview(body)[:length])
    safe = length if prefix_tags_at is None else prefix_tags_at
    assert safe <= tags_at
    assert prefix_tags_at is None or prefix_tags_at == tags_at
