"""The ``Group`` contract: what every group type offers the code that serves all of them.

One shard hosts groups of several types in ONE namespace (``groups: dict[str, Group]``; a group id
names one group of one type), as Kafka does: a ConsumerGroupHeartbeat for the id of a classic group,
or a JoinGroup for the id of a consumer group, sees the other type and answers accordingly.

Offsets (``offsets.py``), group administration (``group_admin.py``) and the history's ownership
reader (``coordinator/history/assignments.py``) only ever talk to a group through this contract;
none of them tests for a group type. The type-specific request handlers (JoinGroup,
ConsumerGroupHeartbeat, ...) live in the type's own package and are wired in by its registration
(``registry.py``). Modelled on Kafka's ``org.apache.kafka.coordinator.group.Group`` (4.x).

The contract
============

Identity and rows
    ``group_id``, ``group_type`` ("classic", "consumer"; Kafka's ``GroupType``), ``protocol_type``
    (None for a "simple" offsets-only group), ``state_name`` (Kafka's state string), ``members``
    (member id -> member, read-only), ``is_empty``, ``persisted`` (what a replay of the log must
    reproduce, plain comparable data), ``list_row()`` (ListGroups) and ``describe_row()``
    (DescribeGroups; a type DescribeGroups does not cover answers "Dead, does not exist").

Offsets (Kafka's ``validateOffsetCommit`` / ``validateOffsetFetch`` / ``validateOffsetDelete``)
    ``validate_offset_commit(req, fx)``, ``validate_offset_fetch(member_id, member_epoch)``,
    ``validate_offset_delete()`` raise :class:`CoordinatorError` to refuse and change nothing.
    An accepted commit may arm the type's OWN timers in ``fx`` (a classic member's commit keeps its
    session alive); it never writes records or replies. ``validate_offset_commit`` returns None when
    the whole commit is accepted, or a :data:`CommitValidator` that every partition of it must pass
    (Kafka 4.3's ``CommitPartitionValidator``, KIP-1251: a commit at an older member epoch is
    checked against the epoch each partition was assigned at); a partition that fails it fails the
    whole commit, as in Kafka.
    ``is_subscribed_to_topic(topic)``: offsets of such a topic are neither deleted by OffsetDelete
    (GROUP_SUBSCRIBED_TO_TOPIC) nor expired.
    ``offset_expiration_base()``: Kafka's ``offsetExpirationCondition``: None when nothing may expire
    now, else the function giving the time an offset's retention counts from.

Deletion (Kafka's ``validateDeleteGroup`` / ``createGroupTombstoneRecords``)
    ``validate_delete_group()`` raises to refuse (NON_EMPTY_GROUP, ...); ``tombstones()`` are the
    records that delete the group itself (its offsets are the offset manager's); replaying them
    removes the group. :func:`delete_group` is the one way a group is deleted.

Ownership, for the history (read-only)
    ``revokes_all_on_rebalance`` (an eager classic group), ``owned_partitions()`` (member id ->
    (instance id, topic name -> partitions)) and ``member_partitions(member_id)``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol
from uuid import UUID

from coordinator.core.effects import Effects
from coordinator.core.events import GroupDeleted
from coordinator.core.offset_records import OffsetCommitValue
from coordinator.core.record_codec import Record
from coordinator.core.requests import OffsetCommit
from coordinator.core.responses import DescribedGroup, ListedGroup

Partitions = Mapping[str, frozenset[int]]
"""Topic name -> partitions."""

OwnedPartitions = tuple[str | None, Partitions]
"""(group instance id, partitions) of one member."""

ExpirationBase = Callable[[OffsetCommitValue], int]
"""An offset -> the timestamp its retention counts from."""

CommitValidator = Callable[[str, UUID | None, int], None]
"""(topic name, topic id if the request named it, partition) -> None, or raises CoordinatorError."""

DEAD = "Dead"
"""The state name of a group that is being removed (every type has it, as in Kafka)."""


class Group(Protocol):
    """The contract of every group type (see the module docstring)."""

    @property
    def group_id(self) -> str: ...

    @property
    def group_type(self) -> str: ...

    @property
    def protocol_type(self) -> str | None: ...

    @property
    def state_name(self) -> str: ...

    @property
    def members(self) -> Mapping[str, Any]: ...

    @property
    def is_empty(self) -> bool: ...

    @property
    def persisted(self) -> object: ...

    def list_row(self) -> ListedGroup: ...

    def describe_row(self) -> DescribedGroup: ...

    def validate_offset_commit(self, req: OffsetCommit, fx: Effects) -> CommitValidator | None: ...

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> None: ...

    def validate_offset_delete(self) -> None: ...

    def validate_delete_group(self) -> None: ...

    def is_subscribed_to_topic(self, topic: str) -> bool: ...

    def offset_expiration_base(self) -> ExpirationBase | None: ...

    def tombstones(self) -> list[Record]: ...

    @property
    def revokes_all_on_rebalance(self) -> bool: ...

    def owned_partitions(self) -> dict[str, OwnedPartitions]: ...

    def member_partitions(self, member_id: str) -> OwnedPartitions | None: ...


class LiveStateMembers:
    """Three `Group` properties read straight off a type's live state object (its ``state``, which has
    ``state_name`` and ``members``): the share and streams groups answer them the same way."""

    state: Any

    @property
    def state_name(self) -> str:
        return str(self.state.state_name)

    @property
    def members(self) -> Mapping[str, Any]:
        members: Mapping[str, Any] = self.state.members
        return members

    @property
    def is_empty(self) -> bool:
        return not self.state.members


def commit_timestamp(offset: OffsetCommitValue) -> int:
    """The usual expiration base: retention counts from the commit."""
    return offset.commit_timestamp


def delete_group(group: Group, reason: str, fx: Effects) -> None:
    """Write the group's tombstones and report it deleted (offsets are deleted by the caller first)."""
    for record in group.tombstones():
        fx.record(record)
    fx.event(GroupDeleted(group.group_id, group.group_type, reason))


__all__ = [
    "DEAD",
    "CommitValidator",
    "ExpirationBase",
    "Group",
    "OwnedPartitions",
    "Partitions",
    "commit_timestamp",
    "delete_group",
]
