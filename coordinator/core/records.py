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
1000  the shard (``epoch.py``)            CoordinatorEpoch
1001  security (``security/records.py``)  ScramCredential, Acl (a node service: not built in)
-1002
====  ==================================  ============================================================

Record types are Kafka's where Kafka has one; ours start at 1000. The wire format and the
compatibility rule (fields only ever appended; a new value version for anything else, old structs
kept forever) are ``record_codec``'s.
"""

from __future__ import annotations

from enum import IntEnum

from coordinator.core import epoch, offset_records
from coordinator.core.classic import schema as classic_schema

# Re-exported: the structs and the mechanism under the names readers of the log have always used.
from coordinator.core.classic.schema import (
    GroupMetadataKey as GroupMetadataKey,
)
from coordinator.core.classic.schema import (
    GroupMetadataMember as GroupMetadataMember,
)
from coordinator.core.classic.schema import (
    GroupMetadataValue as GroupMetadataValue,
)
from coordinator.core.consumer import schema as consumer_schema
from coordinator.core.consumer.schema import (
    AssignedTopicPartitions as AssignedTopicPartitions,
)
from coordinator.core.consumer.schema import (
    ClassicMemberMetadata as ClassicMemberMetadata,
)
from coordinator.core.consumer.schema import (
    ConsumerGroupCurrentMemberAssignmentKey as ConsumerGroupCurrentMemberAssignmentKey,
)
from coordinator.core.consumer.schema import (
    ConsumerGroupCurrentMemberAssignmentValue as ConsumerGroupCurrentMemberAssignmentValue,
)
from coordinator.core.consumer.schema import (
    ConsumerGroupMemberMetadataKey as ConsumerGroupMemberMetadataKey,
)
from coordinator.core.consumer.schema import (
    ConsumerGroupMemberMetadataValue as ConsumerGroupMemberMetadataValue,
)
from coordinator.core.consumer.schema import (
    ConsumerGroupMetadataKey as ConsumerGroupMetadataKey,
)
from coordinator.core.consumer.schema import (
    ConsumerGroupMetadataValue as ConsumerGroupMetadataValue,
)
from coordinator.core.consumer.schema import (
    ConsumerGroupTargetAssignmentMemberKey as ConsumerGroupTargetAssignmentMemberKey,
)
from coordinator.core.consumer.schema import (
    ConsumerGroupTargetAssignmentMemberValue as ConsumerGroupTargetAssignmentMemberValue,
)
from coordinator.core.consumer.schema import (
    ConsumerGroupTargetAssignmentMetadataKey as ConsumerGroupTargetAssignmentMetadataKey,
)
from coordinator.core.consumer.schema import (
    ConsumerGroupTargetAssignmentMetadataValue as ConsumerGroupTargetAssignmentMetadataValue,
)
from coordinator.core.consumer.schema import (
    TopicPartitions as TopicPartitions,
)
from coordinator.core.epoch import CoordinatorEpochKey as CoordinatorEpochKey
from coordinator.core.epoch import CoordinatorEpochValue as CoordinatorEpochValue
from coordinator.core.offset_records import OffsetCommitKey as OffsetCommitKey
from coordinator.core.offset_records import OffsetCommitValue as OffsetCommitValue
from coordinator.core.record_codec import IDENTITY_HEAD_SIZE as IDENTITY_HEAD_SIZE
from coordinator.core.record_codec import Record as Record
from coordinator.core.record_codec import RecordCodec, RecordTypeDecl
from coordinator.core.record_codec import UnknownRecordTypeError as UnknownRecordTypeError
from coordinator.core.record_codec import encode_key as encode_key
from coordinator.core.record_codec import group_of as group_of
from coordinator.core.record_codec import replay_encoded_record as replay_encoded_record


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


BUILTIN_RECORD_TYPES: tuple[RecordTypeDecl, ...] = (
    *offset_records.RECORD_TYPES,
    *classic_schema.RECORD_TYPES,
    *consumer_schema.RECORD_TYPES,
    *epoch.RECORD_TYPES,
)
"""What the core's own owners declare (each also lists its part in its shard registration)."""

CODEC = RecordCodec(BUILTIN_RECORD_TYPES)

record_type = CODEC.record_type
encode_record = CODEC.encode_record
decode_record = CODEC.decode_record
decode_record_key = CODEC.decode_record_key
