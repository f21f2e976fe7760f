"""SyncGroup, Heartbeat and LeaveGroup of classic groups, and session expiry of their members
(``classic-heartbeat`` timers), built on the rebalance machinery of ``rebalance.py``."""

from __future__ import annotations

from collections.abc import Callable

from coordinator.core.config import GroupConfig
from coordinator.core.effects import (
    Effects,
    TimerKey,
    classic_heartbeat_key,
)
from coordinator.core.errors import CoordinatorError, ErrorCode
from coordinator.core.events import (
    MemberLeft,
    SessionExpired,
)
from coordinator.core.groups import Group
from coordinator.core.migration import Bridges
from coordinator.core.requests import Heartbeat, LeaveGroup, SyncGroup
from coordinator.core.responses import (
    HeartbeatResponse,
    JoinGroupResponse,
    LeaveGroupMemberResponse,
    LeaveGroupResponse,
    SyncGroupResponse,
)

from .group import ClassicGroup, ClassicGroupMember
from .rebalance import ClassicRebalance, inconsistent, raise_state_error
from .records import group_metadata_record
from .state import (
    COMPLETING_REBALANCE,
    DEAD,
    EMPTY,
    PREPARING_REBALANCE,
    STABLE,
    Api,
    Check,
    ClassicGroupState,
    state_error,
)

NONE = ErrorCode.NONE


class MemberHandlers(ClassicRebalance):
    def __init__(self, config: GroupConfig, groups: dict[str, Group], bridges: Bridges | None = None) -> None:
        super().__init__(config, groups, bridges)
        self._sync_by_state: dict[
            ClassicGroupState, Callable[[ClassicGroup, ClassicGroupMember, SyncGroup, Effects], None]
        ] = {
            COMPLETING_REBALANCE: self._sync_completing,
            STABLE: self._sync_stable,
        }

    def sync(self, req: SyncGroup, fx: Effects) -> None:
        if not req.group_id:
            raise CoordinatorError(ErrorCode.INVALID_GROUP_ID)
        group = self._group(req.group_id)
        if group is None:
            if self._hosted(req.group_id, req, fx):
                return
            raise CoordinatorError(ErrorCode.UNKNOWN_MEMBER_ID)
        raise_state_error(Api.SYNC, group, Check.BEFORE_MEMBER)
        member = group.validate_member(req.member_id, req.group_instance_id)
        if req.generation_id != group.generation_id:
            raise CoordinatorError(ErrorCode.ILLEGAL_GENERATION)
        if inconsistent(req.protocol_type, group.protocol_type) or inconsistent(
            req.protocol_name, group.protocol_name
        ):
            raise CoordinatorError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        raise_state_error(Api.SYNC, group, Check.AFTER_MEMBER)
        self._sync_by_state[group.state](group, member, req, fx)

    def _sync_completing(self, group: ClassicGroup, member: ClassicGroupMember, req: SyncGroup, fx: Effects) -> None:
        member.sync_ref = req.ref
        self._remove_pending_sync_member(group, member.member_id, fx)
        if not group.is_leader(member.member_id):
            return  # parked until the leader's assignment is durable
        assignment = dict(req.assignments)
        for member_id in group.members:
            # Members the leader left out get EMPTY bytes, exactly as Kafka (not an encoded empty
            # ConsumerProtocolAssignment); entries for unknown member ids are ignored.
            assignment.setdefault(member_id, b"")
        # The record is built while still CompletingRebalance (Kafka's timestamp semantics).
        fx.record(group_metadata_record(group.group_id, group.to_metadata_value(assignment)))
        # Kafka applies the rest when the write commits. Replies in this Result are released only
        # once the record is durable, and a failed write stops the process, so applying it now is
        # the same thing with no window in between.
        for member_id, m in group.members.items():
            m.assignment = assignment[member_id]
        self._propagate_assignment(group, NONE, fx)
        self._transition(group, STABLE, fx)
        self._rebalance_completed(group, fx)

    def _sync_stable(self, group: ClassicGroup, member: ClassicGroupMember, req: SyncGroup, fx: Effects) -> None:
        self._remove_pending_sync_member(group, member.member_id, fx)
        fx.reply(
            req.ref,
            SyncGroupResponse(NONE, group.protocol_type, group.protocol_name, member.assignment),
        )

    def heartbeat(self, req: Heartbeat, fx: Effects) -> None:
        if not req.group_id:
            raise CoordinatorError(ErrorCode.INVALID_GROUP_ID)
        group = self._group(req.group_id)
        if group is None:
            if self._hosted(req.group_id, req, fx):
                return
            raise CoordinatorError(ErrorCode.UNKNOWN_MEMBER_ID)
        raise_state_error(Api.HEARTBEAT, group, Check.BEFORE_MEMBER)
        member = group.validate_member(req.member_id, req.group_instance_id)
        if req.generation_id != group.generation_id:
            raise CoordinatorError(ErrorCode.ILLEGAL_GENERATION)
        error = state_error(Api.HEARTBEAT, group.state, Check.AFTER_MEMBER)
        if group.state is not EMPTY:
            self._reschedule_heartbeat(group, member, fx)
        fx.reply(req.ref, HeartbeatResponse(NONE if error is None else error))

    def on_heartbeat_timer(self, key: TimerKey, fx: Effects) -> None:
        group = self._group(key[1])
        member_id = key[2]
        if group is None or group.state is DEAD:
            return
        if group.is_pending_member(member_id):
            group.remove(member_id)
            fx.event(SessionExpired(group.group_id, member_id))
            if group.state is PREPARING_REBALANCE and group.has_all_members_joined():
                self._complete_join(group, fx)
            return
        member = group.members.get(member_id)
        if member is None or member.has_satisfied_heartbeat():
            return
        fx.event(SessionExpired(group.group_id, member_id))
        self._remove_member_and_update_group(group, member, "session-timeout", fx)

    def _remove_member_and_update_group(
        self, group: ClassicGroup, member: ClassicGroupMember, reason: str, fx: Effects
    ) -> None:
        if member.join_ref is not None:
            # A parked new member timed out: UNKNOWN_MEMBER_ID makes a live client simply rejoin.
            fx.reply(member.join_ref, JoinGroupResponse(ErrorCode.UNKNOWN_MEMBER_ID))
            member.join_ref = None
        group.remove(member.member_id)
        fx.event(MemberLeft(group.group_id, member.member_id, reason))
        if group.state in (STABLE, COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance_or_complete_join(group, f"member {member.member_id} {reason}", fx)
        elif group.state is PREPARING_REBALANCE and group.has_all_members_joined():
            self._complete_join(group, fx)

    def leave(self, req: LeaveGroup, fx: Effects) -> None:
        if not req.group_id:
            raise CoordinatorError(ErrorCode.INVALID_GROUP_ID)
        group = self._group(req.group_id)
        if group is None and self._hosted(req.group_id, req, fx):
            return
        if group is None:
            fx.reply(
                req.ref,
                LeaveGroupResponse(
                    NONE,
                    tuple(
                        LeaveGroupMemberResponse(m.member_id, m.group_instance_id, ErrorCode.UNKNOWN_MEMBER_ID)
                        for m in req.members
                    ),
                ),
            )
            return
        raise_state_error(Api.LEAVE, group, Check.BEFORE_MEMBER)
        responses = []
        for leaving in req.members:
            error = self._leave_one(group, leaving.member_id, leaving.group_instance_id, fx)
            responses.append(LeaveGroupMemberResponse(leaving.member_id, leaving.group_instance_id, error))
        if any(r.error_code is NONE for r in responses):
            if group.state in (STABLE, COMPLETING_REBALANCE):
                self._maybe_prepare_rebalance_or_complete_join(group, "members left the group", fx)
            elif group.state is PREPARING_REBALANCE:
                self._maybe_complete_join_phase(group, fx)
        fx.reply(req.ref, LeaveGroupResponse(NONE, tuple(responses)))

    def _leave_one(self, group: ClassicGroup, member_id: str, instance_id: str | None, fx: Effects) -> ErrorCode:
        if member_id == "":
            # Admin removal by instance id (kafka-consumer-groups --remove-members).
            target = group.static_members.get(instance_id) if instance_id is not None else None
            if target is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            self._remove_current_member(group, target, fx)
            return NONE
        if group.is_pending_member(member_id):
            group.remove(member_id)
            fx.cancel(classic_heartbeat_key(group.group_id, member_id))
            return NONE
        try:
            group.validate_member(member_id, instance_id)
        except CoordinatorError as exc:
            return exc.code
        self._remove_current_member(group, member_id, fx)
        return NONE

    def _remove_current_member(self, group: ClassicGroup, member_id: str, fx: Effects) -> None:
        member = group.members[member_id]
        fx.cancel(classic_heartbeat_key(group.group_id, member_id))
        if member.join_ref is not None:
            fx.reply(member.join_ref, JoinGroupResponse(ErrorCode.UNKNOWN_MEMBER_ID))
            member.join_ref = None
        group.remove(member_id)
        fx.event(MemberLeft(group.group_id, member_id, "leave-group"))
