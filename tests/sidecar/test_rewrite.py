"""Endpoint rewriting on real kio encodings: an upstream response is encoded as the upstream would
send it, rewritten, and decoded as a client would read it."""

from __future__ import annotations

from typing import Any

import pytest

from coordinator.sidecar.rewrite import needs_rewrite, rewrite
from protocol.build import build
from protocol.codec import encode_response
from protocol.schemas import response_schema
from tests.support.wire import decode_response

UPSTREAM = {1: ("10.0.0.1", 9092), 2: ("10.0.0.2", 9092)}


class Endpoints:
    def address(self, node_id: int) -> tuple[str, int]:
        return "sidecar.local", 19092 + node_id

    @property
    def coordinator(self) -> tuple[int, str, int]:
        return 1_000_000, "sidecar.local", 9092


def through_sidecar(api_key: int, version: int, description: dict[str, Any]) -> Any:
    upstream_frame = encode_response(77, build(response_schema(api_key, version), description))
    body = upstream_frame[4:]
    client_frame = rewrite(api_key, version, body, 5, Endpoints())
    correlation_id, response = decode_response(api_key, version, client_frame[4:])
    assert correlation_id == 5
    return response


@pytest.mark.parametrize("version", [0, 1, 9, 12, 13])
def test_metadata_brokers_become_our_listeners_plus_the_coordinator(version: int) -> None:
    response = through_sidecar(3, version, {
        "brokers": [{"node_id": n, "host": h, "port": p, "rack": None} for n, (h, p) in UPSTREAM.items()],
        "controller_id": 2, "cluster_id": "c", "topics": []})
    assert {(int(b.node_id), b.host, int(b.port)) for b in response.brokers} == {
        (1, "sidecar.local", 19093), (2, "sidecar.local", 19094), (1_000_000, "sidecar.local", 9092)}


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
    frame = encode_response(77, build(response_schema(0, 11), {"responses": [], "node_endpoints": []}))
    assert rewrite(0, 11, frame[4:], 77, Endpoints()) == frame
