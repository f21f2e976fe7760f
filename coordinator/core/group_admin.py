"""ListGroups, DescribeGroups and DeleteGroups over every group type the shard hosts."""

from __future__ import annotations

from typing import TYPE_CHECKING

from coordinator.core.classic.state import STABLE, Api, Check, state_error
from coordinator.core.consumer.group import EMPTY as CONSUMER_EMPTY
from coordinator.core.consumer.group import ConsumerGroup
from coordinator.core.effects import Effects
from coordinator.core.errors import ErrorCode
from coordinator.core.events import GroupDeleted, OffsetsDeleted
from coordinator.core.groups import Group
from coordinator.core.offsets import OffsetManager
from coordinator.core.records import GroupMetadataKey, Record
from coordinator.core.requests import DeleteGroups, DescribeGroups, ListGroups
from coordinator.core.responses import (
    DeletableGroupResult,
    DeleteGroupsResponse,
    DescribedGroup,
    DescribedGroupMember,
    DescribeGroupsResponse,
    ListedGroup,
    ListGroupsResponse,
)

if TYPE_CHECKING:
    from coordinator.core.consumer.manager import ConsumerGroupManager

NONE = ErrorCode.NONE

# Kafka's Group.GroupType.parse: anything else is "unknown" and matches no group.
KNOWN_GROUP_TYPES = frozenset({"classic", "consumer", "share", "streams"})


def parse_group_type(text: str) -> str:
    lowered = text.strip().lower()
    return lowered if lowered in KNOWN_GROUP_TYPES else "unknown"


class GroupAdmin:
    def __init__(
        self, groups: dict[str, Group], offsets: OffsetManager, consumer: ConsumerGroupManager | None = None
    ) -> None:
        self.groups = groups
        self.offsets = offsets
        self.consumer = consumer

    def list_groups(self, req: ListGroups, fx: Effects) -> None:
        states = {s.strip().lower() for s in req.states_filter}
        types = {parse_group_type(t) for t in req.types_filter}
        listed = tuple(
            ListedGroup(g.group_id, g.protocol_type or "", g.state_name, g.group_type)
            for g in self.groups.values()
            if (not states or g.state_name.lower() in states) and (not types or g.group_type in types)
        )
        fx.reply(req.ref, ListGroupsResponse(NONE, listed))

    def describe_groups(self, req: DescribeGroups, fx: Effects) -> None:
        fx.reply(req.ref, DescribeGroupsResponse(tuple(self._describe(gid) for gid in req.group_ids)))

    def _describe(self, group_id: str) -> DescribedGroup:
        group = self.groups.get(group_id)
        if group is None or isinstance(group, ConsumerGroup):
            # KIP-848 groups are described by ConsumerGroupDescribe; here they do not exist (Dead,
            # GROUP_ID_NOT_FOUND from v6), as Kafka answers.
            return DescribedGroup(group_id, NONE, "Dead", exists=False)
        if group.state is STABLE:
            protocol = group.protocol_name
            assert protocol is not None, "a Stable group has a protocol"
            members = tuple(
                DescribedGroupMember(
                    m.member_id, m.group_instance_id, m.client_id, m.client_host, m.metadata(protocol), m.assignment
                )
                for m in group.members.values()
            )
            return DescribedGroup(group_id, NONE, group.state_name, group.protocol_type or "", protocol, members)
        # Other states: no metadata, but (like Kafka 4's coordinator) the last assignment.
        members = tuple(
            DescribedGroupMember(m.member_id, m.group_instance_id, m.client_id, m.client_host, b"", m.assignment)
            for m in group.members.values()
        )
        return DescribedGroup(group_id, NONE, group.state_name, group.protocol_type or "", "", members)

    def delete_groups(self, req: DeleteGroups, fx: Effects) -> None:
        results = []
        for group_id in dict.fromkeys(req.group_ids):  # de-duplicated, first occurrence order
            group = self.groups.get(group_id)
            if group is None:
                results.append(DeletableGroupResult(group_id, ErrorCode.GROUP_ID_NOT_FOUND))
                continue
            if isinstance(group, ConsumerGroup):
                if group.state_name != CONSUMER_EMPTY or self.consumer is None:
                    results.append(DeletableGroupResult(group_id, ErrorCode.NON_EMPTY_GROUP))
                    continue
                count = self.offsets.delete_all_offsets(group_id, fx)
                self.consumer.delete_group(group, "delete-groups", fx)
                if count:
                    fx.event(OffsetsDeleted(group_id, count, "group-deleted"))
                results.append(DeletableGroupResult(group_id, NONE))
                continue
            error = state_error(Api.DELETE_GROUP, group.state, Check.BEFORE_MEMBER)
            if error is not None:
                results.append(DeletableGroupResult(group_id, error))
                continue
            # Offsets first, then the group: a log cut in between still leaves a consistent state.
            count = self.offsets.delete_all_offsets(group_id, fx)
            fx.record(Record(GroupMetadataKey(group_id), None))
            if count:
                fx.event(OffsetsDeleted(group_id, count, "group-deleted"))
            fx.event(GroupDeleted(group_id, group.group_type, "delete-groups"))
            results.append(DeletableGroupResult(group_id, NONE))
        fx.reply(req.ref, DeleteGroupsResponse(tuple(results)))
