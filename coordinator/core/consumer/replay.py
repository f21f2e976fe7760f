"""Replay of the consumer-group records: the ONLY code that changes consumer-group state (the rules
are in ``group.py``), and the state transitions it causes, reported as events; and, while a log is
loaded, the recognition of a downgrade's classic record for the rebalance it owes.

Recognising a downgrade (``coordinator/core/migration.py``). A downgrade writes, in one entry, the
consumer group's tombstones (the members' last: their metadata, then the group's) and the classic
group's GroupMetadata at the generation of the consumer group's epoch. A rebalance is owed when a
member left (the session expiry, LeaveGroup or fencing that made the group downgrade), or when a
classic static member replaced the last KIP-848 one while the target was stale or with another
subscription (``classic_members.py``). Replay
(not live: a live downgrade prepares its rebalance itself) notes the members whose metadata a
tombstone removed since the group's last value record; when the group's own tombstone follows,
with members among them, the group was removed with members, which only a downgrade does (a
deletion needs an empty group). The classic type asks, for the next GroupMetadata of that id it
replays, whether it is the downgrade's: it is at that epoch, and a noted member is not in it by
member id (it left, or a static member with its instance id replaced it). The epoch check keeps a later
record out after compaction dropped the downgrade's own (a completed rebalance has a higher
generation; a static member replaced in Stable keeps the generation and its instance id).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from coordinator.core.consumer.schema import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupRecordKey,
    ConsumerGroupRecordValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
)
from coordinator.core.consumer_protocol import read_subscription
from coordinator.core.effects import Effects
from coordinator.core.events import GroupStateChanged
from coordinator.core.groups import Group
from coordinator.core.migration import Protocols, downgrade_reason, stale_downgrade_reason
from coordinator.core.record_codec import Record

from .context import ConsumerContext
from .group import ConsumerGroup
from .member import ConsumerGroupMember


def _subscription_changed(replaced: ConsumerGroupMember, protocols: Protocols) -> bool:
    """Whether the static member's JoinGroup subscribed to other topics than the member it replaced
    (as ``classic_members.py`` compares them: the first protocol's subscription)."""
    try:
        topics = tuple(sorted(set(read_subscription(protocols[0][1]).topics)))
    except (ValueError, IndexError):
        return True
    return (
        topics != replaced.subscribed_topic_names
        or replaced.subscribed_topic_regex != ""
        or replaced.regex_topics is not None
    )


RECORD_KEYS: tuple[type, ...] = (
    ConsumerGroupMetadataKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupCurrentMemberAssignmentKey,
)
"""The record types this group type owns (3, 5, 6, 7, 8)."""


def apply_to(group: ConsumerGroup, record: Record) -> None:
    """Replay one record into ``group`` itself (not the shard's namespace): how the online upgrade
    builds the converted group the heartbeat reads before its records reach the shard."""
    key, value = record.key, record.value
    if isinstance(key, ConsumerGroupMetadataKey):
        assert isinstance(value, ConsumerGroupMetadataValue)
        group.replay_metadata(value)
    elif isinstance(key, ConsumerGroupMemberMetadataKey):
        assert value is None or isinstance(value, ConsumerGroupMemberMetadataValue)
        group.replay_member_metadata(key.member_id, value)
    elif isinstance(key, ConsumerGroupTargetAssignmentMetadataKey):
        assert value is None or isinstance(value, ConsumerGroupTargetAssignmentMetadataValue)
        group.replay_target_metadata(value)
    elif isinstance(key, ConsumerGroupTargetAssignmentMemberKey):
        assert value is None or isinstance(value, ConsumerGroupTargetAssignmentMemberValue)
        group.replay_target_member(key.member_id, value)
    else:
        assert isinstance(key, ConsumerGroupCurrentMemberAssignmentKey)
        assert value is None or isinstance(value, ConsumerGroupCurrentMemberAssignmentValue)
        group.replay_current_assignment(key.member_id, value)


@dataclass(slots=True)
class _Departure:
    """What replay noted of a consumer group's members removed since its last value record."""

    members: dict[str, ConsumerGroupMember] = field(default_factory=dict)
    assignment_epoch: int | None = None  # the group's when its target metadata was removed
    group_epoch: int = -1  # the group's when it was removed


class Replayer:
    def __init__(self, ctx: ConsumerContext) -> None:
        self.ctx = ctx
        self._dirty: set[str] = set()  # groups touched by replay since the last state report
        # Not live only (the module docstring): member id -> instance id of the members removed
        # since the group's last value record, and the groups removed with members.
        self._departing: dict[str, _Departure] = {}
        self._removed: dict[str, _Departure] = {}
        self._replayers: dict[
            type, Callable[[ConsumerGroup, ConsumerGroupRecordKey, ConsumerGroupRecordValue | None], None]
        ] = {
            ConsumerGroupMetadataKey: self._replay_metadata,
            ConsumerGroupMemberMetadataKey: self._replay_member_metadata,
            ConsumerGroupTargetAssignmentMetadataKey: self._replay_target_metadata,
            ConsumerGroupTargetAssignmentMemberKey: self._replay_target_member,
            ConsumerGroupCurrentMemberAssignmentKey: self._replay_current_assignment,
        }

    def replay(self, key: ConsumerGroupRecordKey, value: ConsumerGroupRecordValue | None, live: bool = False) -> None:
        """Live or not, the same replay: consumer-group handlers never mutate state themselves."""
        group_id = key.group_id
        group = self.ctx.group(group_id)
        if group is None:
            if value is None:
                return  # tombstones for unknown groups are ignored (KAFKA-17306)
            group = self.ctx.new_group(group_id)  # also replaces a "simple" offsets-only classic group
            self.ctx.groups[group_id] = group
        if not live:
            self._note_departures(group, key, value)
        self._replayers[type(key)](group, key, value)
        self._dirty.add(group_id)

    def _replay_metadata(
        self, group: ConsumerGroup, key: ConsumerGroupRecordKey, value: ConsumerGroupRecordValue | None
    ) -> None:
        if value is None:
            assert not group.members, f"{group.group_id}: group tombstone with members left"
            del self.ctx.groups[group.group_id]
            return
        assert isinstance(value, ConsumerGroupMetadataValue)
        group.replay_metadata(value)

    def _replay_member_metadata(
        self, group: ConsumerGroup, key: ConsumerGroupRecordKey, value: ConsumerGroupRecordValue | None
    ) -> None:
        assert isinstance(key, ConsumerGroupMemberMetadataKey)
        assert value is None or isinstance(value, ConsumerGroupMemberMetadataValue)
        group.replay_member_metadata(key.member_id, value)

    def _replay_target_metadata(
        self, group: ConsumerGroup, key: ConsumerGroupRecordKey, value: ConsumerGroupRecordValue | None
    ) -> None:
        assert value is None or isinstance(value, ConsumerGroupTargetAssignmentMetadataValue)
        group.replay_target_metadata(value)

    def _replay_target_member(
        self, group: ConsumerGroup, key: ConsumerGroupRecordKey, value: ConsumerGroupRecordValue | None
    ) -> None:
        assert isinstance(key, ConsumerGroupTargetAssignmentMemberKey)
        assert value is None or isinstance(value, ConsumerGroupTargetAssignmentMemberValue)
        group.replay_target_member(key.member_id, value)

    def _replay_current_assignment(
        self, group: ConsumerGroup, key: ConsumerGroupRecordKey, value: ConsumerGroupRecordValue | None
    ) -> None:
        assert isinstance(key, ConsumerGroupCurrentMemberAssignmentKey)
        assert value is None or isinstance(value, ConsumerGroupCurrentMemberAssignmentValue)
        group.replay_current_assignment(key.member_id, value)

    def _note_departures(
        self, group: ConsumerGroup, key: ConsumerGroupRecordKey, value: ConsumerGroupRecordValue | None
    ) -> None:
        gid = group.group_id
        if value is not None:
            if gid in self._departing or gid in self._removed:
                self._departing.pop(gid, None)
                self._removed.pop(gid, None)
        elif isinstance(key, ConsumerGroupMemberMetadataKey):
            member = group.members.get(key.member_id)
            if member is not None:
                self._departing.setdefault(gid, _Departure()).members[key.member_id] = member
        elif isinstance(key, ConsumerGroupTargetAssignmentMetadataKey):
            self._departing.setdefault(gid, _Departure()).assignment_epoch = group.assignment_epoch
        elif isinstance(key, ConsumerGroupMetadataKey):
            departure = self._departing.pop(gid, None)
            if departure is not None and departure.members:
                departure.group_epoch = group.group_epoch
                self._removed[gid] = departure

    def replayed_downgrade(self, group: Group) -> str | None:
        """The bridge ``migration.Bridges.replayed_downgrade``: the reason of the rebalance the
        downgrade that wrote ``group``'s record prepared, or None (the module docstring)."""
        removed = self._removed.pop(group.group_id, None)
        if removed is None:
            return None
        view = self.ctx.bridges.classic_view(group) if self.ctx.bridges.classic_view is not None else None
        if view is None or view.generation != removed.group_epoch:
            return None
        gid = group.group_id
        kept = {m.member_id for m in view.members}
        by_instance = {m.instance_id: m for m in view.members if m.instance_id is not None}
        for member_id, member in removed.members.items():
            if member_id in kept:
                continue
            joining = None if member.instance_id is None else by_instance.get(member.instance_id)
            if joining is None:
                return downgrade_reason(gid)  # a member left
            # A classic static member replaced the last KIP-848 one (``classic_members.py``): a
            # rebalance when the target was stale or the subscription changed (not seen here: a
            # changed topic metadata hash, which only the live group's soft refresh flag notices).
            stale = removed.assignment_epoch is not None and removed.assignment_epoch < removed.group_epoch
            if stale or _subscription_changed(member, joining.protocols):
                return stale_downgrade_reason(gid)
        return None

    def report_state_changes(self, fx: Effects) -> None:
        """Turn the state changes replay caused into ``GroupStateChanged`` events."""
        if not self._dirty:
            return
        for group_id in sorted(self._dirty):
            group = self.ctx.group(group_id)
            if group is None:
                fx.event(GroupStateChanged(group_id, "consumer", "", "Dead"))
                continue
            state = group.state_name
            if state != group.last_state:
                fx.event(GroupStateChanged(group_id, "consumer", group.last_state, state))
                group.last_state = state
        self._dirty.clear()
