"""Classic groups (pre-KIP-848: JoinGroup/SyncGroup/Heartbeat/LeaveGroup) put together: the
handlers of ``join.py`` and ``members.py`` over the machinery of ``rebalance.py``, plus load, unload
and replay of the GroupMetadata record, and the type's registration with the shard.

Timers (one per key, re-arming replaces, see ``effects``):

* ``classic-heartbeat/<group>/<member>``: session timeout of a member or of a KIP-394 pending id;
  the 5-minute new-member join timeout while a new member is parked.
* ``classic-join/<group>``: the initial-rebalance delay, or the rebalance timeout of the join barrier.
* ``classic-sync/<group>``: the rebalance timeout of the sync barrier.

Online migration (``coordinator/core/migration.py``): the type describes a group for an upgrade
(``classic_view``), gives it up (``release_classic``: parked joins and syncs answered
REBALANCE_IN_PROGRESS, timers cancelled; the consumer type writes the tombstone), and takes a
downgraded consumer group in (``adopt_classic``: a Stable group at the consumer group's epoch, its
GroupMetadata written in the same entry as the consumer group's tombstones, then a rebalance, which
``on_loaded`` starts again when replay found it owed: ``ClassicGroup.owed_rebalance``).
Requests for a group of another type go to that type when it serves classic members
(``ClassicRebalance._hosted``).
"""

from __future__ import annotations

from coordinator.core.effects import (
    Effects,
    classic_heartbeat_key,
    classic_join_key,
    classic_sync_key,
)
from coordinator.core.errors import ErrorCode
from coordinator.core.events import GroupStateChanged
from coordinator.core.groups import Group
from coordinator.core.migration import ClassicGroupView, ClassicMemberView
from coordinator.core.registry import Registration, ShardContext
from coordinator.core.requests import Heartbeat, JoinGroup, LeaveGroup, SyncGroup
from coordinator.core.responses import (
    HeartbeatResponse,
    JoinGroupResponse,
    LeaveGroupResponse,
    SyncGroupResponse,
)

from .group import ClassicGroup, ClassicGroupMember
from .join import JoinHandlers
from .members import MemberHandlers
from .records import group_metadata_record
from .schema import RECORD_TYPES, GroupMetadataKey, GroupMetadataValue
from .state import COMPLETING_REBALANCE, DEAD, PREPARING_REBALANCE, STABLE


class ClassicGroupManager(JoinHandlers, MemberHandlers):
    @property
    def registration(self) -> Registration:
        return Registration(
            name="classic",
            record_types=RECORD_TYPES,
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
            classic_view=self.classic_view,
            release_classic=self.release_classic,
            adopt_classic=self.adopt_classic,
        )

    # ---- online migration --------------------------------------------------------------------

    def classic_view(self, group: Group) -> ClassicGroupView | None:
        if not isinstance(group, ClassicGroup):
            return None
        return ClassicGroupView(
            group_id=group.group_id,
            generation=group.generation_id,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            members=tuple(
                ClassicMemberView(
                    member_id=m.member_id,
                    instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    rebalance_timeout_ms=m.rebalance_timeout_ms,
                    session_timeout_ms=m.session_timeout_ms,
                    protocols=m.protocols,
                    assignment=m.assignment,
                )
                for m in group.members.values()
            ),
        )

    def release_classic(self, group: Group, fx: Effects) -> None:
        """Give the group up for an upgrade (Kafka's ``completeAllJoinFutures`` and
        ``completeAllSyncFutures`` with REBALANCE_IN_PROGRESS: the members rejoin the new group)."""
        assert isinstance(group, ClassicGroup), f"{group.group_id} is not a classic group"
        gid = group.group_id
        for member in group.members.values():
            if member.join_ref is not None:
                fx.reply(member.join_ref, JoinGroupResponse(ErrorCode.REBALANCE_IN_PROGRESS, member_id=member.member_id))
                member.join_ref = None
            if member.sync_ref is not None:
                fx.reply(member.sync_ref, SyncGroupResponse(ErrorCode.REBALANCE_IN_PROGRESS))
                member.sync_ref = None
            fx.cancel(classic_heartbeat_key(gid, member.member_id))
        for member_id in group.pending_join_members:
            fx.cancel(classic_heartbeat_key(gid, member_id))
        fx.cancel(classic_join_key(gid))
        fx.cancel(classic_sync_key(gid))

    def adopt_classic(self, view: ClassicGroupView, rebalance: str | None, fx: Effects) -> None:
        """Install the classic group a consumer group downgrades to (Kafka's
        ``ClassicGroup.fromConsumerGroup`` and ``convertToClassicGroup``)."""
        group = ClassicGroup(
            view.group_id,
            state=STABLE,
            state_timestamp_ms=fx.now_ms,
            generation_id=view.generation,
            protocol_type=view.protocol_type,
            protocol_name=view.protocol_name,
        )
        for m in view.members:
            group.add(
                ClassicGroupMember(
                    member_id=m.member_id,
                    group_instance_id=m.instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    rebalance_timeout_ms=m.rebalance_timeout_ms,
                    session_timeout_ms=m.session_timeout_ms,
                    protocol_type=view.protocol_type or "",
                    protocols=m.protocols,
                    assignment=m.assignment,
                )
            )
        group.subscribed_topics = group.compute_subscribed_topics()
        fx.record(group_metadata_record(group.group_id, group.to_metadata_value(group.group_assignment())))
        # Installed now (classic handlers mutate in memory; the record above is what a replay builds):
        # the rebalance below needs the object, as in Kafka.
        self.groups[group.group_id] = group
        fx.event(GroupStateChanged(group.group_id, group.group_type, "", STABLE.value))
        for member in group.members.values():
            self._reschedule_heartbeat(group, member, fx)
        if rebalance is not None:
            self._prepare_rebalance(group, rebalance, fx)

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
            # A downgrade's rebalance the restart cut short (``migration.py``): the members' next
            # heartbeat hears REBALANCE_IN_PROGRESS and they rejoin, as they would have.
            reason, group.owed_rebalance = group.owed_rebalance, None
            if reason is None and len(group.members) > self.config.group_max_size:
                reason = "loaded group is over group.max.size"
            if reason is not None and group.state is STABLE:
                self._prepare_rebalance(group, reason, fx)

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
        group = ClassicGroup.from_metadata_value(key.group, value)
        if group.members and self.bridges.replayed_downgrade is not None:
            group.owed_rebalance = self.bridges.replayed_downgrade(group)
        self.groups[key.group] = group


def register(ctx: ShardContext) -> ClassicGroupManager:
    return ClassicGroupManager(ctx.config, ctx.groups, ctx.bridges)
