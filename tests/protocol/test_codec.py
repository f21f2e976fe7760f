"""Request decoding against the served table, and response building for every version."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kio.index import load_response_schema
from kio.schema.heartbeat.v4.request import HeartbeatRequest

from protocol.build import build
from protocol.client import encode_request
from protocol.codec import RequestCodec, encode_response
from protocol.errors import MalformedRequest, ProtocolError, UnknownApiKey, UnsupportedVersion
from tests.support.wire import decode_response

CODEC = RequestCodec({12: (0, 4), 18: (0, 4), 3: (0, 13)})


def test_decodes_flexible_request_with_header_v2() -> None:
    frame = encode_request(12, 9, "cid", HeartbeatRequest(group_id="g", generation_id=3, member_id="m"))[4:]
    decoded = CODEC.decode(frame)
    assert (decoded.api_key, decoded.api_version, decoded.correlation_id, decoded.client_id) == (12, 4, 9, "cid")
    assert decoded.body.generation_id == 3


def test_unknown_key_and_unsupported_version() -> None:
    frame = encode_request(12, 1, None, HeartbeatRequest(group_id="g", generation_id=3, member_id="m"))[4:]
    with pytest.raises(UnknownApiKey):
        RequestCodec({18: (0, 4)}).decode(frame)
    with pytest.raises(UnsupportedVersion):
        RequestCodec({12: (0, 3)}).decode(frame)
    with pytest.raises(MalformedRequest):
        CODEC.decode(frame[:-3])


@given(st.binary(min_size=8, max_size=200))
def test_random_frames_raise_only_protocol_errors(data: bytes) -> None:
    with contextlib.suppress(ProtocolError):
        CODEC.decode(data)


@pytest.mark.parametrize("version", range(0, 14))
def test_metadata_response_round_trips_through_kio_at_every_version(version: int) -> None:
    cls = load_response_schema(3, version)
    response = build(cls, {"brokers": [{"node_id": 1, "host": "h", "port": 9092}],
                           "topics": [{"name": "t", "partitions": [{"partition_index": 0, "leader_id": 1}]}]})
    correlation_id, decoded = decode_response(3, version, encode_response(42, response)[4:])
    assert correlation_id == 42
    assert decoded == response


def test_api_versions_response_header_is_always_v0() -> None:
    cls = load_response_schema(18, 3)
    data = encode_response(7, build(cls, {"error_code": 0, "api_keys": []}))
    # size(4) + correlation id(4) then straight to the error code: no tagged-field byte in the header.
    assert data[4:8] == b"\x00\x00\x00\x07"
    assert data[8:10] == b"\x00\x00"
