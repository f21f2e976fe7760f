"""The struct encoders of `protocol.fastencode` write exactly the bytes kio writes for the entity built
from the same description, for every API version they cover, whatever the description leaves out."""

from __future__ import annotations

import datetime
import uuid
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from kio.index import load_response_schema
from kio.schema.errors import ErrorCode

from protocol.build import build
from protocol.codec import EncodedResponse, encode_described, encode_response
from protocol.fastencode import ENCODERS

int32s = st.integers(-(2**31), 2**31 - 1)
millis = st.integers(0, 2**31 - 1)
durations = millis | millis.map(lambda ms: datetime.timedelta(milliseconds=ms))
error_codes = st.sampled_from(list(ErrorCode)) | st.sampled_from([int(code) for code in ErrorCode])
names = st.text(max_size=300)
nullable_names = st.none() | names
cids = int32s


def heartbeat_descriptions() -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({}, optional={"throttle_time": durations, "error_code": error_codes})


def consumer_heartbeat_descriptions() -> st.SearchStrategy[dict[str, Any]]:
    topic_partitions = st.lists(st.fixed_dictionaries({}, optional={
        "topic_id": st.uuids() | st.just(uuid.UUID(int=0)),
        "partitions": st.lists(int32s, max_size=140),
    }), max_size=140)
    return st.fixed_dictionaries({}, optional={
        "throttle_time": durations, "error_code": error_codes, "error_message": nullable_names,
        "member_id": nullable_names, "member_epoch": int32s, "heartbeat_interval": durations,
        "assignment": st.none() | st.fixed_dictionaries({}, optional={"topic_partitions": topic_partitions}),
    })


def offset_commit_descriptions() -> st.SearchStrategy[dict[str, Any]]:
    partitions = st.lists(st.fixed_dictionaries({}, optional={"partition_index": int32s, "error_code": error_codes}),
                          max_size=140)
    return st.fixed_dictionaries({}, optional={
        "throttle_time": durations,
        "topics": st.lists(st.fixed_dictionaries({}, optional={"name": names, "partitions": partitions}),
                           max_size=20),
    })


def share_fetch_descriptions() -> st.SearchStrategy[dict[str, Any]]:
    acquired = st.lists(st.fixed_dictionaries({}, optional={
        "first_offset": st.integers(-(2**63), 2**63 - 1), "last_offset": st.integers(-(2**63), 2**63 - 1),
        "delivery_count": st.integers(-(2**15), 2**15 - 1)}), max_size=20)
    partitions = st.lists(st.fixed_dictionaries({}, optional={
        "partition_index": int32s, "error_code": error_codes, "error_message": nullable_names,
        "acknowledge_error_code": error_codes, "acknowledge_error_message": nullable_names,
        "current_leader": st.fixed_dictionaries({}, optional={"leader_id": int32s, "leader_epoch": int32s}),
        "records": st.binary(max_size=300), "acquired_records": acquired}), max_size=10)
    topics = st.lists(st.fixed_dictionaries({}, optional={
        "topic_id": st.uuids() | st.just(uuid.UUID(int=0)), "partitions": partitions}), max_size=5)
    endpoints = st.lists(st.fixed_dictionaries({}, optional={
        "node_id": int32s, "host": names, "port": int32s, "rack": nullable_names}), max_size=3)
    return st.fixed_dictionaries({}, optional={
        "throttle_time": durations, "error_code": error_codes, "error_message": nullable_names,
        "acquisition_lock_timeout": durations, "responses": topics, "node_endpoints": endpoints})


CASES = [(12, v, heartbeat_descriptions) for v in range(5)] + \
    [(68, v, consumer_heartbeat_descriptions) for v in (0, 1)] + \
    [(8, v, offset_commit_descriptions) for v in range(2, 10)] + \
    [(78, v, share_fetch_descriptions) for v in (1, 2)]


def test_every_fast_encoder_is_tested() -> None:
    assert set(ENCODERS) == {(k, v) for k, v, _ in CASES}


@given(st.data())
def test_fast_encoders_write_kios_bytes(data: st.DataObject) -> None:
    api_key, version, descriptions = data.draw(st.sampled_from(CASES))
    description = data.draw(descriptions())
    cid = data.draw(cids)
    kio_bytes = encode_response(cid, build(load_response_schema(api_key, version), description))
    assert ENCODERS[(api_key, version)](cid, description) == kio_bytes
    encoded = encode_described(api_key, version, cid, description)
    assert isinstance(encoded, EncodedResponse)
    assert encoded.data == kio_bytes
    assert encoded.description is description


@settings(max_examples=300)
@given(share_fetch_descriptions(), st.sampled_from([1, 2]), cids)
def test_share_fetch_answers_are_kios_bytes_whatever_they_carry(description: dict[str, Any], version: int,
                                                               cid: int) -> None:
    """The encoder's shortcut for a partition without messages and its general path alike."""
    assert ENCODERS[(78, version)](cid, description) == encode_response(
        cid, build(load_response_schema(78, version), description))


@given(share_fetch_descriptions(), st.lists(st.binary(max_size=200), max_size=6), cids)
def test_share_fetch_records_as_stored_buffers_are_written_as_their_join(
        description: dict[str, Any], buffers: list[bytes], cid: int) -> None:
    """A fetch hands the batches it sends as the buffers they are stored in: the frame is the one
    their join would give."""
    description = {**description, "responses": [{"topic_id": uuid.uuid4(), "partitions": [
        {"partition_index": 0, "records": buffers}]}]}
    joined = {**description, "responses": [{**description["responses"][0], "partitions": [
        {"partition_index": 0, "records": b"".join(buffers)}]}]}
    assert ENCODERS[(78, 2)](cid, description) == encode_response(cid, build(load_response_schema(78, 2), joined))


def test_apis_without_a_fast_encoder_are_left_to_kio() -> None:
    assert encode_described(11, 9, 1, {"error_code": 0}) is None
