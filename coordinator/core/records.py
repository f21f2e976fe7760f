"""The built-in record types and their codec: a codec over the owners' declarations.

Modelled on Kafka's ``__consumer_offsets`` records (``CoordinatorRecordType``, ``CoordinatorRecordSerde``):
each record is a key plus a value; a ``None`` value is a tombstone. Each owner declares its own record
types next to the code that replays them (``record_codec.RecordTypeDecl``); nothing here defines a
struct. This module collects the declarations of the core's built-in owners into
:data:`BUILTIN_RECORD_TYPES` and builds :data:`CODEC` from them (a type id declared twice fails
here, at import). A shard builds its own codec from the registrations it was given
(``CoordinatorShard.codec``: these plus the node's services and any extra group type), and the log
is written with that one; the functions below are the built-in codec's, for tools and tests.

====  ==================================  ============================================================
type  owner (declared in)                 record
====  ==================================  ============================================================
1     offsets (``offset_records.py``)     OffsetCommit
2     classic (``classic/schema.py``)     GroupMetadata
3-8   consumer (``consumer/schema.py``)   ConsumerGroup* (4 reserved: never written, KIP-1101)
10-14 share (``share/schema.py``)         ShareGroup* (15 reserved: never written)
17,   streams (``streams/schema.py``)     StreamsGroup* (18 not declared: not in Kafka trunk)
19-23
1000  the shard (``epoch.py``)            CoordinatorEpoch
1001  security (``security/records.py``)  ScramCredential, Acl (a node service: not built in)
-1002
1003  txn offsets (``txn_offsets.py``)    OffsetsUpstream
1004  configs (``group_configs.py``)      GroupConfig (a group's per-group config overrides)
1100  share (``share/schema.py``)         SharePartition, ShareBatch (share-partition state)
-1101
====  ==================================  ============================================================

Record types are Kafka's where Kafka has one; ours start at 1000. The wire format and the
compatibility rule (fields only ever appended; a new value version for anything else, old structs
kept forever) are ``record_codec``'s.
"""

from __future__ import annotations

from enum import IntEnum

from coordinator.core import epoch, group_configs, offset_records, txn_offsets
from coordinator.core.classic import schema as classic_schema
from coordinator.core.classic.schema import (
    GroupMetadataKey,
    GroupMetadataMember,
    GroupMetadataValue,
)
from coordinator.core.consumer import schema as consumer_schema
from coordinator.core.consumer.schema import (
    AssignedTopicPartitions,
    ClassicMemberMetadata,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    TopicPartitions,
)
from coordinator.core.epoch import CoordinatorEpochKey, CoordinatorEpochValue
from coordinator.core.offset_records import OffsetCommitKey, OffsetCommitValue
from coordinator.core.record_codec import (
    IDENTITY_HEAD_SIZE,
    Record,
    RecordCodec,
    RecordTypeDecl,
    UnknownRecordTypeError,
    encode_key,
    group_of,
    replay_encoded_record,
)
from coordinator.core.share import schema as share_schema
from coordinator.core.streams import schema as streams_schema
from coordinator.core.txn_offsets import OffsetsUpstreamKey, OffsetsUpstreamValue

# Re-exported: the built-in structs and the mechanism, under the names the log's readers (tools,
# tests, benches) have always imported from here. Code inside the core imports them from their owner.
__all__ = [
    "BUILTIN_RECORD_TYPES", "CODEC", "IDENTITY_HEAD_SIZE", "AssignedTopicPartitions", "ClassicMemberMetadata",
    "ConsumerGroupCurrentMemberAssignmentKey", "ConsumerGroupCurrentMemberAssignmentValue",
    "ConsumerGroupMemberMetadataKey", "ConsumerGroupMemberMetadataValue", "ConsumerGroupMetadataKey",
    "ConsumerGroupMetadataValue", "ConsumerGroupTargetAssignmentMemberKey", "ConsumerGroupTargetAssignmentMemberValue",
    "ConsumerGroupTargetAssignmentMetadataKey", "ConsumerGroupTargetAssignmentMetadataValue", "CoordinatorEpochKey",
    "CoordinatorEpochValue", "GroupMetadataKey", "GroupMetadataMember", "GroupMetadataValue", "OffsetCommitKey",
    "OffsetCommitValue", "OffsetsUpstreamKey", "OffsetsUpstreamValue", "Record", "RecordType", "TopicPartitions", "UnknownRecordTypeError", "decode_record",
    "decode_record_key", "encode_key", "encode_record", "group_of", "record_type", "replay_encoded_record",
]


class RecordType(IntEnum):
    """The built-in record type ids, by name (each declared by its owner, see the table above)."""

    OFFSET_COMMIT = offset_records.OFFSET_COMMIT
    GROUP_METADATA = classic_schema.GROUP_METADATA
    CONSUMER_GROUP_METADATA = consumer_schema.CONSUMER_GROUP_METADATA
    CONSUMER_GROUP_PARTITION_METADATA = consumer_schema.CONSUMER_GROUP_PARTITION_METADATA
    CONSUMER_GROUP_MEMBER_METADATA = consumer_schema.CONSUMER_GROUP_MEMBER_METADATA
    CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA = consumer_schema.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA
    CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER = consumer_schema.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER
    CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT = consumer_schema.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT
    COORDINATOR_EPOCH = epoch.COORDINATOR_EPOCH
    OFFSETS_UPSTREAM = txn_offsets.OFFSETS_UPSTREAM
    GROUP_CONFIG = group_configs.GROUP_CONFIG


BUILTIN_RECORD_TYPES: tuple[RecordTypeDecl, ...] = (
    *offset_records.RECORD_TYPES,
    *classic_schema.RECORD_TYPES,
    *consumer_schema.RECORD_TYPES,
    *streams_schema.RECORD_TYPES,
    *share_schema.RECORD_TYPES,
    *epoch.RECORD_TYPES,
    *txn_offsets.RECORD_TYPES,
    *group_configs.RECORD_TYPES,
)
"""What the core's own owners declare (each also lists its part in its shard registration)."""

CODEC = RecordCodec(BUILTIN_RECORD_TYPES)

record_type = CODEC.record_type
encode_record = CODEC.encode_record
decode_record = CODEC.decode_record
decode_record_key = CODEC.decode_record_key
