"""A streams group as its records rebuild it (Kafka's ``StreamsGroup`` and the streams ``replay``
paths of ``GroupMetadataManager``), and the group state derived from it.

``StreamsGroupState.replay`` is the only code that changes a group's durable state: the heartbeat
(``heartbeat.py``) computes records with the factories of ``records.py`` and replays them, and a
restarted or standby coordinator replays the same records from the log, so both hold the same
group. What is not in the records (task offsets, the refined assignment, the endpoint epoch, the
configured topology) is soft state kept beside it and derived again after a failover, as in Kafka.

Group states (Kafka's ``StreamsGroup.maybeUpdateGroupState``): ``Empty`` (no members), then
``NotReady`` (no topology, or its epoch not yet validated against the topics), ``Assigning`` (the
group epoch is ahead of the target assignment's), ``Reconciling`` (some member is not STABLE at the
assignment epoch), else ``Stable``.
"""

from __future__ import annotations

import msgspec

from .member import MemberState, StreamsGroupMember
from .records import (
    StreamsGroupCurrentMemberAssignmentKey,
    StreamsGroupCurrentMemberAssignmentValue,
    StreamsGroupMemberMetadataKey,
    StreamsGroupMemberMetadataValue,
    StreamsGroupMetadataKey,
    StreamsGroupMetadataValue,
    StreamsGroupTargetAssignmentMemberKey,
    StreamsGroupTargetAssignmentMemberValue,
    StreamsGroupTargetAssignmentMetadataKey,
    StreamsGroupTargetAssignmentMetadataValue,
    StreamsGroupTopologyKey,
    StreamsGroupTopologyValue,
    StreamsRecord,
    member_from_records,
    target_from_record,
)
from .tasks import NO_TASKS_WITH_EPOCHS, TasksTuple

LEAVE_GROUP_MEMBER_EPOCH = -1


class StreamsGroupState:
    """The durable state of one streams group."""

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.metadata_hash = 0
        self.validated_topology_epoch = -1
        self.assignment_configs: dict[str, str] = {}
        self.topology: StreamsGroupTopologyValue | None = None
        self.assignment_epoch = 0
        self.assignment_timestamp = 0
        self.targets: dict[str, TasksTuple] = {}
        self.members: dict[str, StreamsGroupMember] = {}
        self._metadata: dict[str, StreamsGroupMemberMetadataValue] = {}
        self._assignments: dict[str, StreamsGroupCurrentMemberAssignmentValue] = {}
        self.deleted = False

    @property
    def state_name(self) -> str:
        if not self.members:
            return "Empty"
        if self.topology is None or self.topology.epoch != self.validated_topology_epoch:
            return "NotReady"
        if self.group_epoch > self.assignment_epoch:
            return "Assigning"
        if any(not m.is_reconciled_to(self.assignment_epoch) for m in self.members.values()):
            return "Reconciling"
        return "Stable"

    def replay(self, record: StreamsRecord) -> None:
        """Apply one record of this group (a tombstone deletes what its key names)."""
        key, value = record.key, record.value
        if isinstance(key, StreamsGroupMetadataKey):
            if value is None:
                self.deleted = True
                return
            assert isinstance(value, StreamsGroupMetadataValue)
            self.deleted = False
            self.group_epoch, self.metadata_hash = value.epoch, value.metadata_hash
            self.validated_topology_epoch = value.validated_topology_epoch
            self.assignment_configs = {kv.key: kv.value for kv in value.last_assignment_configs or ()}
        elif isinstance(key, StreamsGroupTopologyKey):
            self.topology = value if isinstance(value, StreamsGroupTopologyValue) else None
        elif isinstance(key, StreamsGroupTargetAssignmentMetadataKey):
            if isinstance(value, StreamsGroupTargetAssignmentMetadataValue):
                self.assignment_epoch, self.assignment_timestamp = value.assignment_epoch, value.assignment_timestamp
            else:
                self.assignment_epoch, self.assignment_timestamp = 0, 0
        elif isinstance(key, StreamsGroupTargetAssignmentMemberKey):
            if isinstance(value, StreamsGroupTargetAssignmentMemberValue):
                self.targets[key.member_id] = target_from_record(value)
            else:
                self.targets.pop(key.member_id, None)
        elif isinstance(key, StreamsGroupMemberMetadataKey):
            if isinstance(value, StreamsGroupMemberMetadataValue):
                self._metadata[key.member_id] = value
                self._rebuild(key.member_id)
            else:
                self._metadata.pop(key.member_id, None)
                self._assignments.pop(key.member_id, None)
                self.members.pop(key.member_id, None)
        elif isinstance(key, StreamsGroupCurrentMemberAssignmentKey):
            if isinstance(value, StreamsGroupCurrentMemberAssignmentValue):
                self._assignments[key.member_id] = value
            else:
                # Kafka: the member stays until its metadata tombstone, at the leave epoch, owning nothing.
                self._assignments[key.member_id] = StreamsGroupCurrentMemberAssignmentValue(
                    LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_MEMBER_EPOCH, int(MemberState.STABLE))
            self._rebuild(key.member_id)

    def _rebuild(self, member_id: str) -> None:
        metadata = self._metadata.get(member_id)
        if metadata is None:
            return  # an assignment before its member's metadata: the metadata record builds it
        self.members[member_id] = member_from_records(member_id, metadata, self._assignments.get(member_id))

    def owned(self, member_id: str) -> TasksTuple:
        member = self.members.get(member_id)
        return member.assigned.tasks() if member is not None else TasksTuple()


def with_tasks_cleared(member: StreamsGroupMember) -> StreamsGroupMember:
    """A member at the leave epoch owning nothing (what a current-assignment tombstone leaves)."""
    return msgspec.structs.replace(member, member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                                   previous_member_epoch=LEAVE_GROUP_MEMBER_EPOCH, state=MemberState.STABLE,
                                   assigned=NO_TASKS_WITH_EPOCHS, pending_revocation=NO_TASKS_WITH_EPOCHS)
