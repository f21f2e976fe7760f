"""Typed coordinator records and their codec.

Modelled on Kafka's ``__consumer_offsets`` records (``GroupCoordinatorRecordHelpers``): each record is a
key plus a value; a ``None`` value is a tombstone. Struct and field names follow Kafka's JSON schemas
(``GroupMetadataValue.rebalanceTimeout`` -> ``rebalance_timeout``) so the KIPs can be read against the
code; like Kafka's, these fields are milliseconds even where the name has no ``_ms``.

Record types (the int stored next to each record in the log) are Kafka's where Kafka has one:

====  ==========================================  ==========================================
type  key                                         value
====  ==========================================  ==========================================
1     OffsetCommitKey(group, topic, partition)    OffsetCommitValue
2     GroupMetadataKey(group)                     GroupMetadataValue (classic groups)
3     ConsumerGroupMetadataKey(group_id)          ConsumerGroupMetadataValue(epoch, metadata_hash)
5     ConsumerGroupMemberMetadataKey(group_id,    ConsumerGroupMemberMetadataValue (subscription,
      member_id)                                  client, rebalance timeout, assignor)
6     ConsumerGroupTargetAssignmentMetadataKey    ConsumerGroupTargetAssignmentMetadataValue
      (group_id)                                  (assignment_epoch)
7     ConsumerGroupTargetAssignmentMemberKey      ConsumerGroupTargetAssignmentMemberValue
      (group_id, member_id)                       (topic_partitions)
8     ConsumerGroupCurrentMemberAssignmentKey     ConsumerGroupCurrentMemberAssignmentValue (epochs,
      (group_id, member_id)                       state, assigned and pending-revocation partitions,
                                                  each partition's assignment epoch: KIP-1251)
1000  CoordinatorEpochKey()                       CoordinatorEpochValue(epoch, writer_id)
1001  ScramCredentialKey(user, mechanism)         ScramCredentialValue(salt, stored_key,
                                                  server_key, iterations)
1002  AclKey(resource type, name, pattern type,   AclValue() (the key is the binding)
      principal, host, operation, permission)
====  ==========================================  ==========================================

Types 1001 and 1002 are ours: Kafka keeps SCRAM credentials and ACLs in its metadata log
(``UserScramCredentialRecord``, ``AccessControlEntryRecord``); here they live in the coordinator's log,
so they survive failover like groups do (``coordinator/security/store.py`` replays them). They
belong to no group: a change to them is a coordinator-wide entry.

Type 4 (``ConsumerGroupPartitionMetadata``) is never written: Kafka 4.1+ replaced it by the metadata
hash carried in ``ConsumerGroupMetadataValue`` (KIP-1101), which is what we do. Regex resolutions
(Kafka's type 16) are not persisted either: regexes are resolved synchronously against the current
topic metadata (see ``coordinator/core/consumer``).

Wire format (what ``encode_record`` returns and the record log stores opaquely):

* key bytes   = msgpack array of the key struct's fields. Keys never change shape: the key bytes are
  the compaction identity, so two encodings of one key must be byte-equal.
* value bytes = 2-byte big-endian value version + msgpack array of the value struct's fields.

Compatibility rule: within one value version, fields are only ever APPENDED, each with a default.
msgspec's ``array_like`` decoding fills missing trailing fields with their defaults (old bytes, new
reader) and ignores extra trailing fields (new bytes, old reader). A change that cannot be expressed
by appending (removing, retyping or reordering a field) takes a new version number and a new struct;
the old struct stays in ``_VALUE_TYPES`` forever so old logs stay readable. Unknown record types raise
``UnknownRecordTypeError``; the loader skips them with a warning, as Kafka's loader does.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping
from enum import IntEnum
from typing import Any
from uuid import UUID

import msgspec


class RecordType(IntEnum):
    OFFSET_COMMIT = 1
    GROUP_METADATA = 2
    CONSUMER_GROUP_METADATA = 3
    CONSUMER_GROUP_PARTITION_METADATA = 4
    CONSUMER_GROUP_MEMBER_METADATA = 5
    CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA = 6
    CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER = 7
    CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT = 8
    COORDINATOR_EPOCH = 1000
    SCRAM_CREDENTIAL = 1001
    ACL = 1002
    OFFSETS_UPSTREAM = 1003


class _Struct(msgspec.Struct, frozen=True, array_like=True):
    """Base of all record keys and values: immutable, hashable, encoded as msgpack arrays."""


# ---- OffsetCommit (type 1) -----------------------------------------------------------------------


class OffsetCommitKey(_Struct, frozen=True):
    group: str
    topic: str
    partition: int


class OffsetCommitValue(_Struct, frozen=True):
    offset: int
    leader_epoch: int = -1  # -1 = none
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int = -1  # -1 = none (only OffsetCommit v2-4 with a retention time sets it)
    # Kafka 4.2's ``topicId`` tag: the id of the topic the commit named (OffsetCommit v10 names
    # topics by id). An OffsetFetch v10 for another id of that name (the topic was re-created) does
    # not see this offset. None for commits by name.
    topic_id: UUID | None = None


# ---- GroupMetadata (type 2, classic groups) ------------------------------------------------------


class GroupMetadataKey(_Struct, frozen=True):
    group: str


class GroupMetadataMember(_Struct, frozen=True):
    """Kafka's ``GroupMetadataValue.MemberMetadata``."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes  # metadata of the selected protocol only
    assignment: bytes


class GroupMetadataValue(_Struct, frozen=True):
    protocol_type: str  # "" when none
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = -1
    members: tuple[GroupMetadataMember, ...] = ()


# ---- KIP-848 consumer groups (types 3, 5-8) -------------------------------------------------------
# Field names are Kafka's (``ConsumerGroup*Value.json``) in snake_case. Partitions are always keyed by
# topic id. All of them are replayed by ``coordinator.core.consumer.group.ConsumerGroup``.


class TopicPartitions(_Struct, frozen=True):
    """Kafka's ``TopicPartitions`` of the consumer-group records: one topic id, sorted partitions."""

    topic_id: UUID
    partitions: tuple[int, ...]


class AssignedTopicPartitions(TopicPartitions, frozen=True):
    """The ``TopicPartitions`` of record 8, with Kafka 4.3's ``AssignmentEpochs`` (KIP-1251): the
    epoch at which each partition was assigned to the member, aligned with ``partitions``. Records
    written before it have none: they read as the member's epoch (``consumer/assignment.py``, ``held_from_record``). A
    subclass, so the target-assignment record (7) keeps its bytes."""

    assignment_epochs: tuple[int, ...] | None = None


class ConsumerGroupMetadataKey(_Struct, frozen=True):
    group_id: str


class ConsumerGroupMetadataValue(_Struct, frozen=True):
    epoch: int
    metadata_hash: int = 0  # Kafka 4.1+ (KIP-1101): hash of the subscribed topics' metadata


class ConsumerGroupMemberMetadataKey(_Struct, frozen=True):
    group_id: str
    member_id: str


class ClassicMemberMetadata(_Struct, frozen=True):
    """Kafka's ``ConsumerGroupMemberMetadataValue.ClassicMemberMetadata``: set for a member of a
    consumer group that speaks the classic protocol (JoinGroup/SyncGroup), None otherwise."""

    session_timeout_ms: int
    supported_protocols: tuple[tuple[str, bytes], ...]  # (name, ConsumerProtocolSubscription), preference order


class ConsumerGroupMemberMetadataValue(_Struct, frozen=True):
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()  # sorted
    subscribed_topic_regex: str = ""  # "" = none
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    classic_member_metadata: ClassicMemberMetadata | None = None  # online migration (KIP-848)
    # With an authorizer: the topics the member's regex may match (those its principal may DESCRIBE
    # among the regex's matches when it was last resolved); None: no filter (no authorizer).
    regex_authorized_topics: tuple[str, ...] | None = None  # sorted


class ConsumerGroupTargetAssignmentMetadataKey(_Struct, frozen=True):
    group_id: str


class ConsumerGroupTargetAssignmentMetadataValue(_Struct, frozen=True):
    assignment_epoch: int


class ConsumerGroupTargetAssignmentMemberKey(_Struct, frozen=True):
    group_id: str
    member_id: str


class ConsumerGroupTargetAssignmentMemberValue(_Struct, frozen=True):
    topic_partitions: tuple[TopicPartitions, ...] = ()


class ConsumerGroupCurrentMemberAssignmentKey(_Struct, frozen=True):
    group_id: str
    member_id: str


class ConsumerGroupCurrentMemberAssignmentValue(_Struct, frozen=True):
    member_epoch: int
    previous_member_epoch: int
    state: int  # MemberState: 0 STABLE, 1 UNREVOKED_PARTITIONS, 2 UNRELEASED_PARTITIONS
    assigned_partitions: tuple[AssignedTopicPartitions, ...] = ()
    partitions_pending_revocation: tuple[AssignedTopicPartitions, ...] = ()


# ---- CoordinatorEpoch (type 1000, ours) ----------------------------------------------------------


class CoordinatorEpochKey(_Struct, frozen=True):
    """Singleton key: there is one coordinator epoch per shard log."""


class CoordinatorEpochValue(_Struct, frozen=True):
    epoch: int
    writer_id: str


# ---- Security (types 1001-1002, ours; coordinator/security) -------------------------------------


class ScramCredentialKey(_Struct, frozen=True):
    user: str
    mechanism: int  # Kafka's ScramMechanism type: 1 SCRAM-SHA-256, 2 SCRAM-SHA-512


class ScramCredentialValue(_Struct, frozen=True):
    """Kafka's UserScramCredentialRecord: never the password, only what verifies a proof."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


class AclKey(_Struct, frozen=True):
    """One ACL binding (Kafka's AccessControlEntryRecord without its id: the binding is the identity)."""

    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int


class AclValue(_Struct, frozen=True):
    """Present = the ACL exists; a tombstone deletes it."""


# ---- OffsetsUpstream (type 1003, ours; sidecar transactional offset commits) ---------------------


class OffsetsUpstreamKey(_Struct, frozen=True):
    """A group whose offsets of record live on the upstream cluster (sidecar mode: the group commits
    transactionally, so its commits are the upstream's, under the upstream's transaction markers)."""

    group: str


class OffsetsUpstreamValue(_Struct, frozen=True):
    since_ms: int  # when the group's first transactional commit was accepted here


ConsumerGroupRecordKey = (
    ConsumerGroupMetadataKey
    | ConsumerGroupMemberMetadataKey
    | ConsumerGroupTargetAssignmentMetadataKey
    | ConsumerGroupTargetAssignmentMemberKey
    | ConsumerGroupCurrentMemberAssignmentKey
)
ConsumerGroupRecordValue = (
    ConsumerGroupMetadataValue
    | ConsumerGroupMemberMetadataValue
    | ConsumerGroupTargetAssignmentMetadataValue
    | ConsumerGroupTargetAssignmentMemberValue
    | ConsumerGroupCurrentMemberAssignmentValue
)
# The same unions as tuples, for isinstance() dispatch (mypy narrows on literal tuples of classes).
CONSUMER_GROUP_RECORD_KEYS = (
    ConsumerGroupMetadataKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupCurrentMemberAssignmentKey,
)
CONSUMER_GROUP_RECORD_VALUES = (
    ConsumerGroupMetadataValue,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupTargetAssignmentMetadataValue,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupCurrentMemberAssignmentValue,
)
RecordKey = (OffsetCommitKey | GroupMetadataKey | ConsumerGroupRecordKey | CoordinatorEpochKey | ScramCredentialKey
             | AclKey | OffsetsUpstreamKey)
RecordValue = (OffsetCommitValue | GroupMetadataValue | ConsumerGroupRecordValue | CoordinatorEpochValue
               | ScramCredentialValue | AclValue | OffsetsUpstreamValue)


class Record(msgspec.Struct, frozen=True, gc=False):
    """One coordinator record. ``value is None`` is a tombstone (delete the key).

    Immutable and compared by value, like the frozen dataclass it used to be; a msgspec struct
    because start-up replay builds one per record in the log and this is five to eight times
    cheaper to construct. ``gc=False`` (not tracked by the cyclic GC) is safe because a record
    can never be part of a reference cycle: its key and value are frozen structs of immutable
    fields, built before it. Never encoded as a whole: ``encode_record`` encodes key and value.
    """

    key: RecordKey
    value: RecordValue | None


class UnknownRecordTypeError(ValueError):
    """A record type (or value version) this code does not know; loaders skip it with a warning."""


# record type -> key struct; key struct -> record type
_KEY_TYPES: dict[int, type[RecordKey]] = {
    RecordType.OFFSET_COMMIT: OffsetCommitKey,
    RecordType.GROUP_METADATA: GroupMetadataKey,
    RecordType.CONSUMER_GROUP_METADATA: ConsumerGroupMetadataKey,
    RecordType.CONSUMER_GROUP_MEMBER_METADATA: ConsumerGroupMemberMetadataKey,
    RecordType.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA: ConsumerGroupTargetAssignmentMetadataKey,
    RecordType.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER: ConsumerGroupTargetAssignmentMemberKey,
    RecordType.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT: ConsumerGroupCurrentMemberAssignmentKey,
    RecordType.COORDINATOR_EPOCH: CoordinatorEpochKey,
    RecordType.SCRAM_CREDENTIAL: ScramCredentialKey,
    RecordType.ACL: AclKey,
    RecordType.OFFSETS_UPSTREAM: OffsetsUpstreamKey,
}
_TYPE_OF_KEY: dict[type[RecordKey], int] = {cls: rt for rt, cls in _KEY_TYPES.items()}

# (record type, value version) -> value struct. Old versions stay here forever.
_VALUE_TYPES: dict[tuple[int, int], type[RecordValue]] = {
    (RecordType.OFFSET_COMMIT, 0): OffsetCommitValue,
    (RecordType.GROUP_METADATA, 0): GroupMetadataValue,
    (RecordType.CONSUMER_GROUP_METADATA, 0): ConsumerGroupMetadataValue,
    (RecordType.CONSUMER_GROUP_MEMBER_METADATA, 0): ConsumerGroupMemberMetadataValue,
    (RecordType.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, 0): ConsumerGroupTargetAssignmentMetadataValue,
    (RecordType.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, 0): ConsumerGroupTargetAssignmentMemberValue,
    (RecordType.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, 0): ConsumerGroupCurrentMemberAssignmentValue,
    (RecordType.COORDINATOR_EPOCH, 0): CoordinatorEpochValue,
    (RecordType.SCRAM_CREDENTIAL, 0): ScramCredentialValue,
    (RecordType.ACL, 0): AclValue,
    (RecordType.OFFSETS_UPSTREAM, 0): OffsetsUpstreamValue,
}
# value struct -> version written today
_WRITE_VERSION: dict[type[RecordValue], int] = {
    OffsetCommitValue: 0,
    GroupMetadataValue: 0,
    ConsumerGroupMetadataValue: 0,
    ConsumerGroupMemberMetadataValue: 0,
    ConsumerGroupTargetAssignmentMetadataValue: 0,
    ConsumerGroupTargetAssignmentMemberValue: 0,
    ConsumerGroupCurrentMemberAssignmentValue: 0,
    CoordinatorEpochValue: 0,
    ScramCredentialValue: 0,
    AclValue: 0,
    OffsetsUpstreamValue: 0,
}

_VERSION = struct.Struct(">H")
_encoder = msgspec.msgpack.Encoder(uuid_format="bytes")  # topic ids as 16 raw bytes (decoders accept both)
_key_decoders = {rt: msgspec.msgpack.Decoder(cls) for rt, cls in _KEY_TYPES.items()}
_value_decoders = {k: msgspec.msgpack.Decoder(cls) for k, cls in _VALUE_TYPES.items()}
# For decode_record, which replay runs once per record in the log: one lookup by record type gives
# the key's bound decode method and the value's, by value version (small ints: no allocation).
_decoders: dict[int, tuple[Callable[[bytes], RecordKey], dict[int, Callable[[bytes], RecordValue]]]] = {
    rt: (
        decoder.decode,
        {version: value_decoder.decode for (vrt, version), value_decoder in _value_decoders.items() if vrt == rt},
    )
    for rt, decoder in _key_decoders.items()
}


def record_type(key: RecordKey) -> int:
    return _TYPE_OF_KEY[type(key)]


def group_of(key: RecordKey) -> str | None:
    """The group a record belongs to; None for coordinator-wide records (CoordinatorEpoch)."""
    group = getattr(key, "group_id", None)
    if group is None:
        group = getattr(key, "group", None)
    return group


def encode_key(key: RecordKey) -> bytes:
    return _encoder.encode(key)


def encode_record(record: Record) -> tuple[int, bytes, bytes | None]:
    """Encode to ``(record_type, key_bytes, value_bytes or None for a tombstone)``."""
    rtype = _TYPE_OF_KEY[type(record.key)]
    key = _encoder.encode(record.key)
    if record.value is None:
        return rtype, key, None
    version = _WRITE_VERSION[type(record.value)]
    return rtype, key, _VERSION.pack(version) + _encoder.encode(record.value)


def decode_record_key(rtype: int, key: bytes) -> RecordKey:
    """The key of a record alone (what ``group_of`` needs); errors as :func:`decode_record`'s."""
    decoders = _decoders.get(rtype)
    if decoders is None:
        raise UnknownRecordTypeError(f"unknown record type {rtype}")
    return decoders[0](key)


def decode_record(rtype: int, key: bytes, value: bytes | None) -> Record:
    """Inverse of :func:`encode_record`.

    Raises ``UnknownRecordTypeError`` for unknown types/versions and ``msgspec.DecodeError`` (a
    ``ValueError``) for malformed bytes.
    """
    decoders = _decoders.get(rtype)
    if decoders is None:
        raise UnknownRecordTypeError(f"unknown record type {rtype}")
    decode_key, decode_value_by_version = decoders
    decoded_key = decode_key(key)
    if value is None:
        return Record(decoded_key, None)
    if len(value) < 2:  # _VERSION.size
        raise msgspec.DecodeError("record value shorter than its version prefix")
    version = value[0] << 8 | value[1]  # _VERSION: big-endian u16
    decode_value = decode_value_by_version.get(version)
    if decode_value is None:
        raise UnknownRecordTypeError(f"unknown value version {version} for record type {rtype}")
    # A bytes slice: for these small values, cheaper than a memoryview and its slice.
    return Record(decoded_key, decode_value(value[2:]))


# ---- replaying encoded records (loading a log) ----------------------------------------------------

IDENTITY_HEAD_SIZE = 6
"""A loaded record's identity is its type (u16) and key length (u32), then the key bytes."""

RecordReplayer = Callable[[Any, Any, bool], None]
"""``replay(key, value or None, live)``: what a group type registers per key struct."""

EncodedReplayers = dict[int, tuple[Callable[[bytes], RecordKey], dict[int, Callable[[bytes], RecordValue]], RecordReplayer]]
"""record type -> (key decoder, value decoder by value version, replayer)."""


def encoded_replayers(replayers: Mapping[type, RecordReplayer]) -> EncodedReplayers:
    """The table ``replay_encoded_record`` dispatches on, from the replayers registered per key struct."""
    return {
        int(rtype): (decode_key, decode_value_by_version, replayers[_KEY_TYPES[rtype]])
        for rtype, (decode_key, decode_value_by_version) in _decoders.items()
        if _KEY_TYPES[rtype] in replayers
    }


def replay_encoded_record(table: EncodedReplayers, identity: bytes, value: bytes | None) -> int:
    """Decode and replay one record as the record log loads it; 1 if skipped as unknown, else 0.

    ``identity`` names the record as the record log does (``recordlog.load.LoadBatch``): the
    record type (u16, big-endian), the key length (u32), then the key bytes. This does what ``replayer(decode_record(...))`` does,
    without building a ``Record``. A record of an unknown type or value version is skipped (as
    Kafka's loader skips unknown types). Malformed bytes raise ``msgspec.DecodeError`` as
    ``decode_record`` does.
    """
    found = table.get(identity[0] << 8 | identity[1])
    if found is None:
        return 1
    decode_key, decode_value_by_version, replay = found
    if value is None:
        replay(decode_key(identity[IDENTITY_HEAD_SIZE:]), None, False)
        return 0
    if len(value) < 2:  # _VERSION.size
        raise msgspec.DecodeError("record value shorter than its version prefix")
    decode_value = decode_value_by_version.get(value[0] << 8 | value[1])
    if decode_value is None:
        return 1
    replay(decode_key(identity[IDENTITY_HEAD_SIZE:]), decode_value(value[2:]), False)
    return 0


# The fast path of loading (``OffsetManager.replay_loaded``): OffsetCommit values of the version
# written today, decoded without a lookup, the key as a plain tuple (keys never change shape).
decode_offset_commit_key = msgspec.msgpack.Decoder(tuple[str, str, int]).decode
decode_offset_commit_value = msgspec.msgpack.Decoder(OffsetCommitValue).decode
OFFSET_COMMIT_VALUE_VERSION = _WRITE_VERSION[OffsetCommitValue]
assert _VALUE_TYPES[RecordType.OFFSET_COMMIT, OFFSET_COMMIT_VALUE_VERSION] is OffsetCommitValue

