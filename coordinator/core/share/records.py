"""The records of share partitions: their keys, values and factories (the only place they are built).

Kafka keeps share-partition state in ``__share_group_state`` as ``ShareSnapshot`` (the whole state)
and ``ShareUpdate`` (the batches that changed), both keyed by (group, topic id, partition), in a
topic with ``cleanup.policy=delete`` that the share coordinator prunes itself. Our log is compacted
by key, so a delta keyed like the snapshot would be lost by compaction. The state is therefore split
by key into pieces that each hold their latest full value:

==========================================  =================================================
key                                         value
==========================================  =================================================
SharePartitionKey(group_id, topic_id,       SharePartitionValue(state_epoch, start_offset,
partition)                                  next_offset): Kafka's snapshot header (SPSO, and
                                            SPEO + 1: the first offset never acquired)
ShareBatchKey(group_id, topic_id,           ShareBatchValue(last_offset, runs): one in-flight
partition, first_offset)                    batch (an acquisition of new records) and the
                                            state of each of its offsets as runs of equal
                                            (state, delivery count, member, lock deadline)
==========================================  =================================================

A change writes the batch records it touched (their whole value), tombstones the batches the start
offset passed, and the partition record when the start or next offset moved, all in one log entry.
Every key starts with ``group_id``, so the group's log partition holds them (``records.group_of``).

Unlike Kafka, acquisitions are records too (state ACQUIRED with its member and lock deadline): a
ShareFetch answer reports them, and the project's rule is that what a reply reports is in the log
before the reply leaves. A delivery count therefore survives a crash, so a poison record cannot be
delivered more than ``share.delivery.count.limit`` times by crashing the coordinator.

The membership records (Kafka's ShareGroup* records, types 10-14, as ``__consumer_offsets`` has
them) follow at the end of this module.

The record types are declared in :mod:`.schema` and claimed when the type registers: Kafka's ids
for the membership records, 1100-1101 (after our own 1000-1002) for the share partitions, whose
Kafka counterparts live in another topic.
"""

from __future__ import annotations

import enum
from uuid import UUID

import msgspec

from coordinator.core.record_codec import RecordStruct

SHARE_PARTITION_RECORD_TYPE = 1100
SHARE_BATCH_RECORD_TYPE = 1101


class RecordState(enum.IntEnum):
    """An offset's state, with Kafka's persisted ids (``RecordState``; 3 is 4.3's unused ARCHIVING)."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4

    @property
    def terminal(self) -> bool:
        return self in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


class _Struct(RecordStruct, frozen=True):
    """The core's record base (immutable, encoded as msgpack arrays, append-only fields), so the
    shard's codec (``schema.RECORD_TYPES``) writes these records as any other."""


class SharePartitionKey(_Struct, frozen=True):
    group_id: str
    topic_id: UUID
    partition: int


class SharePartitionValue(_Struct, frozen=True):
    state_epoch: int
    start_offset: int
    next_offset: int


class ShareBatchKey(_Struct, frozen=True):
    group_id: str
    topic_id: UUID
    partition: int
    first_offset: int


class StateRun(_Struct, frozen=True):
    """Offsets ``first..last`` of a batch in one state. ``member_id`` and ``lock_deadline`` (epoch
    milliseconds) are set only while ACQUIRED."""

    first: int
    last: int
    state: int
    delivery_count: int
    member_id: str = ""
    lock_deadline: int = -1


class ShareBatchValue(_Struct, frozen=True):
    last_offset: int
    runs: list[StateRun]


class ShareRecord(msgspec.Struct, frozen=True, gc=False):
    """One share-partition record; ``value is None`` is a tombstone (as ``core.records.Record``)."""

    key: SharePartitionKey | ShareBatchKey
    value: SharePartitionValue | ShareBatchValue | None


def partition_record(key: SharePartitionKey, state_epoch: int, start_offset: int, next_offset: int) -> ShareRecord:
    return ShareRecord(key, SharePartitionValue(state_epoch, start_offset, next_offset))


def partition_tombstone(key: SharePartitionKey) -> ShareRecord:
    return ShareRecord(key, None)


def batch_key(key: SharePartitionKey, first_offset: int) -> ShareBatchKey:
    return ShareBatchKey(key.group_id, key.topic_id, key.partition, first_offset)


def batch_record(key: SharePartitionKey, first_offset: int, last_offset: int, runs: list[StateRun]) -> ShareRecord:
    return ShareRecord(batch_key(key, first_offset), ShareBatchValue(last_offset, runs))


def batch_tombstone(key: SharePartitionKey, first_offset: int) -> ShareRecord:
    return ShareRecord(batch_key(key, first_offset), None)


# ---- codec (the shape core/records.py gives every record: type, key bytes, versioned value bytes) ----

_TYPES: dict[type, int] = {SharePartitionKey: SHARE_PARTITION_RECORD_TYPE, ShareBatchKey: SHARE_BATCH_RECORD_TYPE}
_KEYS = {SHARE_PARTITION_RECORD_TYPE: SharePartitionKey, SHARE_BATCH_RECORD_TYPE: ShareBatchKey}
_VALUES = {SHARE_PARTITION_RECORD_TYPE: SharePartitionValue, SHARE_BATCH_RECORD_TYPE: ShareBatchValue}
_VALUE_VERSION = b"\x00\x00"
_encoder = msgspec.msgpack.Encoder(uuid_format="bytes")


def encode_share_record(record: ShareRecord) -> tuple[int, bytes, bytes | None]:
    """``(record type, key bytes, value bytes or None)`` as ``core.records.encode_record`` lays them
    out (a 2-byte value version, then msgpack), so registering these types changes no byte."""
    key = _encoder.encode(record.key)
    value = None if record.value is None else _VALUE_VERSION + _encoder.encode(record.value)
    return _TYPES[type(record.key)], key, value


def decode_share_record(rtype: int, key: bytes, value: bytes | None) -> ShareRecord:
    """Inverse of :func:`encode_share_record`; ValueError for a type or version this code does not know."""
    if rtype not in _KEYS:
        raise ValueError(f"not a share-partition record type: {rtype}")
    decoded_key = msgspec.msgpack.decode(key, type=_KEYS[rtype])
    if value is None:
        return ShareRecord(decoded_key, None)
    if value[:2] != _VALUE_VERSION:
        raise ValueError(f"unknown value version {int.from_bytes(value[:2], 'big')} of record type {rtype}")
    return ShareRecord(decoded_key, msgspec.msgpack.decode(value[2:], type=_VALUES[rtype]))


# ---- share group membership (Kafka's ShareGroup* records, types 10-14 in __consumer_offsets) ----
#
# Kafka's type 15 (ShareGroupStatePartitionMetadata: which partitions are initialized) has no
# counterpart: a share partition is initialized when its SharePartition record exists, written in
# the same log as the group, so "initialized" is read from the share partitions themselves.

SHARE_GROUP_MEMBER_METADATA_RECORD_TYPE = 10
SHARE_GROUP_METADATA_RECORD_TYPE = 11
SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_RECORD_TYPE = 12
SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_RECORD_TYPE = 13
SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_RECORD_TYPE = 14


class TopicPartitions(_Struct, frozen=True):
    topic_id: UUID
    partitions: list[int]


class ShareGroupMemberMetadataKey(_Struct, frozen=True):
    group_id: str
    member_id: str


class ShareGroupMemberMetadataValue(_Struct, frozen=True):
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: list[str]


class ShareGroupMetadataKey(_Struct, frozen=True):
    group_id: str


class ShareGroupMetadataValue(_Struct, frozen=True):
    epoch: int
    metadata_hash: int


class ShareGroupTargetAssignmentMetadataKey(_Struct, frozen=True):
    group_id: str


class ShareGroupTargetAssignmentMetadataValue(_Struct, frozen=True):
    assignment_epoch: int


class ShareGroupTargetAssignmentMemberKey(_Struct, frozen=True):
    group_id: str
    member_id: str


class ShareGroupTargetAssignmentMemberValue(_Struct, frozen=True):
    topic_partitions: list[TopicPartitions]


class ShareGroupCurrentMemberAssignmentKey(_Struct, frozen=True):
    group_id: str
    member_id: str


class ShareGroupCurrentMemberAssignmentValue(_Struct, frozen=True):
    member_epoch: int
    previous_member_epoch: int
    assigned_partitions: list[TopicPartitions]


GroupKey = (ShareGroupMemberMetadataKey | ShareGroupMetadataKey | ShareGroupTargetAssignmentMetadataKey
            | ShareGroupTargetAssignmentMemberKey | ShareGroupCurrentMemberAssignmentKey)
GroupValue = (ShareGroupMemberMetadataValue | ShareGroupMetadataValue | ShareGroupTargetAssignmentMetadataValue
              | ShareGroupTargetAssignmentMemberValue | ShareGroupCurrentMemberAssignmentValue)


class ShareGroupRecord(msgspec.Struct, frozen=True, gc=False):
    """One share-group membership record; ``value is None`` is a tombstone."""

    key: GroupKey
    value: GroupValue | None


_GROUP_TYPES: dict[type, int] = {
    ShareGroupMemberMetadataKey: SHARE_GROUP_MEMBER_METADATA_RECORD_TYPE,
    ShareGroupMetadataKey: SHARE_GROUP_METADATA_RECORD_TYPE,
    ShareGroupTargetAssignmentMetadataKey: SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_RECORD_TYPE,
    ShareGroupTargetAssignmentMemberKey: SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_RECORD_TYPE,
    ShareGroupCurrentMemberAssignmentKey: SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_RECORD_TYPE,
}
_GROUP_KEYS = {rtype: cls for cls, rtype in _GROUP_TYPES.items()}
_GROUP_VALUES: dict[int, type] = {
    SHARE_GROUP_MEMBER_METADATA_RECORD_TYPE: ShareGroupMemberMetadataValue,
    SHARE_GROUP_METADATA_RECORD_TYPE: ShareGroupMetadataValue,
    SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_RECORD_TYPE: ShareGroupTargetAssignmentMetadataValue,
    SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_RECORD_TYPE: ShareGroupTargetAssignmentMemberValue,
    SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_RECORD_TYPE: ShareGroupCurrentMemberAssignmentValue,
}


def encode_group_record(record: ShareGroupRecord) -> tuple[int, bytes, bytes | None]:
    key = _encoder.encode(record.key)
    value = None if record.value is None else _VALUE_VERSION + _encoder.encode(record.value)
    return _GROUP_TYPES[type(record.key)], key, value


def decode_group_record(rtype: int, key: bytes, value: bytes | None) -> ShareGroupRecord:
    if rtype not in _GROUP_KEYS:
        raise ValueError(f"not a share-group record type: {rtype}")
    decoded_key: GroupKey = msgspec.msgpack.decode(key, type=_GROUP_KEYS[rtype])
    if value is None:
        return ShareGroupRecord(decoded_key, None)
    if value[:2] != _VALUE_VERSION:
        raise ValueError(f"unknown value version {int.from_bytes(value[:2], 'big')} of record type {rtype}")
    return ShareGroupRecord(decoded_key, msgspec.msgpack.decode(value[2:], type=_GROUP_VALUES[rtype]))
