"""A KIP-848 consumer group member: its data, its reconciliation state and its record values.

:class:`ConsumerGroupMember` (Kafka's ``ConsumerGroupMember``) is immutable and updated with
``msgspec.structs.replace``. Its fields come in two halves, each written as one record and read back
by the group's replay (:mod:`.group`, the only mutator): record 5, the member metadata (subscription,
client, rack, server assignor, classic-protocol metadata, what a regex may match), and record 8, the
current assignment (member epoch, previous epoch, :class:`MemberState`, assigned and
pending-revocation partitions with their assignment epochs). ``metadata_view`` / ``assignment_view``
tell which half changed, so which record a change needs. :class:`HeldRecord` is a member's last
record 8 with the partition objects replaying it gave, so a member catching up to a new epoch with
the same partitions reuses both. How a member moves between states is :mod:`.reconciliation`; the
assignment values and their epochs are :mod:`.assignment`.
"""

from __future__ import annotations

import enum
from typing import Any
from uuid import UUID

import msgspec
from msgspec.structs import replace

from coordinator.core.consumer.schema import (
    ClassicMemberMetadata,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataValue,
)

from .assignment import (
    NO_EPOCHS,
    NO_PARTITIONS,
    Assignment,
    PartitionEpochs,
    held_from_record,
    held_to_record,
    merged_epochs,
    topic_epoch,
)

LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


class MemberState(enum.IntEnum):
    """A member's reconciliation state (persisted as an int8 in record 8)."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127  # any byte this code does not know (forward compatibility)

    @classmethod
    def parse(cls, value: int) -> MemberState:
        return _MEMBER_STATES.get(value, cls.UNKNOWN)


_MEMBER_STATES = {int(state): state for state in MemberState}
"""Record 8's state byte -> state (a dict lookup: calling the enum costs a microsecond per replay)."""



class ConsumerGroupMember(msgspec.Struct, frozen=True, gc=False):
    """One member (Kafka's ``ConsumerGroupMember``); immutable, updated with ``msgspec.structs.replace``."""

    member_id: str
    # ---- record 5 (member metadata) ----
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()  # sorted, unique
    subscribed_topic_regex: str = ""  # "" = none
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    # With an authorizer: what the regex may match (its matches the principal may DESCRIBE, as
    # last resolved by a heartbeat); None: no filter. See ``heartbeat.py``.
    regex_topics: frozenset[str] | None = None
    # Set for a member that speaks the classic protocol (JoinGroup/SyncGroup/Heartbeat) inside this
    # consumer group: an online migration (``classic_members.py``).
    classic: ClassicMemberMetadata | None = None
    # ---- record 8 (current assignment) ----
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned_partitions: Assignment = msgspec.field(default_factory=lambda: NO_PARTITIONS)
    partitions_pending_revocation: Assignment = msgspec.field(default_factory=lambda: NO_PARTITIONS)
    assignment_epochs: PartitionEpochs = msgspec.field(default_factory=lambda: NO_EPOCHS)

    def is_reconciled_to(self, epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == epoch

    @property
    def uses_classic_protocol(self) -> bool:
        return self.classic is not None

    def assignment_epoch(self, topic_id: UUID, partition: int) -> int | None:
        """The epoch at which the member got ``partition`` (assigned or pending revocation); None
        when it holds no such partition (Kafka's ``assignmentEpoch`` / ``pendingRevocationEpoch``)."""
        if partition not in self.assigned_partitions.get(topic_id, ()) and partition not in (
            self.partitions_pending_revocation.get(topic_id, ())
        ):
            return None
        known = self.assignment_epochs.get(topic_id)
        return None if known is None else topic_epoch(known, partition)

    def metadata_view(self) -> tuple[Any, ...]:
        """The record-5 fields: a change here means a member-metadata record."""
        return (
            self.instance_id,
            self.rack_id,
            self.client_id,
            self.client_host,
            self.subscribed_topic_names,
            self.subscribed_topic_regex,
            self.rebalance_timeout_ms,
            self.server_assignor,
            self.classic,
            self.regex_topics,
        )

    def assignment_view(self) -> tuple[Any, ...]:
        """The record-8 fields: a change here means a current-assignment record."""
        return (
            self.member_epoch,
            self.previous_member_epoch,
            self.state,
            self.assigned_partitions,
            self.partitions_pending_revocation,
            self.assignment_epochs,
        )

    def to_metadata_value(self) -> ConsumerGroupMemberMetadataValue:
        return ConsumerGroupMemberMetadataValue(
            instance_id=self.instance_id,
            rack_id=self.rack_id,
            client_id=self.client_id,
            client_host=self.client_host,
            subscribed_topic_names=self.subscribed_topic_names,
            subscribed_topic_regex=self.subscribed_topic_regex,
            rebalance_timeout_ms=self.rebalance_timeout_ms,
            server_assignor=self.server_assignor,
            classic_member_metadata=self.classic,
            regex_authorized_topics=None if self.regex_topics is None else tuple(sorted(self.regex_topics)),
        )

    def to_assignment_value(self) -> ConsumerGroupCurrentMemberAssignmentValue:
        return ConsumerGroupCurrentMemberAssignmentValue(
            member_epoch=self.member_epoch,
            previous_member_epoch=self.previous_member_epoch,
            state=int(self.state),
            assigned_partitions=held_to_record(self.assigned_partitions, self.assignment_epochs),
            partitions_pending_revocation=held_to_record(self.partitions_pending_revocation, self.assignment_epochs),
        )

    def with_metadata(self, value: ConsumerGroupMemberMetadataValue) -> ConsumerGroupMember:
        return replace(
            self,
            instance_id=value.instance_id,
            rack_id=value.rack_id,
            client_id=value.client_id,
            client_host=value.client_host,
            subscribed_topic_names=tuple(sorted(set(value.subscribed_topic_names))),
            subscribed_topic_regex=value.subscribed_topic_regex or "",
            rebalance_timeout_ms=value.rebalance_timeout_ms,
            server_assignor=value.server_assignor,
            classic=value.classic_member_metadata,
            regex_topics=None if value.regex_authorized_topics is None else frozenset(value.regex_authorized_topics),
        )

    def with_assignment(self, value: ConsumerGroupCurrentMemberAssignmentValue) -> ConsumerGroupMember:
        # Old records (no assignment epochs): every partition counts as assigned at the member's
        # epoch, never negative (a static member that left is at -2), as Kafka reads them.
        default_epoch = max(value.member_epoch, 0)
        assigned, of_assigned = held_from_record(value.assigned_partitions, default_epoch)
        pending, of_pending = held_from_record(value.partitions_pending_revocation, default_epoch)
        return replace(
            self,
            member_epoch=value.member_epoch,
            previous_member_epoch=value.previous_member_epoch,
            state=MemberState.parse(value.state),
            assigned_partitions=assigned,
            partitions_pending_revocation=pending,
            assignment_epochs=merged_epochs(assigned, of_assigned, pending, of_pending),
        )


def held_epochs_complete(value: ConsumerGroupCurrentMemberAssignmentValue) -> bool:
    """Whether every partition of a record 8 carries its assignment epoch (then the partitions
    alone say what a replay holds, whatever the record's member epoch)."""
    for topics in (value.assigned_partitions, value.partitions_pending_revocation):
        for tp in topics:
            if tp.assignment_epochs is None or len(tp.assignment_epochs) != len(tp.partitions):
                return False
    return True


class HeldRecord(msgspec.Struct, frozen=True, gc=False):
    """A member's last record 8 and the partition objects replaying it gave the member."""

    value: ConsumerGroupCurrentMemberAssignmentValue
    assigned: Assignment
    pending: Assignment
    epochs: PartitionEpochs

    def holds(self, member: ConsumerGroupMember) -> bool:
        """The member holds exactly this record's partitions, as these very objects."""
        return (
            member.assigned_partitions is self.assigned
            and member.partitions_pending_revocation is self.pending
            and member.assignment_epochs is self.epochs
        )

