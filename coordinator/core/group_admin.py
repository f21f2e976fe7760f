"""ListGroups, DescribeGroups and DeleteGroups over every group type the shard hosts.

Groups are reached only through the :class:`~coordinator.core.groups.Group` contract (rows,
``validate_delete_group``, tombstones); nothing here knows a group type.
"""

from __future__ import annotations

from coordinator.core.effects import Effects
from coordinator.core.errors import CoordinatorError, ErrorCode
from coordinator.core.events import OffsetsDeleted
from coordinator.core.groups import Group, delete_group
from coordinator.core.offsets import OffsetManager
from coordinator.core.registry import Registration
from coordinator.core.requests import DeleteGroups, DescribeGroups, ListGroups
from coordinator.core.responses import (
    DeletableGroupResult,
    DeleteGroupsResponse,
    DescribedGroup,
    DescribeGroupsResponse,
    ListGroupsResponse,
)

NONE = ErrorCode.NONE

# Kafka's Group.GroupType.parse: anything else is "unknown" and matches no group.
KNOWN_GROUP_TYPES = frozenset({"classic", "consumer", "share", "streams"})


def parse_group_type(text: str, known: frozenset[str] = KNOWN_GROUP_TYPES) -> str:
    lowered = text.strip().lower()
    return lowered if lowered in known else "unknown"


class GroupAdmin:
    def __init__(self, groups: dict[str, Group], offsets: OffsetManager, type_names: frozenset[str] = frozenset()) -> None:
        """``type_names``: the shard's group types; a filter may name them besides Kafka's."""
        self.groups = groups
        self.offsets = offsets
        self.known_types = KNOWN_GROUP_TYPES | type_names

    @property
    def registration(self) -> Registration:
        return Registration(
            name="group-admin",
            requests={
                ListGroups: self.list_groups,
                DescribeGroups: self.describe_groups,
                DeleteGroups: self.delete_groups,
            },
            error_responses={
                ListGroups: lambda req, code: ListGroupsResponse(code),
                DescribeGroups: lambda req, code: DescribeGroupsResponse(
                    tuple(DescribedGroup(g, code, "") for g in req.group_ids)
                ),
                DeleteGroups: lambda req, code: DeleteGroupsResponse(
                    tuple(DeletableGroupResult(g, code) for g in req.group_ids)
                ),
            },
        )

    def list_groups(self, req: ListGroups, fx: Effects) -> None:
        states = {s.strip().lower() for s in req.states_filter}
        types = {parse_group_type(t, self.known_types) for t in req.types_filter}
        listed = tuple(
            g.list_row()
            for g in self.groups.values()
            if (not states or g.state_name.lower() in states) and (not types or g.group_type in types)
        )
        fx.reply(req.ref, ListGroupsResponse(NONE, listed))

    def describe_groups(self, req: DescribeGroups, fx: Effects) -> None:
        fx.reply(req.ref, DescribeGroupsResponse(tuple(self._describe(gid) for gid in req.group_ids)))

    def _describe(self, group_id: str) -> DescribedGroup:
        group = self.groups.get(group_id)
        if group is None:
            return DescribedGroup(group_id, NONE, "Dead", exists=False)
        return group.describe_row()

    def delete_groups(self, req: DeleteGroups, fx: Effects) -> None:
        results = []
        for group_id in dict.fromkeys(req.group_ids):  # de-duplicated, first occurrence order
            group = self.groups.get(group_id)
            if group is None:
                results.append(DeletableGroupResult(group_id, ErrorCode.GROUP_ID_NOT_FOUND))
                continue
            try:
                group.validate_delete_group()
            except CoordinatorError as exc:
                results.append(DeletableGroupResult(group_id, exc.code))
                continue
            # Offsets first, then the group: a log cut in between still leaves a consistent state.
            count = self.offsets.delete_all_offsets(group_id, fx)
            if count:
                fx.event(OffsetsDeleted(group_id, count, "group-deleted"))
            delete_group(group, "delete-groups", fx)
            results.append(DeletableGroupResult(group_id, NONE))
        fx.reply(req.ref, DeleteGroupsResponse(tuple(results)))
