"""Domain events → history rows: the event table and the partition-ownership tracker.

Event table
-----------
`EVENT_ROWS` maps each event class of `coordinator.core.events` to a `RowSpec`: the row `kind` and
how the event's attributes become columns of `coordinator.history.schema`. A new event kind needs
one entry (or none: an event class missing from the table still becomes a row, of kind
snake_case(ClassName), with attributes named like columns copied into them and every other attribute
put into `detail` as JSON). `SKIP` drops high-volume events that are not rebalance history (offset
commits; the metrics count those).

Partition tracker
-----------------
The events carry partition *counts*; the history wants partition *lists* so the pipeline can follow
each partition from revocation to its next assignment. `PartitionTracker` keeps the last ownership
it reported per (group, member) and, on the events that change ownership, reads the new ownership
from an `AssignmentSource` (the live core, see `coordinator.history.assignments`) and emits the
difference as `partitions_revoked` / `partitions_assigned` rows:

- consumer groups: on `MemberAssignmentChanged` (the member's usable partitions);
- classic groups: on `RebalanceStarted` every member of an *eager* group (protocol other than
  cooperative-sticky) revokes everything it owns, as eager clients do when they rejoin; on
  `RebalanceCompleted` (the leader's assignment is stored) each member's decoded assignment is
  compared with what it owned, so cooperative groups revoke only what moves;
- both: `MemberLeft` releases everything the member owned; `StaticMemberReplaced` hands the old
  member id's ownership to the new id; `GroupDeleted` forgets the group.

Group type changes
------------------
`GroupTypeWatch` remembers the last `group_type` the history saw per group id (across deletions: a
group id re-created with the other protocol is a type change too). When a row of another type
arrives it emits a `group_type_changed` row first (`old_group_type` → `group_type`), so the pipeline
can split the group's lifetimes by type. Today the core changes a group's type only when an empty
classic group is taken over by a KIP-848 heartbeat (Kafka's offline upgrade) or a group id is
re-created with the other protocol after deletion; live (online) migrations will arrive through the
same row. Like the tracker, it is soft state: after a restart the first row of a group sets its type.

Observers run right after the core handled a request, so the source reflects the state *after* the
events. The tracker is soft state: `seed()` fills it from the core after the log is replayed.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import msgspec

from ..core import events
from .schema import FIELDS_BY_NAME

Row = dict[str, Any]
Partitions = Mapping[str, frozenset[int]]
"""Topic name → partitions."""


# ---- the event table ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RowSpec:
    kind: str
    rename: Mapping[str, str] = field(default_factory=dict)
    """Event attribute → column, for attributes whose name is not already a column."""
    fixed: Mapping[str, Any] = field(default_factory=dict)
    """Columns with a constant value (e.g. group_type for events that do not carry it)."""
    convert: Callable[[Any, Row], None] | None = None
    """Last touch on the row (derived columns)."""


SKIP = None
"""Table value for events that are not history."""


def _epoch_bump(event: Any, row: Row) -> None:
    # Consumer groups report the epoch left behind; the row carries the new one.
    if row.get("group_type") == "consumer":
        row["kind"] = "group_epoch_bumped"
        row["group_epoch"] = row.pop("generation_id") + 1


def _ns_to_ms(event: Any, row: Row) -> None:
    if "duration_ns" in row:
        row["duration_ms"] = row.pop("duration_ns") / 1e6


EVENT_ROWS: dict[type, RowSpec | None] = {
    events.GroupStateChanged: RowSpec("group_state_changed", {"old": "old_state", "new": "new_state"}),
    events.RebalanceStarted: RowSpec("rebalance_started", convert=_epoch_bump),
    events.RebalanceCompleted: RowSpec("rebalance_completed"),
    events.MemberJoined: RowSpec("member_joined"),
    events.MemberLeft: RowSpec("member_left"),
    events.SessionExpired: RowSpec("session_expired"),
    events.StaticMemberReplaced: RowSpec("static_member_replaced", {"new_member_id": "member_id"}),
    events.GroupDeleted: RowSpec("group_deleted"),
    events.OffsetsCommitted: SKIP,
    events.OffsetsDeleted: SKIP,
    # ---- KIP-848 so far (each event carries the group type that emitted it) ----
    events.TargetAssignmentComputed: RowSpec(
        "target_assignment_computed", {"duration_ns": "duration_ns"}, convert=_ns_to_ms
    ),
    events.MemberAssignmentChanged: RowSpec(
        "member_assignment_changed", {"assigned": "assigned_count", "revoked": "revoked_count"},
    ),
    events.MemberFenced: RowSpec("member_fenced", {"partitions": "partition_count"}),
    # ---- streams groups (KIP-1071): metrics only so far (the history schema has no task columns) ----
    events.WarmupTasksChanged: SKIP,
    # ---- share groups (KIP-932): per-record state counts, metrics only (every fetch has some) ----
    events.ShareRecordsChanged: SKIP,
}


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


class _Compiled:
    """A RowSpec resolved against one event class: which attribute goes to which column."""

    __slots__ = ("columns", "convert", "extra", "fixed", "kind")

    def __init__(self, cls: type, spec: RowSpec) -> None:
        self.kind = spec.kind
        self.fixed = dict(spec.fixed)
        self.convert = spec.convert
        self.columns: list[tuple[str, str]] = []
        self.extra: list[str] = []
        names = [f.name for f in dataclasses.fields(cls)] if dataclasses.is_dataclass(cls) else []
        for name in names:
            column = spec.rename.get(name, name)
            if column in FIELDS_BY_NAME or column in spec.rename.values():
                self.columns.append((name, column))
            else:
                self.extra.append(name)

    def row(self, event: Any) -> Row:
        row: Row = dict(self.fixed)
        row["kind"] = self.kind
        for name, column in self.columns:
            value = getattr(event, name)
            if value is not None:
                row[column] = value
        if self.extra:
            row["detail"] = msgspec.json.encode({n: getattr(event, n) for n in self.extra}).decode()
        if self.convert is not None:
            self.convert(event, row)
        return row


_compiled: dict[type, _Compiled | None] = {}


def event_row(event: object) -> Row | None:
    """The history row of a domain event (without ts/seq/coordinator columns), None to skip it."""
    cls = type(event)
    try:
        compiled = _compiled[cls]
    except KeyError:
        if cls in EVENT_ROWS:
            spec = EVENT_ROWS[cls]
        else:  # a new event class without a table entry: a row of the generic shape
            spec = RowSpec(_snake(cls.__name__)) if dataclasses.is_dataclass(cls) else None
        compiled = None if spec is None else _Compiled(cls, spec)
        _compiled[cls] = compiled
    if compiled is None:
        return None
    row = compiled.row(event)
    return row if "group_id" in row else None


# ---- partition ownership ------------------------------------------------------------------------


class AssignmentSource(Protocol):
    """Read access to the ownership the core holds right now (see `coordinator.history.assignments`)."""

    def classic_is_eager(self, group_id: str) -> bool: ...

    def classic_assignments(self, group_id: str) -> Mapping[str, tuple[str | None, Partitions]]:
        """member id → (group instance id, partitions) of a classic group's current generation."""
        ...

    def consumer_member(self, group_id: str, member_id: str) -> tuple[str | None, Partitions] | None:
        """(instance id, usable partitions) of a consumer-group member, None when unknown."""
        ...

    def snapshot(self) -> Iterator[tuple[str, str, str | None, Partitions]]:
        """(group id, member id, instance id, partitions) of every member owning partitions."""
        ...


def topic_partitions(partitions: Partitions) -> list[dict[str, Any]]:
    """The `topic_partitions` column value (sorted), see `schema.TOPIC_PARTITIONS`."""
    return [{"topic": t, "partitions": sorted(p)} for t, p in sorted(partitions.items()) if p]


def _count(partitions: Partitions) -> int:
    return sum(len(p) for p in partitions.values())


def _minus(a: Partitions, b: Partitions) -> dict[str, frozenset[int]]:
    out: dict[str, frozenset[int]] = {}
    for topic, parts in a.items():
        rest = parts - b.get(topic, frozenset())
        if rest:
            out[topic] = rest
    return out


class PartitionTracker:
    """Derives partitions_revoked / partitions_assigned rows (see the module docstring)."""

    def __init__(self, source: AssignmentSource | None) -> None:
        self.source = source
        # group id → member id → (instance id, partitions)
        self.owned: dict[str, dict[str, tuple[str | None, Partitions]]] = {}

    def seed(self) -> None:
        if self.source is None:
            return
        for group_id, member_id, instance_id, partitions in self.source.snapshot():
            if _count(partitions):
                self.owned.setdefault(group_id, {})[member_id] = (instance_id, partitions)

    def rows(self, event: object) -> list[Row]:
        if self.source is None:
            return []
        match event:
            case events.MemberAssignmentChanged(group_id=gid, member_id=mid, member_epoch=epoch, group_type=kind):
                now = self.source.consumer_member(gid, mid)
                if now is None:
                    return []
                return self._move(gid, kind, mid, now[0], now[1], {"member_epoch": epoch})
            case events.RebalanceStarted(group_id=gid, group_type="classic", generation_id=generation):
                if not self.source.classic_is_eager(gid):
                    return []
                out: list[Row] = []
                for mid, (instance, _) in list(self.owned.get(gid, {}).items()):
                    out += self._move(gid, "classic", mid, instance, {}, {"generation_id": generation},
                                      reason="eager-rebalance")
                return out
            case events.RebalanceCompleted(group_id=gid, generation_id=generation):
                current = self.source.classic_assignments(gid)
                out = []
                for mid, (instance, _) in list(self.owned.get(gid, {}).items()):
                    if mid not in current:
                        out += self._move(gid, "classic", mid, instance, {}, {"generation_id": generation})
                for mid, (instance, partitions) in current.items():
                    out += self._move(gid, "classic", mid, instance, partitions, {"generation_id": generation})
                return out
            case events.MemberLeft(group_id=gid, member_id=mid, reason=reason, group_type=group_type):
                held = self.owned.get(gid, {}).get(mid)
                if held is None:
                    return []
                return self._move(gid, group_type, mid, held[0], {}, {}, reason=reason)
            case events.StaticMemberReplaced(group_id=gid, old_member_id=old, new_member_id=new):
                members = self.owned.get(gid, {})
                if old in members:
                    members[new] = members.pop(old)
                return []
            case events.GroupDeleted(group_id=gid):
                self.owned.pop(gid, None)
                return []
        return []

    def _move(self, gid: str, group_type: str, mid: str, instance: str | None, now: Partitions,
              extra: Row, reason: str | None = None) -> list[Row]:
        members = self.owned.setdefault(gid, {})
        before = members.get(mid, (None, {}))[1]
        revoked = _minus(before, now)
        assigned = _minus(now, before)
        if _count(now):
            members[mid] = (instance, {t: p for t, p in now.items() if p})
        else:
            members.pop(mid, None)
            if not members:
                self.owned.pop(gid, None)
        out: list[Row] = []
        for kind, parts in (("partitions_revoked", revoked), ("partitions_assigned", assigned)):
            if parts:
                row: Row = {"kind": kind, "group_id": gid, "group_type": group_type, "member_id": mid,
                            "partitions": topic_partitions(parts), "partition_count": _count(parts), **extra}
                if instance is not None:
                    row["group_instance_id"] = instance
                if reason is not None and kind == "partitions_revoked":
                    row["reason"] = reason
                out.append(row)
        return out


class GroupTypeWatch:
    """Emits `group_type_changed` rows (see the module docstring)."""

    def __init__(self) -> None:
        self.last: dict[str, str] = {}

    def seed(self, types: Iterable[tuple[str, str]]) -> None:
        self.last.update(types)

    def change(self, row: Row) -> Row | None:
        """The `group_type_changed` row to write before `row`, if its type differs from the last seen."""
        group_type = row.get("group_type")
        if not group_type:
            return None
        group_id = row["group_id"]
        before = self.last.get(group_id)
        if before == group_type:
            return None
        self.last[group_id] = group_type
        if before is None:
            return None
        return {"kind": "group_type_changed", "group_id": group_id, "group_type": group_type,
                "old_group_type": before}


def rows_of(event: object, tracker: PartitionTracker) -> Iterable[Row]:
    """Every row one event produces: its own (if it is history) then the derived partition rows."""
    row = event_row(event)
    derived = tracker.rows(event)
    if row is None:
        return derived
    if not derived:
        return (row,)
    return [row, *derived]
