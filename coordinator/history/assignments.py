"""Partition ownership read from the live core shard, for the history's partition tracker.

Read-only: the history never changes core state. Every group answers through the ``Group``
contract (``coordinator.core.groups``): classic groups decode each member's opaque
ConsumerProtocolAssignment bytes (protocol type "consumer" only: Connect, Streams' own protocols own
no partitions here); consumer groups name their topic ids from the core's topic image (a topic
deleted meanwhile is reported under its id). Nothing here knows a group type.
"""

from __future__ import annotations

from collections.abc import Iterator

from ..core.consumer_protocol import decode_assignment
from ..core.shard import CoordinatorShard
from .rows import Partitions

__all__ = ["CoreAssignments", "decode_assignment"]


class CoreAssignments:
    """`rows.AssignmentSource` over a `CoordinatorShard`."""

    def __init__(self, core: CoordinatorShard) -> None:
        self.core = core

    def classic_is_eager(self, group_id: str) -> bool:
        group = self.core.groups.get(group_id)
        return group is not None and group.revokes_all_on_rebalance

    def classic_assignments(self, group_id: str) -> dict[str, tuple[str | None, Partitions]]:
        group = self.core.groups.get(group_id)
        return {} if group is None else group.owned_partitions()

    def consumer_member(self, group_id: str, member_id: str) -> tuple[str | None, Partitions] | None:
        group = self.core.groups.get(group_id)
        return None if group is None else group.member_partitions(member_id)

    def snapshot(self) -> Iterator[tuple[str, str, str | None, Partitions]]:
        for group_id, group in self.core.groups.items():
            for member_id, (instance, partitions) in group.owned_partitions().items():
                yield group_id, member_id, instance, partitions
