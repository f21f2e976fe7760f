"""Replay of the consumer-group records: the ONLY code that changes consumer-group state (the rules
are in ``group.py``), and the state transitions it causes, reported as events."""

from __future__ import annotations

from collections.abc import Callable

from coordinator.core.effects import Effects
from coordinator.core.events import GroupStateChanged
from coordinator.core.records import (
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
    Record,
)

from .context import ConsumerContext
from .group import ConsumerGroup

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


class Replayer:
    def __init__(self, ctx: ConsumerContext) -> None:
        self.ctx = ctx
        self._dirty: set[str] = set()  # groups touched by replay since the last state report
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
