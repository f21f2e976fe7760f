"""A share group as the ``Group`` contract sees it (``core/groups.py``): ListGroups, DescribeGroups,
deletion, offsets refused, the history's ownership reads and the durable view.

The state itself is the type's (``membership.ShareGroups`` and ``state.SharePartitions``, each
mutated only by its replay); a :class:`ShareGroupView` reads it live and is what the shard's one
group namespace holds under the id, so another type's request for the id sees a group of type
``share`` and refuses as Kafka does.
"""

from __future__ import annotations

from collections.abc import Mapping
from uuid import UUID

from coordinator.core.effects import Effects
from coordinator.core.errors import CoordinatorError, ErrorCode
from coordinator.core.groups import (
    DEAD,
    CommitValidator,
    ExpirationBase,
    LiveStateMembers,
    OwnedPartitions,
    Partitions,
)
from coordinator.core.record_codec import Record
from coordinator.core.requests import OffsetCommit
from coordinator.core.responses import DescribedGroup, ListedGroup
from coordinator.core.topics import TopicsImage

from .membership import ShareGroup, ShareGroups
from .records import (
    ShareGroupCurrentMemberAssignmentKey,
    ShareGroupMemberMetadataKey,
    ShareGroupMetadataKey,
    ShareGroupTargetAssignmentMemberKey,
    ShareGroupTargetAssignmentMetadataKey,
    batch_tombstone,
    partition_tombstone,
)
from .state import SharePartitions

TYPE_NAME = "share"
PROTOCOL_TYPE = "share"  # Kafka's ShareGroup.PROTOCOL_TYPE


class ShareGroupView(LiveStateMembers):
    """One share group, read through the type's state."""

    group_type = TYPE_NAME
    protocol_type = PROTOCOL_TYPE
    revokes_all_on_rebalance = False  # nothing is revoked: partitions are shared

    def __init__(self, group_id: str, groups: ShareGroups, partitions: SharePartitions, topics: TopicsImage) -> None:
        self._group_id = group_id
        self._groups = groups
        self._partitions = partitions
        self._topics = topics

    @property
    def group_id(self) -> str:
        return self._group_id

    @property
    def state(self) -> ShareGroup:
        group = self._groups.get(self._group_id)
        assert group is not None, f"share group {self._group_id} is in the namespace but not in the type's state"
        return group

    @property
    def persisted(self) -> object:
        """Everything the records determine: membership and every share partition of the group."""
        g = self.state
        members = tuple(sorted(
            (m.member_id, m.member_epoch, m.previous_member_epoch, m.rack_id, m.client_id, m.client_host,
             m.subscribed_topic_names, _sorted_assignment(m.assigned))
            for m in g.members.values()))
        targets = tuple(sorted((mid, _sorted_assignment(a)) for mid, a in g.targets.items()))
        partitions = tuple(sorted(((str(p.key.topic_id), p.key.partition), p.view())
                                  for p in self._partitions.of_group(self._group_id)))
        return g.epoch, g.metadata_hash, g.assignment_epoch, members, targets, partitions

    def list_row(self) -> ListedGroup:
        return ListedGroup(self._group_id, PROTOCOL_TYPE, self.state_name, TYPE_NAME)

    def describe_row(self) -> DescribedGroup:
        # Described by ShareGroupDescribe; DescribeGroups answers as for any non-classic group.
        return DescribedGroup(self._group_id, ErrorCode.NONE, DEAD, exists=False)

    # A share group has no committed offsets (its progress is the share partitions' state): Kafka
    # refuses OffsetCommit/OffsetFetch/OffsetDelete for its id as for a group that is not there.
    def validate_offset_commit(self, req: OffsetCommit, fx: Effects) -> CommitValidator | None:
        raise CoordinatorError(ErrorCode.GROUP_ID_NOT_FOUND)

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> None:
        raise CoordinatorError(ErrorCode.GROUP_ID_NOT_FOUND)

    def validate_offset_delete(self) -> None:
        raise CoordinatorError(ErrorCode.GROUP_ID_NOT_FOUND)

    def validate_delete_group(self) -> None:
        if self.state.members:
            raise CoordinatorError(ErrorCode.NON_EMPTY_GROUP)

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return any(topic in m.subscribed_topic_names for m in self.state.members.values())

    def offset_expiration_base(self) -> ExpirationBase | None:
        return None

    def tombstones(self) -> list[Record]:
        """The share partitions' state first (batches, then the partition), then the membership
        records in Kafka's order (``createGroupTombstoneRecords``)."""
        gid, g = self._group_id, self.state
        out: list[Record] = []
        for p in list(self._partitions.of_group(gid)):
            out += [Record(r.key, r.value) for r in (batch_tombstone(p.key, first) for first in p.batches)]
            out.append(Record(partition_tombstone(p.key).key, None))
        out += [Record(ShareGroupCurrentMemberAssignmentKey(gid, m), None) for m in g.members]
        out += [Record(ShareGroupTargetAssignmentMemberKey(gid, m), None) for m in g.targets]
        out.append(Record(ShareGroupTargetAssignmentMetadataKey(gid), None))
        out += [Record(ShareGroupMemberMetadataKey(gid, m), None) for m in g.members]
        out.append(Record(ShareGroupMetadataKey(gid), None))
        return out

    def owned_partitions(self) -> dict[str, OwnedPartitions]:
        return {mid: (None, self._names(m.assigned)) for mid, m in self.state.members.items()}

    def member_partitions(self, member_id: str) -> OwnedPartitions | None:
        member = self.state.members.get(member_id)
        return None if member is None else (None, self._names(member.assigned))

    def _names(self, assignment: Mapping[UUID, frozenset[int]]) -> Partitions:
        out: dict[str, frozenset[int]] = {}
        for topic_id, partitions in assignment.items():
            info = self._topics.by_id(topic_id)
            out[info.name if info is not None else str(topic_id)] = frozenset(partitions)
        return out


def _sorted_assignment(assignment: Mapping[UUID, frozenset[int]]) -> tuple[tuple[str, tuple[int, ...]], ...]:
    return tuple(sorted((str(t), tuple(sorted(ps))) for t, ps in assignment.items() if ps))
