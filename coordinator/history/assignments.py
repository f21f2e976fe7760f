"""Partition ownership read from the live core shard, for the history's partition tracker.

Read-only: the history never changes core state. Classic groups keep each member's assignment as the
opaque ConsumerProtocolAssignment bytes the leader sent; only groups with protocol type "consumer"
are decoded (other protocol types — Connect, Streams' own — own no partitions here). Consumer groups
keep partitions by topic id; names come from the core's topic image (a topic deleted meanwhile is
reported under its id).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Mapping
from uuid import UUID

from ..core.classic.group import ClassicGroup
from ..core.consumer.group import ConsumerGroup
from ..core.shard import CoordinatorShard
from .rows import Partitions

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def decode_assignment(data: bytes) -> dict[str, frozenset[int]]:
    """Topic → partitions of a ConsumerProtocolAssignment (any version: they share the v0 prefix).

    Empty bytes mean no assignment. Malformed bytes raise ValueError."""
    if not data:
        return {}
    try:
        (version,) = _I16.unpack_from(data, 0)
        if version < 0:
            raise ValueError(f"negative assignment version {version}")
        (topics,) = _I32.unpack_from(data, 2)
        pos = 6
        out: dict[str, frozenset[int]] = {}
        for _ in range(max(topics, 0)):
            (length,) = _I16.unpack_from(data, pos)
            pos += 2
            if length < 0 or pos + length > len(data):
                raise ValueError("bad topic name length")
            name = data[pos : pos + length].decode("utf-8")
            pos += length
            (count,) = _I32.unpack_from(data, pos)
            pos += 4
            parts = struct.unpack_from(f">{max(count, 0)}i", data, pos)
            pos += 4 * max(count, 0)
            if parts:
                out[name] = out.get(name, frozenset()) | frozenset(parts)
        return out
    except (struct.error, UnicodeDecodeError) as exc:
        raise ValueError(f"malformed consumer protocol assignment: {exc}") from exc


class CoreAssignments:
    """`rows.AssignmentSource` over a `CoordinatorShard`."""

    def __init__(self, core: CoordinatorShard) -> None:
        self.core = core

    def _classic(self, group_id: str) -> ClassicGroup | None:
        group = self.core.groups.get(group_id)
        return group if isinstance(group, ClassicGroup) else None

    def _names(self, assignment: Mapping[UUID, frozenset[int]]) -> dict[str, frozenset[int]]:
        out: dict[str, frozenset[int]] = {}
        for topic_id, parts in assignment.items():
            info = self.core.topics.by_id(topic_id)
            out[info.name if info is not None else str(topic_id)] = frozenset(parts)
        return out

    def classic_is_eager(self, group_id: str) -> bool:
        group = self._classic(group_id)
        return group is not None and "cooperative" not in (group.protocol_name or "")

    def classic_assignments(self, group_id: str) -> dict[str, tuple[str | None, Partitions]]:
        group = self._classic(group_id)
        if group is None or group.protocol_type != "consumer":
            return {}
        out: dict[str, tuple[str | None, Partitions]] = {}
        for member_id, member in group.members.items():
            try:
                partitions = decode_assignment(member.assignment)
            except ValueError:
                partitions = {}
            out[member_id] = (member.group_instance_id, partitions)
        return out

    def consumer_member(self, group_id: str, member_id: str) -> tuple[str | None, Partitions] | None:
        group = self.core.groups.get(group_id)
        if not isinstance(group, ConsumerGroup):
            return None
        member = group.members.get(member_id)
        if member is None:
            return None
        return member.instance_id, self._names(member.assigned_partitions)

    def snapshot(self) -> Iterator[tuple[str, str, str | None, Partitions]]:
        for group_id, group in self.core.groups.items():
            if isinstance(group, ClassicGroup):
                for member_id, (instance, partitions) in self.classic_assignments(group_id).items():
                    yield group_id, member_id, instance, partitions
            elif isinstance(group, ConsumerGroup):
                for member_id, member in group.members.items():
                    yield group_id, member_id, member.instance_id, self._names(member.assigned_partitions)
