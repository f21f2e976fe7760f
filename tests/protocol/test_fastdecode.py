"""The direct decoders of `protocol.fastdecode` give exactly what the codec's general path gives: for
every API version they cover, a random valid request (encoded by kio) decodes to the same
`DecodedRequest` with and without them, and a truncated or corrupted one gets the same outcome on
both paths (the same request, or the same kind of refusal). What they do not vouch for is left to
the general path."""

from __future__ import annotations

import dataclasses
import datetime
import struct
import uuid
from types import NoneType, UnionType
from typing import Any, get_args, get_origin
from unittest.mock import patch

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.build import build
from protocol.codec import DecodedRequest, RequestCodec
from protocol.errors import MalformedRequest, ProtocolError
from protocol.fastdecode import DECODERS, _has_array
from protocol.schemas import request_schema
from tests.support.wire import encode_request

CODEC = RequestCodec({8: (0, 10), 12: (0, 4), 68: (0, 1), 78: (1, 2)})
CASES = sorted(DECODERS)

int32s = st.integers(-(2**31), 2**31 - 1)
int64s = st.integers(-(2**63), 2**63 - 1)
texts = st.text(max_size=40) | st.text(min_size=100, max_size=400)  # one- and two-byte lengths
client_ids = st.none() | st.text(max_size=30)


def _unwrap(tp: Any) -> tuple[Any, bool]:
    if get_origin(tp) is UnionType and NoneType in get_args(tp):
        return next(a for a in get_args(tp) if a is not NoneType), True
    return tp, False


def _value(spec: dataclasses.Field[Any], tp: Any) -> st.SearchStrategy[Any]:
    """Any valid value of one field, from kio's declaration of it."""
    tp, nullable = _unwrap(tp)
    kafka_type = spec.metadata.get("kafka_type")
    if get_origin(tp) is tuple:
        inner = _unwrap(get_args(tp)[0])[0]
        element = entities(inner) if dataclasses.is_dataclass(inner) else _value(spec, inner)
        values: st.SearchStrategy[Any] = st.lists(element, max_size=4).map(tuple)
    elif kafka_type == "string":
        values = texts
    elif kafka_type == "int8":
        values = st.integers(-(2**7), 2**7 - 1)
    elif kafka_type == "bool":
        values = st.booleans()
    elif kafka_type == "int32":
        values = int32s
    elif kafka_type == "int64":
        values = int64s
    elif kafka_type == "timedelta_i32":
        values = int32s.map(lambda ms: datetime.timedelta(milliseconds=ms))
    elif kafka_type == "timedelta_i64":  # what kio's reader can hold (its limit: below)
        values = st.integers(-(2**53), 2**53).map(lambda ms: datetime.timedelta(milliseconds=ms))
    elif kafka_type == "uuid":
        values = st.uuids() | st.just(uuid.UUID(int=0))
    else:
        raise AssertionError(f"no strategy for {kafka_type} ({spec.name})")
    return st.none() | values if nullable else values


def entities(cls: Any) -> st.SearchStrategy[Any]:
    fields = {spec.name: _value(spec, spec.type) for spec in dataclasses.fields(cls)}
    return st.fixed_dictionaries(fields).map(lambda kwargs: cls(**kwargs))


@st.composite
def frames(draw: st.DrawFn) -> tuple[int, int, bytes]:
    api_key, version = draw(st.sampled_from(CASES))
    body = draw(entities(request_schema(api_key, version)))
    frame = encode_request(api_key, draw(int32s), draw(client_ids), body)[4:]
    return api_key, version, frame


@st.composite
def steady_consumer_heartbeats(draw: st.DrawFn) -> bytes:
    """ConsumerGroupHeartbeats with everything that did not change null: what members send most."""
    version = draw(st.sampled_from([0, 1]))
    fields = {"group_id": draw(texts), "member_id": draw(texts), "member_epoch": draw(int32s),
              "rebalance_timeout": draw(int32s), "topic_partitions": None}
    return encode_request(68, draw(int32s), draw(st.text(max_size=30)), build(request_schema(68, version), fields))[4:]


def kio_only(frame: bytes) -> DecodedRequest:
    """The codec as it decodes every other request: kio, after `guard.py`."""
    with patch.dict(DECODERS, {}, clear=True):
        return CODEC.decode(frame)


def outcome(decode: Any, frame: bytes) -> DecodedRequest | str:
    try:
        decoded: DecodedRequest = decode(frame)
    except ProtocolError as exc:  # anything else escaping fails the test
        return type(exc).__name__
    return decoded


def test_the_hot_requests_have_direct_decoders_at_every_served_version() -> None:
    assert set(DECODERS) == {(12, v) for v in range(5)} | {(68, v) for v in (0, 1)} | {(8, v) for v in range(2, 11)} \
        | {(78, v) for v in (1, 2)}


def test_the_guard_walks_the_requests_with_arrays_and_never_a_heartbeat() -> None:
    assert not any(_has_array(request_schema(12, v)) for v in range(5))
    assert all(_has_array(request_schema(68, v)) for v in (0, 1))
    assert all(_has_array(request_schema(8, v)) for v in range(2, 11))
    assert all(_has_array(request_schema(78, v)) for v in (1, 2))


@settings(max_examples=400)
@given(frames())
def test_valid_requests_decode_as_kio_decodes_them(case: tuple[int, int, bytes]) -> None:
    api_key, version, frame = case
    null_client_id = frame[8:10] == b"\xff\xff"  # left to the general path
    assert (DECODERS[(api_key, version)](frame) is None) == null_client_id  # otherwise taken
    fast = CODEC.decode(frame)
    assert fast == kio_only(frame)
    assert type(fast.body) is type(kio_only(frame).body)


@settings(max_examples=400)
@given(frames(), st.data())
def test_truncated_and_corrupted_requests_get_kios_outcome(case: tuple[int, int, bytes], data: st.DataObject) -> None:
    _, _, frame = case
    damaged = bytearray(frame)
    how = data.draw(st.sampled_from(["truncate", "overwrite", "append"]))
    if how == "truncate":
        del damaged[data.draw(st.integers(8, len(frame) - 1)):]
    elif how == "overwrite":
        for _ in range(data.draw(st.integers(1, 3))):
            damaged[data.draw(st.integers(8, len(frame) - 1))] = data.draw(st.sampled_from([0, 1, 0x7F, 0x80, 0xFF]) |
                                                                             st.integers(0, 255))
    else:
        damaged += data.draw(st.binary(min_size=1, max_size=8))
    assert outcome(CODEC.decode, bytes(damaged)) == outcome(kio_only, bytes(damaged))


@settings(max_examples=300)
@given(steady_consumer_heartbeats(), st.data())
def test_steady_consumer_heartbeats_whole_or_damaged_get_kios_outcome(frame: bytes, data: st.DataObject) -> None:
    """The steady heartbeat is recognised from its tail without the guard's walk: whole, it decodes
    as kio decodes it; with any byte of its body changed, it gets the general path's outcome."""
    assert DECODERS[(68, frame[3])](frame) is not None
    assert CODEC.decode(frame) == kio_only(frame)
    damaged = bytearray(frame)
    damaged[data.draw(st.integers(8, len(frame) - 1))] = data.draw(st.integers(0, 255))
    assert outcome(CODEC.decode, bytes(damaged)) == outcome(kio_only, bytes(damaged))


def test_a_steady_looking_heartbeat_with_a_huge_owned_partitions_count_is_refused() -> None:
    frame = _flexible(68, 1, {"group_id": "g", "member_id": "m", "member_epoch": 1, "topic_partitions": None})
    huge = frame[:-2] + b"\xff\xff\xff\xff\x0f" + frame[-1:]  # owned partitions: 4 billion
    with pytest.raises(MalformedRequest, match="Tried to allocate a collection of size"):
        DECODERS[(68, 1)](huge)


def _flexible(api_key: int, version: int, fields: dict[str, Any]) -> bytes:
    return encode_request(api_key, 1, "c", build(request_schema(api_key, version), fields))[4:]


@pytest.mark.parametrize(("api_key", "version", "fields"), [
    (12, 4, {"group_id": "g" * 40_000, "generation_id": 1, "member_id": "m"}),
    (12, 4, {"group_id": "g", "generation_id": 1, "member_id": "m", "group_instance_id": "i" * 32_768}),
    (68, 1, {"group_id": "g", "member_id": "m", "member_epoch": 1, "subscribed_topic_names": ["t" * 33_000],
             "topic_partitions": None}),
    (8, 9, {"group_id": "g", "member_id": "m", "topics": [{"name": "t", "partitions": [
        {"partition_index": 0, "committed_offset": 1, "committed_metadata": "x" * 32_768}]}]}),
])
def test_a_compact_string_over_32767_bytes_gets_the_general_paths_answer(
        api_key: int, version: int, fields: dict[str, Any]) -> None:
    """The guard's string rule (Kafka's readers refuse such a string) holds on both paths: a
    Heartbeat that could hold one goes to the general path, the others are walked by the guard."""
    frame = _flexible(api_key, version, fields)
    if api_key == 12:
        assert DECODERS[(api_key, version)](frame) is None
    assert outcome(CODEC.decode, frame) == outcome(kio_only, frame)


def test_a_heartbeat_of_32767_bytes_is_decoded_directly() -> None:
    frame = _flexible(12, 4, {"group_id": "g" * (32_767 - 23), "generation_id": 1, "member_id": "m"})
    assert len(frame) == 32_767
    assert DECODERS[(12, 4)](frame) == ("c", kio_only(frame).body)


@pytest.mark.parametrize("client_id", [None, "c" * 256, "c" * 300])
def test_a_null_or_long_client_id_is_left_to_kio(client_id: str | None) -> None:
    frame = encode_request(12, 1, client_id, build(request_schema(12, 4), {
        "group_id": "g", "generation_id": 1, "member_id": "m"}))[4:]
    assert DECODERS[(12, 4)](frame) is None
    assert CODEC.decode(frame).client_id == (client_id or "")


def test_an_unknown_tagged_field_in_the_body_gets_kios_refusal() -> None:
    frame = _flexible(12, 4, {"group_id": "g", "generation_id": 1, "member_id": "m"})
    tagged = frame[:-1] + b"\x01\x05\x02ab"  # one unknown tag (5) of two bytes
    assert DECODERS[(12, 4)](tagged) is None
    assert outcome(CODEC.decode, tagged) == outcome(kio_only, tagged) == "MalformedRequest"


def test_tagged_fields_in_the_header_are_left_to_kio() -> None:
    frame = _flexible(12, 4, {"group_id": "g", "generation_id": 1, "member_id": "m"})
    at = 8 + 2 + 1  # key, version, correlation id; client id "c"
    tagged = frame[:at] + b"\x01\x05\x02ab" + frame[at + 1:]  # one unknown tag (5) of two bytes
    assert DECODERS[(12, 4)](tagged) is None
    assert outcome(CODEC.decode, tagged) == outcome(kio_only, tagged)


@pytest.mark.parametrize("ms", [2**53 + 1, 9_223_372_036_854_775, 9_223_372_036_854_776, -(2**63)])
def test_a_retention_time_kio_cannot_hold_is_left_to_it(ms: int) -> None:
    frame = encode_request(8, 1, "c", build(request_schema(8, 2), {"group_id": "g", "member_id": "m", "topics": []}))[4:]
    at = frame.index(b"\xff" * 8)  # retention time -1, after the group id and member id
    odd = frame[:at] + struct.pack(">q", ms) + frame[at + 8:]
    assert outcome(CODEC.decode, odd) == outcome(kio_only, odd)
    assert (DECODERS[(8, 2)](odd) is None) == (outcome(kio_only, odd) == "MalformedRequest")


def test_an_array_count_above_the_bytes_left_is_refused_by_the_guard() -> None:
    frame = _flexible(8, 8, {"group_id": "g", "member_id": "m", "topics": []})
    huge = frame[:-2] + b"\xff\xff\xff\xff\x0f" + frame[-1:]  # topics: 4 billion
    with pytest.raises(MalformedRequest, match="Tried to allocate a collection of size"):
        DECODERS[(8, 8)](huge)
    with pytest.raises(MalformedRequest, match="Tried to allocate a collection of size"):
        CODEC.decode(huge)


def test_the_steady_heartbeats_take_the_direct_path() -> None:
    """What the bench measures: steady Heartbeat v4 and ConsumerGroupHeartbeat v1, a simple commit."""
    for api_key, version, fields in [
        (12, 4, {"group_id": "g1", "generation_id": 3, "member_id": "m-1"}),
        (68, 1, {"group_id": "g1", "member_id": "m-1", "member_epoch": 7, "topic_partitions": None}),
        (8, 8, {"group_id": "g1", "member_id": "", "generation_id_or_member_epoch": -1, "topics": [
            {"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 10}]}]}),
    ]:
        frame = _flexible(api_key, version, fields)
        decoded = DECODERS[(api_key, version)](frame)
        assert decoded is not None
        assert decoded == ("c", kio_only(frame).body)
        assert struct.unpack_from(">h", frame)[0] == api_key
