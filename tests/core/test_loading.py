"""Loading encoded records into the shard (``CoordinatorShard.replay_encoded``) does what replaying
the decoded records one by one does, on the offset commit fast path (values stored encoded, their
place found from the key's bytes, carried across batches) and off it."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator.core.offsets import LoadPlaces
from coordinator.core.records import (
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
# Partitions around every msgpack integer width: a loaded value's place is found from its key's
# bytes but the last (``OffsetManager.replay_loaded``), which must hold for each.
PARTITIONS = st.sampled_from([0, 1, 2, 127, 128, 129, 255, 256, 257, 511, 65535, 65536, 65537, 2**32 + 5, -1, -33])
offset_keys = st.builds(OffsetCommitKey, st.sampled_from(GROUPS), st.sampled_from(["t1", "t2"]), PARTITIONS)
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


def loaded(records: list[Record], *, batches: int = 1) -> tuple[CoordinatorShard, int]:
    """Encoded as the record log loads them (identity and value bytes), in ``batches`` calls that
    carry the places of values from one to the next, as a load does."""
    shard = CoordinatorShard()
    places = LoadPlaces()
    unknown = 0
    size = -(-len(records) // batches) or 1
    for start in range(0, len(records), size):
        batch = []
        for record in records[start:start + size]:
            record_type, key, value = encode_record(record)
            batch.append((record_identity(record_type, key), value))
        unknown += shard.replay_encoded(batch, places)
    return shard, unknown


@settings(max_examples=500)
@given(logs, st.integers(1, 4))
def test_loading_equals_replaying_every_record(records: list[Record], batches: int) -> None:
    """Values overwrite values of the same partition, across tombstones and group records of the
    same group (deletions, conversions), and the groups they create are the same; with the places
    of values carried across batches or not."""
    shard, unknown = loaded(records, batches=batches)
    assert unknown == 0 and shard.durable_view() == one_by_one(records).durable_view()


@settings(max_examples=200)
@given(logs)
def test_loaded_values_read_as_replayed_ones(records: list[Record]) -> None:
    """Loading keeps offset commit values encoded until read: every way of reading one decodes it
    the same (a partition's offset, the group's fetch, the durable view)."""
    reference = one_by_one(records)
    shard, _ = loaded(records)
    for group in GROUPS:
        for topic in ("t1", "t2"):
            for partition in (0, 128, 65536, -1):
                assert shard.committed_offset(group, topic, partition) == reference.committed_offset(
                    group, topic, partition)
        assert shard.offsets.group_offsets(group) == reference.offsets.group_offsets(group)
    assert shard.durable_view() == reference.durable_view()


def test_integers_of_any_width_in_keys_find_their_partition() -> None:
    """Keys as another msgpack writer could encode them (wider than needed): the partition is the
    key's, whatever the bytes before the last one were."""
    value = encode_record(Record(OffsetCommitKey("g", "t", 0), OffsetCommitValue(5)))[2]
    assert value is not None
    keys = [
        b"\x93\xa1g\xa1t\x05", b"\x93\xa1g\xa1t\x7f",  # fixint
        b"\x93\xa1g\xa1t\xcc\x06", b"\x93\xa1g\xa1t\xcc\xc8",  # uint8: 6, 200
        b"\x93\xa1g\xa1t\xcd\x00\x07", b"\x93\xa1g\xa1t\xcd\x00\x85",  # uint16 of a byte: 7, 133
        b"\x93\xa1g\xa1t\xcd\x01\x2c", b"\x93\xa1g\xa1t\xcd\x01\xff",  # uint16: 300, 511
        b"\x93\xa1g\xa1t\xd0\x08", b"\x93\xa1g\xa1t\xd0\xf0",  # int8: 8, -16
        b"\x93\xa1g\xa1t\xf0", b"\x93\xa1g\xa1t\xff",  # negative fixint: -16, -1
    ]
    batch = [(record_identity(RecordType.OFFSET_COMMIT, key), value) for key in keys for _ in range(2)]
    shard = CoordinatorShard()
    assert shard.replay_encoded(batch) == 0
    reference = CoordinatorShard()
    for key in keys:
        reference.replay(decode_record(RecordType.OFFSET_COMMIT, key, value))
    assert sorted(reference.offsets.group_offsets("g")["t"]) == [-16, -1, 5, 6, 7, 8, 127, 133, 200, 300, 511]
    assert shard.durable_view() == reference.durable_view()


def test_the_fast_path_and_the_general_path_store_the_same() -> None:
    value = OffsetCommitValue(42, 3, "meta", 1_700_000_000_000, -1)
    _, key, encoded = encode_record(Record(OffsetCommitKey("g", "t", 7), value))
    assert encoded is not None
    identity = record_identity(RecordType.OFFSET_COMMIT, key)
    fast, general = CoordinatorShard(), CoordinatorShard()
    assert fast.replay_encoded([(identity, encoded)]) == 0  # the fast path
    general.replay(decode_record(RecordType.OFFSET_COMMIT, key, encoded))  # the general path
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
        (record_identity(RecordType.GROUP_METADATA, group_key), b"\x00\x09\x90"),
        (record_identity(RecordType.OFFSET_COMMIT, key), value),
    ])
    assert unknown == 3
    assert shard.committed_offset("g", "t", 0) is not None


@pytest.mark.parametrize("value", [b"", b"\x00"])
def test_a_value_shorter_than_its_version_is_malformed(value: bytes) -> None:
    key = encode_record(Record(OffsetCommitKey("g", "t", 0), None))[1]
    with pytest.raises(msgspec.DecodeError):
        CoordinatorShard().replay_encoded([(record_identity(RecordType.OFFSET_COMMIT, key), value)])


def test_a_group_read_between_batches_is_decoded_again_after_the_next() -> None:
    """The places carried across batches go when a read decodes a group in between, so the values
    the next batch stores are decoded on the next read too."""
    def batch(partitions: list[int], offset: int) -> list[tuple[bytes, bytes | None]]:
        encoded = [encode_record(Record(OffsetCommitKey("g", "t", p), OffsetCommitValue(offset))) for p in partitions]
        return [(record_identity(record_type, key), value) for record_type, key, value in encoded]

    shard, places = CoordinatorShard(), LoadPlaces()
    assert shard.replay_encoded(batch([0, 1], 5), places) == 0
    assert shard.offsets.group_offsets("g") == {"t": {0: OffsetCommitValue(5), 1: OffsetCommitValue(5)}}
    assert shard.replay_encoded(batch([1, 2], 6), places) == 0
    assert shard.offsets.group_offsets("g") == {
        "t": {0: OffsetCommitValue(5), 1: OffsetCommitValue(6), 2: OffsetCommitValue(6)}}
