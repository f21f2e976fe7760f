"""Loading encoded records into the shard (``CoordinatorShard.replay_encoded``) does what replaying
the decoded records one by one does, on the offset commit fast path and off it; what loading may
skip (``SUPERSEDED_VALUES_SKIPPABLE``) leaves the same state."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator.core.records import (
    SUPERSEDED_VALUES_SKIPPABLE,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
    RecordType,
    decode_record,
    encode_record,
)
from coordinator.core.shard import CoordinatorShard
from coordinator.recordlog.record import record_identity

GROUPS = ["g1", "g2"]
offset_keys = st.builds(OffsetCommitKey, st.sampled_from(GROUPS), st.sampled_from(["t1", "t2"]), st.integers(0, 2))
offset_values = st.builds(OffsetCommitValue, st.integers(0, 10**12), st.integers(-1, 5), st.sampled_from(["", "m"]))
group_records = st.one_of(
    st.builds(Record, st.builds(GroupMetadataKey, st.sampled_from(GROUPS)),
              st.none() | st.builds(GroupMetadataValue, st.just("consumer"), st.integers(0, 5), st.just("range"),
                                    st.none())),
    st.builds(Record, st.builds(ConsumerGroupMetadataKey, st.sampled_from(GROUPS)),
              st.builds(ConsumerGroupMetadataValue, st.integers(1, 5))),
)
logs = st.lists(st.one_of(st.builds(Record, offset_keys, st.none() | offset_values),
                          st.builds(Record, offset_keys, offset_values), group_records), max_size=40)


def one_by_one(records: list[Record]) -> CoordinatorShard:
    shard = CoordinatorShard()
    for record in records:
        shard.replay(decode_record(*encode_record(record)))
    return shard


def loaded(records: list[Record], *, skip: frozenset[int] = frozenset()) -> tuple[CoordinatorShard, int]:
    """Encoded as the record log loads them: a value of a type in ``skip`` keyed by its identity
    (a later value of the key replacing it, at its own position), every other record kept."""
    batch: dict[bytes | tuple[bytes, int], bytes | None] = {}
    for n, record in enumerate(records):
        record_type, key, value = encode_record(record)
        identity = record_identity(record_type, key)
        if value is not None and record_type in skip:
            batch.pop(identity, None)
            batch[identity] = value
        else:
            batch[identity, n] = value
    shard = CoordinatorShard()
    return shard, shard.replay_encoded(batch.items())


@settings(max_examples=300)
@given(logs)
def test_loading_equals_replaying_every_record(records: list[Record]) -> None:
    reference = one_by_one(records).durable_view()
    shard, unknown = loaded(records)
    assert unknown == 0 and shard.durable_view() == reference


@settings(max_examples=300)
@given(logs)
def test_skipping_superseded_offset_commits_leaves_the_same_state(records: list[Record]) -> None:
    """Values are superseded by later values of the same partition, across tombstones and group
    records of the same group (deletions, conversions), and the groups they create stay the same."""
    shard, unknown = loaded(records, skip=SUPERSEDED_VALUES_SKIPPABLE)
    assert unknown == 0 and shard.durable_view() == one_by_one(records).durable_view()


def test_the_fast_path_and_the_general_path_store_the_same() -> None:
    value = OffsetCommitValue(42, 3, "meta", 1_700_000_000_000, -1)
    _, key, encoded = encode_record(Record(OffsetCommitKey("g", "t", 7), value))
    assert encoded is not None
    identity = record_identity(RecordType.OFFSET_COMMIT, key)
    fast, general = CoordinatorShard(), CoordinatorShard()
    assert fast.replay_encoded([(identity, encoded)]) == 0  # keyed by identity: the fast path
    assert general.replay_encoded([((identity, 0), encoded)]) == 0  # a unique key: the general path
    assert fast.durable_view() == general.durable_view() == one_by_one([Record(OffsetCommitKey("g", "t", 7), value)]).durable_view()
    assert fast.committed_offset("g", "t", 7) is not None


def test_a_key_with_more_fields_than_today_goes_the_general_way() -> None:
    """Keys never change shape, but the general decoder (a struct) would read a longer one: so does loading."""
    key = msgspec.msgpack.encode(["g", "t", 7, "from the future"])
    value = encode_record(Record(OffsetCommitKey("g", "t", 7), OffsetCommitValue(5)))[2]
    assert value is not None
    shard = CoordinatorShard()
    assert shard.replay_encoded([(record_identity(RecordType.OFFSET_COMMIT, key), value)]) == 0
    assert shard.committed_offset("g", "t", 7) is not None


def test_unknown_types_and_versions_are_skipped_and_counted() -> None:
    _, key, value = encode_record(Record(OffsetCommitKey("g", "t", 0), OffsetCommitValue(5)))
    assert value is not None
    group_key = encode_record(Record(GroupMetadataKey("g"), None))[1]
    shard = CoordinatorShard()
    unknown = shard.replay_encoded([
        (record_identity(4, group_key), b"\x00\x00\x90"),  # ConsumerGroupPartitionMetadata: not read
        (record_identity(RecordType.OFFSET_COMMIT, key), b"\x00\x07" + value[2:]),  # a future version
        ((record_identity(RecordType.GROUP_METADATA, group_key), 1), b"\x00\x09\x90"),
        (record_identity(RecordType.OFFSET_COMMIT, key), value),
    ])
    assert unknown == 3
    assert shard.committed_offset("g", "t", 0) is not None


@pytest.mark.parametrize("value", [b"", b"\x00"])
def test_a_value_shorter_than_its_version_is_malformed(value: bytes) -> None:
    key = encode_record(Record(OffsetCommitKey("g", "t", 0), None))[1]
    with pytest.raises(msgspec.DecodeError):
        CoordinatorShard().replay_encoded([(record_identity(RecordType.OFFSET_COMMIT, key), value)])
