"""The share group type's record types, declared for the shard's codec (``record_codec.RecordTypeDecl``).

The structs live in :mod:`.records` (with their factories, the only place they are built); this is
the declaration the registration hands the shard. Kafka's ids for the membership records (types
10-14 of ``__consumer_offsets``); ours, 1100-1101, for the share-partition state whose Kafka
counterpart (``__share_group_state``) is another topic. Kafka's type 15
(``ShareGroupStatePartitionMetadata``) is reserved and never written: a share partition is
initialized when its ``SharePartition`` record exists, in the group's own log.
"""

from __future__ import annotations

from coordinator.core.record_codec import RecordTypeDecl

from .records import (
    SHARE_BATCH_RECORD_TYPE,
    SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_RECORD_TYPE,
    SHARE_GROUP_MEMBER_METADATA_RECORD_TYPE,
    SHARE_GROUP_METADATA_RECORD_TYPE,
    SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_RECORD_TYPE,
    SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_RECORD_TYPE,
    SHARE_PARTITION_RECORD_TYPE,
    ShareBatchKey,
    ShareBatchValue,
    ShareGroupCurrentMemberAssignmentKey,
    ShareGroupCurrentMemberAssignmentValue,
    ShareGroupMemberMetadataKey,
    ShareGroupMemberMetadataValue,
    ShareGroupMetadataKey,
    ShareGroupMetadataValue,
    ShareGroupTargetAssignmentMemberKey,
    ShareGroupTargetAssignmentMemberValue,
    ShareGroupTargetAssignmentMetadataKey,
    ShareGroupTargetAssignmentMetadataValue,
    SharePartitionKey,
    SharePartitionValue,
)

SHARE_GROUP_STATE_PARTITION_METADATA = 15
RESERVED_TYPES = (SHARE_GROUP_STATE_PARTITION_METADATA,)

GROUP_RECORD_KEYS = (
    ShareGroupMemberMetadataKey,
    ShareGroupMetadataKey,
    ShareGroupTargetAssignmentMetadataKey,
    ShareGroupTargetAssignmentMemberKey,
    ShareGroupCurrentMemberAssignmentKey,
)
PARTITION_RECORD_KEYS = (SharePartitionKey, ShareBatchKey)

RECORD_TYPES: tuple[RecordTypeDecl, ...] = (
    RecordTypeDecl(SHARE_GROUP_MEMBER_METADATA_RECORD_TYPE, "ShareGroupMemberMetadata",
                   ShareGroupMemberMetadataKey, {0: ShareGroupMemberMetadataValue}),
    RecordTypeDecl(SHARE_GROUP_METADATA_RECORD_TYPE, "ShareGroupMetadata",
                   ShareGroupMetadataKey, {0: ShareGroupMetadataValue}),
    RecordTypeDecl(SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_RECORD_TYPE, "ShareGroupTargetAssignmentMetadata",
                   ShareGroupTargetAssignmentMetadataKey, {0: ShareGroupTargetAssignmentMetadataValue}),
    RecordTypeDecl(SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_RECORD_TYPE, "ShareGroupTargetAssignmentMember",
                   ShareGroupTargetAssignmentMemberKey, {0: ShareGroupTargetAssignmentMemberValue}),
    RecordTypeDecl(SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_RECORD_TYPE, "ShareGroupCurrentMemberAssignment",
                   ShareGroupCurrentMemberAssignmentKey, {0: ShareGroupCurrentMemberAssignmentValue}),
    RecordTypeDecl(SHARE_PARTITION_RECORD_TYPE, "SharePartition", SharePartitionKey, {0: SharePartitionValue}),
    RecordTypeDecl(SHARE_BATCH_RECORD_TYPE, "ShareBatch", ShareBatchKey, {0: ShareBatchValue}),
)
