"""The record codec: round trips, tombstones, the versioning rule, unknown types."""

from __future__ import annotations

from uuid import UUID

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from coordinator.core.records import (
    CoordinatorEpochKey,
    CoordinatorEpochValue,
    GroupMetadataKey,
    GroupMetadataMember,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
    RecordType,
    UnknownRecordTypeError,
    decode_record,
    encode_record,
)

names = st.text(max_size=20)
ints32 = st.integers(-(2**31), 2**31 - 1)
ints64 = st.integers(-(2**63), 2**63 - 1)

offset_keys = st.builds(OffsetCommitKey, names, names, ints32)
offset_values = st.builds(OffsetCommitValue, ints64, ints32, names, ints64, ints64)
members = st.builds(
    GroupMetadataMember, names, st.none() | names, names, names, ints32, ints32, st.binary(max_size=30), st.binary(max_size=30)
)
group_values = st.builds(
    GroupMetadataValue,
    names,
    ints32,
    st.none() | names,
    st.none() | names,
    ints64,
    st.lists(members, max_size=4).map(tuple),
)
records = st.one_of(
    st.builds(Record, offset_keys, st.none() | offset_values),
    st.builds(Record, st.builds(GroupMetadataKey, names), st.none() | group_values),
    st.builds(Record, st.just(CoordinatorEpochKey()), st.none() | st.builds(CoordinatorEpochValue, ints32, names)),
)


@given(records)
def test_round_trip(record: Record) -> None:
    rtype, key, value = encode_record(record)
    assert (value is None) == (record.value is None)
    assert decode_record(rtype, key, value) == record


def test_record_types_are_kafkas() -> None:
    assert encode_record(Record(OffsetCommitKey("g", "t", 0), None))[0] == 1
    assert encode_record(Record(GroupMetadataKey("g"), None))[0] == 2
    assert encode_record(Record(CoordinatorEpochKey(), None))[0] == RecordType.COORDINATOR_EPOCH == 1000
    assert RecordType.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT == 8


def test_equal_keys_encode_to_equal_bytes() -> None:
    a = encode_record(Record(OffsetCommitKey("g", "t", 3), OffsetCommitValue(1)))
    b = encode_record(Record(OffsetCommitKey("g", "t", 3), None))
    assert a[1] == b[1]


def test_value_is_prefixed_by_its_version() -> None:
    _, _, value = encode_record(Record(GroupMetadataKey("g"), GroupMetadataValue("", 0, None, None)))
    assert value is not None and value[:2] == b"\x00\x00"


class _OffsetCommitValueV0Prefix(msgspec.Struct, frozen=True, array_like=True):
    """What an older writer that did not know the trailing fields would have written."""

    offset: int
    leader_epoch: int


class _OffsetCommitValueFuture(msgspec.Struct, frozen=True, array_like=True):
    """A future writer that appended a field after the topic id."""

    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int = -1
    topic_id: bytes | None = None
    something_new: int = 7


def test_appended_fields_are_readable_both_ways() -> None:
    key = encode_record(Record(OffsetCommitKey("g", "t", 0), None))[1]
    old = b"\x00\x00" + msgspec.msgpack.encode(_OffsetCommitValueV0Prefix(5, 2))
    assert decode_record(1, key, old).value == OffsetCommitValue(5, 2)
    future = b"\x00\x00" + msgspec.msgpack.encode(_OffsetCommitValueFuture(5, 2, "m", 9, -1, b"\x01" * 16, 3))
    assert decode_record(1, key, future).value == OffsetCommitValue(5, 2, "m", 9, -1, UUID(bytes=b"\x01" * 16))


def test_unknown_types_and_versions() -> None:
    key = encode_record(Record(GroupMetadataKey("g"), None))[1]
    with pytest.raises(UnknownRecordTypeError):
        decode_record(4, key, None)  # ConsumerGroupPartitionMetadata: Kafka 4.1+ no longer writes it
    with pytest.raises(UnknownRecordTypeError):
        decode_record(2, key, b"\x00\x07" + b"\x90")
    with pytest.raises(ValueError):
        decode_record(2, key, b"\x00")
    with pytest.raises(ValueError):
        decode_record(2, b"\xc1", None)
