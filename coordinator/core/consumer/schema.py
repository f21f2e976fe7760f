"""The KIP-848 consumer group's record types (Kafka's types 3, 5-8), their structs and declarations.

Field names are Kafka's (``ConsumerGroup*Value.json``) in snake_case. Partitions are always keyed by
topic id. All of them are replayed by ``group.ConsumerGroup`` (through ``replay.py``); ``records.py``
holds the factories.

====  ==========================================  ==========================================
type  key                                         value
====  ==========================================  ==========================================
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
====  ==========================================  ==========================================

Type 4 (``ConsumerGroupPartitionMetadata``) is never written: Kafka 4.1+ replaced it by the metadata
hash carried in ``ConsumerGroupMetadataValue`` (KIP-1101), which is what we do; it is reserved here
(:data:`RESERVED_TYPES`) so no other type takes its id. Regex resolutions (Kafka's type 16) are not
persisted either: regexes are resolved synchronously against the current topic metadata.
"""

from __future__ import annotations

from uuid import UUID

from coordinator.core.record_codec import RecordStruct, RecordTypeDecl

CONSUMER_GROUP_METADATA = 3
CONSUMER_GROUP_PARTITION_METADATA = 4
CONSUMER_GROUP_MEMBER_METADATA = 5
CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA = 6
CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER = 7
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT = 8
RESERVED_TYPES = (CONSUMER_GROUP_PARTITION_METADATA,)


class TopicPartitions(RecordStruct, frozen=True):
    """Kafka's ``TopicPartitions`` of the consumer-group records: one topic id, sorted partitions."""

    topic_id: UUID
    partitions: tuple[int, ...]


class AssignedTopicPartitions(TopicPartitions, frozen=True):
    """The ``TopicPartitions`` of record 8, with Kafka 4.3's ``AssignmentEpochs`` (KIP-1251): the
    epoch at which each partition was assigned to the member, aligned with ``partitions``. Records
    written before it have none: they read as the member's epoch (``consumer/assignment.py``, ``held_from_record``). A
    subclass, so the target-assignment record (7) keeps its bytes."""

    assignment_epochs: tuple[int, ...] | None = None


class ConsumerGroupMetadataKey(RecordStruct, frozen=True):
    group_id: str


class ConsumerGroupMetadataValue(RecordStruct, frozen=True):
    epoch: int
    metadata_hash: int = 0  # Kafka 4.1+ (KIP-1101): hash of the subscribed topics' metadata


class ConsumerGroupMemberMetadataKey(RecordStruct, frozen=True):
    group_id: str
    member_id: str


class ClassicMemberMetadata(RecordStruct, frozen=True):
    """Kafka's ``ConsumerGroupMemberMetadataValue.ClassicMemberMetadata``: set for a member of a
    consumer group that speaks the classic protocol (JoinGroup/SyncGroup), None otherwise."""

    session_timeout_ms: int
    supported_protocols: tuple[tuple[str, bytes], ...]  # (name, ConsumerProtocolSubscription), preference order


class ConsumerGroupMemberMetadataValue(RecordStruct, frozen=True):
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


class ConsumerGroupTargetAssignmentMetadataKey(RecordStruct, frozen=True):
    group_id: str


class ConsumerGroupTargetAssignmentMetadataValue(RecordStruct, frozen=True):
    assignment_epoch: int


class ConsumerGroupTargetAssignmentMemberKey(RecordStruct, frozen=True):
    group_id: str
    member_id: str


class ConsumerGroupTargetAssignmentMemberValue(RecordStruct, frozen=True):
    topic_partitions: tuple[TopicPartitions, ...] = ()


class ConsumerGroupCurrentMemberAssignmentKey(RecordStruct, frozen=True):
    group_id: str
    member_id: str


class ConsumerGroupCurrentMemberAssignmentValue(RecordStruct, frozen=True):
    member_epoch: int
    previous_member_epoch: int
    state: int  # MemberState: 0 STABLE, 1 UNREVOKED_PARTITIONS, 2 UNRELEASED_PARTITIONS
    assigned_partitions: tuple[AssignedTopicPartitions, ...] = ()
    partitions_pending_revocation: tuple[AssignedTopicPartitions, ...] = ()


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

RECORD_TYPES = (
    RecordTypeDecl(CONSUMER_GROUP_METADATA, "ConsumerGroupMetadata", ConsumerGroupMetadataKey,
                   {0: ConsumerGroupMetadataValue}),
    RecordTypeDecl(CONSUMER_GROUP_MEMBER_METADATA, "ConsumerGroupMemberMetadata", ConsumerGroupMemberMetadataKey,
                   {0: ConsumerGroupMemberMetadataValue}),
    RecordTypeDecl(CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA, "ConsumerGroupTargetAssignmentMetadata",
                   ConsumerGroupTargetAssignmentMetadataKey, {0: ConsumerGroupTargetAssignmentMetadataValue}),
    RecordTypeDecl(CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER, "ConsumerGroupTargetAssignmentMember",
                   ConsumerGroupTargetAssignmentMemberKey, {0: ConsumerGroupTargetAssignmentMemberValue}),
    RecordTypeDecl(CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, "ConsumerGroupCurrentMemberAssignment",
                   ConsumerGroupCurrentMemberAssignmentKey, {0: ConsumerGroupCurrentMemberAssignmentValue}),
)
