"""Record factories of KIP-848 consumer groups: the only place their records are built.

Kafka's ``GroupCoordinatorRecordHelpers`` for the consumer records (types 3, 5, 6, 7, 8, see
``group.py`` for what each replays into), and the tombstones in Kafka's order.
"""

from __future__ import annotations

from coordinator.core.consumer.schema import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
)
from coordinator.core.record_codec import Record

from .assignment import Assignment, assignment_to_record
from .member import ConsumerGroupMember


def group_epoch_record(group_id: str, group_epoch: int, metadata_hash: int) -> Record:
    """Record 3: the group epoch and the subscribed topics' metadata hash."""
    return Record(ConsumerGroupMetadataKey(group_id), ConsumerGroupMetadataValue(group_epoch, metadata_hash))


def member_metadata_record(group_id: str, member: ConsumerGroupMember) -> Record:
    """Record 5: the member's subscription and client fields."""
    return Record(ConsumerGroupMemberMetadataKey(group_id, member.member_id), member.to_metadata_value())


def target_epoch_record(group_id: str, assignment_epoch: int) -> Record:
    """Record 6: the epoch the target assignment was computed for."""
    return Record(
        ConsumerGroupTargetAssignmentMetadataKey(group_id), ConsumerGroupTargetAssignmentMetadataValue(assignment_epoch)
    )


def target_member_record(group_id: str, member_id: str, target: Assignment) -> Record:
    """Record 7: one member's target assignment."""
    return Record(
        ConsumerGroupTargetAssignmentMemberKey(group_id, member_id),
        ConsumerGroupTargetAssignmentMemberValue(assignment_to_record(target)),
    )


def current_assignment_record(
    group_id: str, member: ConsumerGroupMember, value: ConsumerGroupCurrentMemberAssignmentValue | None = None
) -> Record:
    """Record 8: the member's epochs, state and current assignment (``value``: that, already built
    by ``ConsumerGroup.assignment_value``)."""
    return Record(
        ConsumerGroupCurrentMemberAssignmentKey(group_id, member.member_id),
        value if value is not None else member.to_assignment_value(),
    )


def member_tombstones(group_id: str, member_id: str) -> list[Record]:
    """A member's tombstones, in Kafka's order (``removeMember``): 8, 7, 5."""
    return [
        Record(ConsumerGroupCurrentMemberAssignmentKey(group_id, member_id), None),
        Record(ConsumerGroupTargetAssignmentMemberKey(group_id, member_id), None),
        Record(ConsumerGroupMemberMetadataKey(group_id, member_id), None),
    ]


def group_tombstones(group_id: str, member_ids: list[str], target_member_ids: list[str]) -> list[Record]:
    """The records that delete a whole group, in Kafka's order (``createGroupTombstoneRecords``)."""
    records = [Record(ConsumerGroupCurrentMemberAssignmentKey(group_id, m), None) for m in member_ids]
    records += [Record(ConsumerGroupTargetAssignmentMemberKey(group_id, m), None) for m in target_member_ids]
    records.append(Record(ConsumerGroupTargetAssignmentMetadataKey(group_id), None))
    records += [Record(ConsumerGroupMemberMetadataKey(group_id, m), None) for m in member_ids]
    records.append(Record(ConsumerGroupMetadataKey(group_id), None))
    return records
