"""Classic groups (pre-KIP-848: JoinGroup/SyncGroup/Heartbeat/LeaveGroup) put together: the
handlers of ``join.py`` and ``members.py`` over the machinery of ``rebalance.py``, plus load, unload
and replay of the GroupMetadata record, and the type's registration with the shard.

Timers (one per key, re-arming replaces, see ``effects``):

* ``classic-heartbeat/<group>/<member>``: session timeout of a member or of a KIP-394 pending id;
  the 5-minute new-member join timeout while a new member is parked.
* ``classic-join/<group>``: the initial-rebalance delay, or the rebalance timeout of the join barrier.
* ``classic-sync/<group>``: the rebalance timeout of the sync barrier.
"""

from __future__ import annotations

from coordinator.core.effects import Effects
from coordinator.core.errors import ErrorCode
from coordinator.core.records import GroupMetadataKey, GroupMetadataValue
from coordinator.core.registry import Registration, ShardContext
from coordinator.core.requests import Heartbeat, JoinGroup, LeaveGroup, SyncGroup
from coordinator.core.responses import (
    HeartbeatResponse,
    JoinGroupResponse,
    LeaveGroupResponse,
    SyncGroupResponse,
)

from .group import ClassicGroup
from .join import JoinHandlers
from .members import MemberHandlers
from .state import COMPLETING_REBALANCE, DEAD, PREPARING_REBALANCE, STABLE


class ClassicGroupManager(JoinHandlers, MemberHandlers):
    @property
    def registration(self) -> Registration:
        return Registration(
            name="classic",
            requests={
                JoinGroup: self.join,
                SyncGroup: self.sync,
                Heartbeat: self.heartbeat,
                LeaveGroup: self.leave,
            },
            error_responses={
                JoinGroup: lambda req, code: JoinGroupResponse(code, member_id=req.member_id),
                SyncGroup: lambda req, code: SyncGroupResponse(code),
                Heartbeat: lambda req, code: HeartbeatResponse(code),
                LeaveGroup: lambda req, code: LeaveGroupResponse(code),
            },
            timers={
                "classic-heartbeat": self.on_heartbeat_timer,
                "classic-join": self.on_join_timer,
                "classic-sync": self.on_sync_timer,
            },
            replayers={GroupMetadataKey: self.replay},
            on_loaded=self.on_loaded,
            on_unloaded=self.on_unloaded,
            simple_group=self.new_simple_group,
        )

    def new_simple_group(self, group_id: str) -> ClassicGroup:
        """The group an offset commit creates when none exists: Empty, no protocol type (Kafka)."""
        return ClassicGroup(group_id)

    def on_loaded(self, fx: Effects) -> None:
        for group in list(self.groups.values()):
            if not isinstance(group, ClassicGroup):
                continue
            for member in group.members.values():
                # Fresh session for everyone: members that do not come back expire and rebalance.
                self._reschedule_heartbeat(group, member, fx)
            if len(group.members) > self.config.group_max_size:
                self._prepare_rebalance(group, "loaded group is over group.max.size", fx)

    def on_unloaded(self, fx: Effects) -> None:
        for group in self.groups.values():
            if not isinstance(group, ClassicGroup) or group.state is DEAD:
                continue
            self._transition(group, DEAD, fx)
            for member in group.members.values():
                if group.previous_state is PREPARING_REBALANCE and member.join_ref is not None:
                    fx.reply(member.join_ref, JoinGroupResponse(ErrorCode.NOT_COORDINATOR, member_id=member.member_id))
                    member.join_ref = None
                if group.previous_state in (COMPLETING_REBALANCE, STABLE) and member.sync_ref is not None:
                    fx.reply(member.sync_ref, SyncGroupResponse(ErrorCode.NOT_COORDINATOR))
                    member.sync_ref = None

    def replay(self, key: GroupMetadataKey, value: GroupMetadataValue | None, live: bool) -> None:
        """Apply a GroupMetadata record.

        ``live=True``: the record was just produced by a handler that already made the in-memory
        change; only remember it as the group's persisted form. ``live=False`` (loading, standby, or
        a runtime re-applying a record it got from ``handle``): rebuild the group from the record,
        unless the group already persisted exactly this value (idempotence).
        """
        if value is None:
            self.groups.pop(key.group, None)
            return
        group = self._group(key.group)
        if group is not None and (live or group.persisted == value):
            group.persisted = value
            return
        self.groups[key.group] = ClassicGroup.from_metadata_value(key.group, value)


def register(ctx: ShardContext) -> ClassicGroupManager:
    return ClassicGroupManager(ctx.config, ctx.groups)
