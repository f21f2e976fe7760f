"""Request and timer handlers of classic groups (Kafka's ``GroupMetadataManager`` classic half).

Read ``state.py`` first: it states the rules, the states and the invariants this module implements,
and holds the two tables (transitions, per-state errors) the handlers consult.

Every handler takes the operation's :class:`~coordinator.core.effects.Effects` and writes replies,
records, timers and events into it. Handlers validate before they mutate: a ``CoordinatorError`` raised
by a handler means "nothing happened", and the shard answers the request with its code.

Timers (one per key, re-arming replaces, see ``effects``):

* ``classic-heartbeat/<group>/<member>``: session timeout of a member or of a KIP-394 pending id;
  the 5-minute new-member join timeout while a new member is parked.
* ``classic-join/<group>``: the initial-rebalance delay, or the rebalance timeout of the join barrier.
* ``classic-sync/<group>``: the rebalance timeout of the sync barrier.
"""

from __future__ import annotations

from collections.abc import Callable

from coordinator.core.config import GroupConfig
from coordinator.core.effects import (
    Effects,
    TimerKey,
    classic_heartbeat_key,
    classic_join_key,
    classic_sync_key,
)
from coordinator.core.errors import CoordinatorError, ErrorCode
from coordinator.core.events import (
    GroupStateChanged,
    MemberJoined,
    MemberLeft,
    RebalanceCompleted,
    RebalanceStarted,
    SessionExpired,
    StaticMemberReplaced,
)
from coordinator.core.groups import Group
from coordinator.core.records import GroupMetadataKey, GroupMetadataValue, Record
from coordinator.core.requests import Heartbeat, JoinGroup, LeaveGroup, SyncGroup
from coordinator.core.responses import (
    HeartbeatResponse,
    JoinGroupResponse,
    LeaveGroupMemberResponse,
    LeaveGroupResponse,
    SyncGroupResponse,
)

from .group import ClassicGroup, ClassicGroupMember
from .state import (
    COMPLETING_REBALANCE,
    DEAD,
    EMPTY,
    PREPARING_REBALANCE,
    STABLE,
    Api,
    Check,
    ClassicGroupState,
    can_rebalance,
    can_transition,
    state_error,
)

NONE = ErrorCode.NONE


def _raise_state_error(api: Api, group: ClassicGroup, check: Check) -> None:
    error = state_error(api, group.state, check)
    if error is not None:
        raise CoordinatorError(error)


class ClassicGroupManager:
    def __init__(self, config: GroupConfig, groups: dict[str, Group]) -> None:
        self.config = config
        self.groups = groups  # shared with the shard (and the offset manager)
        # Per-state behaviour of a JoinGroup from a known member, after validation.
        self._join_existing_by_state: dict[
            ClassicGroupState, Callable[[ClassicGroup, ClassicGroupMember, JoinGroup, Effects], None]
        ] = {
            PREPARING_REBALANCE: self._join_existing_preparing,
            COMPLETING_REBALANCE: self._join_existing_completing,
            STABLE: self._join_existing_stable,
        }
        self._sync_by_state: dict[
            ClassicGroupState, Callable[[ClassicGroup, ClassicGroupMember, SyncGroup, Effects], None]
        ] = {
            COMPLETING_REBALANCE: self._sync_completing,
            STABLE: self._sync_stable,
        }

    # =============================================================================================
    # Lookup and state transitions
    # =============================================================================================

    def _group(self, group_id: str) -> ClassicGroup | None:
        group = self.groups.get(group_id)
        return group if isinstance(group, ClassicGroup) else None

    def _transition(self, group: ClassicGroup, target: ClassicGroupState, fx: Effects) -> None:
        assert can_transition(group.state, target), f"illegal transition {group.state} -> {target}"
        old = group.state
        group.previous_state = old
        group.state = target
        group.state_timestamp_ms = fx.now_ms
        fx.event(GroupStateChanged(group.group_id, group.group_type, old.value, target.value))

    def _reschedule_heartbeat(
        self, group: ClassicGroup, member: ClassicGroupMember, fx: Effects, timeout_ms: int | None = None
    ) -> None:
        delay = member.session_timeout_ms if timeout_ms is None else timeout_ms
        fx.schedule(classic_heartbeat_key(group.group_id, member.member_id), delay)

    # =============================================================================================
    # JoinGroup
    # =============================================================================================

    def join(self, req: JoinGroup, fx: Effects) -> None:
        if not req.group_id:
            raise CoordinatorError(ErrorCode.INVALID_GROUP_ID)
        if not (
            self.config.group_min_session_timeout_ms
            <= req.session_timeout_ms
            <= self.config.group_max_session_timeout_ms
        ):
            raise CoordinatorError(ErrorCode.INVALID_SESSION_TIMEOUT)
        if req.group_id in self.groups and self._group(req.group_id) is None:
            # A group of another type (KIP-848 migration is not implemented).
            raise CoordinatorError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)

        group = self._group(req.group_id)
        is_new_group = group is None
        if group is None:
            if req.member_id:
                raise CoordinatorError(ErrorCode.UNKNOWN_MEMBER_ID)
            group = ClassicGroup(req.group_id, state_timestamp_ms=fx.now_ms)
            self.groups[req.group_id] = group
            fx.event(GroupStateChanged(group.group_id, group.group_type, "", EMPTY.value))

        records_before = len(fx.records)
        try:
            if not self._accept_joining_member(group, req.member_id):
                if group.remove(req.member_id) is not None:
                    fx.cancel(classic_heartbeat_key(group.group_id, req.member_id))
                    fx.event(MemberLeft(group.group_id, req.member_id, "group-max-size"))
                raise CoordinatorError(ErrorCode.GROUP_MAX_SIZE_REACHED)
            if req.member_id:
                self._join_existing_member(group, req, fx)
            else:
                self._join_new_member(group, req, fx)
        except CoordinatorError as exc:
            # Member-id echo rules of Kafka's error responses: a new member, or a group that is full,
            # gets "" back; a known member id is echoed.
            echo = "" if exc.code is ErrorCode.GROUP_MAX_SIZE_REACHED else req.member_id
            fx.reply(req.ref, JoinGroupResponse(exc.code, member_id=echo))

        if is_new_group and len(fx.records) == records_before:
            # Kafka 4 makes the creation durable with an "empty group" record when the join itself
            # wrote nothing (it never does for a brand-new group), even if the join was rejected.
            fx.record(
                Record(
                    GroupMetadataKey(group.group_id),
                    GroupMetadataValue(
                        protocol_type="",
                        generation=0,
                        protocol=None,
                        leader=None,
                        current_state_timestamp=fx.now_ms,
                    ),
                )
            )

    def _accept_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        """``group.max.size`` admission (``acceptJoiningMember``)."""
        max_size = self.config.group_max_size
        if group.state in (EMPTY, DEAD):
            return True
        if group.state is PREPARING_REBALANCE:
            # Count parked members, not members: the group may already be above a lowered limit, and
            # this lets the last rejoining members be the ones turned away.
            member = group.members.get(member_id)
            return (member is not None and member.is_awaiting_join) or group.num_awaiting_join < max_size
        return member_id in group.members or len(group.members) < max_size

    def _join_new_member(self, group: ClassicGroup, req: JoinGroup, fx: Effects) -> None:
        _raise_state_error(Api.JOIN_NEW_MEMBER, group, Check.BEFORE_MEMBER)
        if not group.supports_protocols(req.protocol_type, req.protocols):
            raise CoordinatorError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        new_member_id = req.new_member_id
        assert new_member_id, "the adapter must pre-generate new_member_id"

        if req.group_instance_id is not None:
            existing = group.static_members.get(req.group_instance_id)
            if existing is not None:
                self._replace_static_member(group, req, existing, new_member_id, fx)
            else:
                self._add_member_then_rebalance_or_complete_join(group, req, new_member_id, fx)
        elif req.require_known_member_id:
            # KIP-394: hand out the id and wait for the member to come back with it. The pending id
            # lives for one session timeout, and a join barrier waits for it (Kafka does both).
            group.pending_join_members[new_member_id] = None
            fx.schedule(classic_heartbeat_key(group.group_id, new_member_id), req.session_timeout_ms)
            fx.reply(req.ref, JoinGroupResponse(ErrorCode.MEMBER_ID_REQUIRED, member_id=new_member_id))
        else:
            self._add_member_then_rebalance_or_complete_join(group, req, new_member_id, fx)

    def _join_existing_member(self, group: ClassicGroup, req: JoinGroup, fx: Effects) -> None:
        _raise_state_error(Api.JOIN_EXISTING_MEMBER, group, Check.BEFORE_MEMBER)
        if not group.supports_protocols(req.protocol_type, req.protocols):
            raise CoordinatorError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if group.is_pending_member(req.member_id):
            if req.group_instance_id is not None:
                # Pending ids are only handed to dynamic members; Kafka fails this as a bug.
                raise CoordinatorError(ErrorCode.UNKNOWN_SERVER_ERROR)
            self._add_member_then_rebalance_or_complete_join(group, req, req.member_id, fx)
            return
        member = group.validate_member(req.member_id, req.group_instance_id)
        _raise_state_error(Api.JOIN_EXISTING_MEMBER, group, Check.AFTER_MEMBER)
        self._join_existing_by_state[group.state](group, member, req, fx)

    def _join_existing_preparing(
        self, group: ClassicGroup, member: ClassicGroupMember, req: JoinGroup, fx: Effects
    ) -> None:
        # A second parked join of the same member replaces the first, which is never answered
        # (as in Kafka): it came on another connection, which its client has given up on.
        self._update_member_then_rebalance_or_complete_join(group, member, req, "member rejoining", fx)

    def _join_existing_completing(
        self, group: ClassicGroup, member: ClassicGroupMember, req: JoinGroup, fx: Effects
    ) -> None:
        if member.matches(req.protocols):
            # Probably a lost JoinGroup response: answer again for the current generation.
            fx.reply(req.ref, self._join_response(group, member, with_members=group.is_leader(member.member_id)))
        else:
            self._update_member_then_rebalance_or_complete_join(
                group, member, req, "member changed protocols during CompletingRebalance", fx
            )

    def _join_existing_stable(
        self, group: ClassicGroup, member: ClassicGroupMember, req: JoinGroup, fx: Effects
    ) -> None:
        if group.is_leader(member.member_id):
            # A leader's JoinGroup always rebalances: that is how clients ask for one when something
            # outside the member metadata changed (e.g. topic metadata).
            self._update_member_then_rebalance_or_complete_join(group, member, req, "leader rejoining", fx)
        elif not member.matches(req.protocols):
            self._update_member_then_rebalance_or_complete_join(
                group, member, req, "member changed protocols", fx
            )
        else:
            fx.reply(req.ref, self._join_response(group, member, with_members=False))

    def _join_response(
        self, group: ClassicGroup, member: ClassicGroupMember, with_members: bool
    ) -> JoinGroupResponse:
        return JoinGroupResponse(
            NONE,
            member_id=member.member_id,
            generation_id=group.generation_id,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader=group.leader_id or "",
            members=group.current_members_for_join() if with_members else (),
        )

    def _add_member_then_rebalance_or_complete_join(
        self, group: ClassicGroup, req: JoinGroup, member_id: str, fx: Effects
    ) -> None:
        member = ClassicGroupMember(
            member_id=member_id,
            group_instance_id=req.group_instance_id,
            client_id=req.client_id,
            client_host=req.client_host,
            rebalance_timeout_ms=req.rebalance_timeout_ms,
            session_timeout_ms=req.session_timeout_ms,
            protocol_type=req.protocol_type,
            protocols=req.protocols,
            join_ref=req.ref,
            is_new=True,
        )
        if group.state is PREPARING_REBALANCE and group.previous_state is EMPTY:
            group.new_member_added = True  # extends the initial-rebalance delay
        group.add(member)
        fx.event(MemberJoined(group.group_id, member_id, req.group_instance_id, req.client_id, req.client_host))
        # A parked new member cannot heartbeat, and a client that disconnected and retried would
        # otherwise leave defunct members forever: bound the wait by the new-member join timeout.
        self._reschedule_heartbeat(group, member, fx, self.config.new_member_join_timeout_ms)
        self._maybe_prepare_rebalance_or_complete_join(group, f"new member {member_id} joined", fx)

    def _update_member_then_rebalance_or_complete_join(
        self, group: ClassicGroup, member: ClassicGroupMember, req: JoinGroup, reason: str, fx: Effects
    ) -> None:
        group.update_member(member, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms, req.ref)
        self._maybe_prepare_rebalance_or_complete_join(group, reason, fx)

    def _replace_static_member(
        self, group: ClassicGroup, req: JoinGroup, old_member_id: str, new_member_id: str, fx: Effects
    ) -> None:
        """A known instance id joined with an empty member id: the restarted member takes its slot."""
        assert req.group_instance_id is not None
        leader_before = group.leader_id
        old, new = group.replace_static_member(req.group_instance_id, old_member_id, new_member_id)
        # Fence whatever the previous incarnation still has parked.
        if old.join_ref is not None:
            fx.reply(old.join_ref, JoinGroupResponse(ErrorCode.FENCED_INSTANCE_ID, member_id=old_member_id))
        if old.sync_ref is not None:
            fx.reply(old.sync_ref, SyncGroupResponse(ErrorCode.FENCED_INSTANCE_ID))
        fx.cancel(classic_heartbeat_key(group.group_id, old_member_id))
        self._reschedule_heartbeat(group, new, fx)
        fx.event(StaticMemberReplaced(group.group_id, req.group_instance_id, old_member_id, new_member_id))
        group.update_member(new, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms, req.ref)

        if group.state is STABLE:
            if group.protocol_name == group.select_protocol():
                # No rebalance: persist the new member id, answer with the current generation.
                fx.record(
                    Record(GroupMetadataKey(group.group_id), group.to_metadata_value(group.group_assignment()))
                )
                new.join_ref = None
                if req.supports_skip_assignment:
                    # v9+ (KIP-814): a leader gets the members but must not reassign.
                    is_leader = group.is_leader(new_member_id)
                    response = JoinGroupResponse(
                        NONE,
                        member_id=new_member_id,
                        generation_id=group.generation_id,
                        protocol_type=group.protocol_type,
                        protocol_name=group.protocol_name,
                        leader=group.leader_id or "",
                        skip_assignment=is_leader,
                        members=group.current_members_for_join() if is_leader else (),
                    )
                else:
                    # Older clients: report the leader as it was BEFORE the replacement, so a restarted
                    # leader does not think it leads and run a useless assignment.
                    response = JoinGroupResponse(
                        NONE,
                        member_id=new_member_id,
                        generation_id=group.generation_id,
                        protocol_type=group.protocol_type,
                        protocol_name=group.protocol_name,
                        leader=leader_before or "",
                    )
                fx.reply(req.ref, response)
            else:
                self._maybe_prepare_rebalance_or_complete_join(
                    group, f"static member {req.group_instance_id} changed the selected protocol", fx
                )
        elif group.state is COMPLETING_REBALANCE:
            # The leader may be computing an assignment keyed by the old id (KAFKA-9801): rebalance.
            self._prepare_rebalance(group, f"static member {req.group_instance_id} rejoined", fx)
        else:
            assert group.state is PREPARING_REBALANCE, f"static replacement in {group.state}"
            self._maybe_complete_join_phase(group, fx)

    # =============================================================================================
    # Rebalance machinery: prepare, join barrier, initial delay, join completion
    # =============================================================================================

    def _maybe_prepare_rebalance_or_complete_join(self, group: ClassicGroup, reason: str, fx: Effects) -> None:
        if can_rebalance(group.state):
            self._prepare_rebalance(group, reason, fx)
        else:
            self._maybe_complete_join_phase(group, fx)

    def _prepare_rebalance(self, group: ClassicGroup, reason: str, fx: Effects) -> None:
        if group.state is COMPLETING_REBALANCE:
            # Parked SyncGroups will never get this generation's assignment: make them rejoin.
            self._reset_and_propagate_assignment(group, ErrorCode.REBALANCE_IN_PROGRESS, fx)
        group.pending_sync_members.clear()
        fx.cancel(classic_sync_key(group.group_id))

        is_initial = group.state is EMPTY
        if group.state in (EMPTY, STABLE):
            group.rebalance_started_ms = fx.now_ms
        fx.event(RebalanceStarted(group.group_id, group.group_type, group.generation_id, reason))
        if is_initial:
            delay = self.config.group_initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            group.initial_delay = (delay, remaining)
            fx.schedule(classic_join_key(group.group_id), delay)
        self._transition(group, PREPARING_REBALANCE, fx)
        if not is_initial:
            self._maybe_complete_join_else_schedule(group, fx)

    def _maybe_complete_join_else_schedule(self, group: ClassicGroup, fx: Effects) -> None:
        if group.has_all_members_joined():
            self._complete_join(group, fx)
        else:
            group.initial_delay = None
            fx.schedule(classic_join_key(group.group_id), group.rebalance_timeout_ms())

    def _maybe_complete_join_phase(self, group: ClassicGroup, fx: Effects) -> None:
        if (
            group.state is PREPARING_REBALANCE
            # The initial rebalance completes only on its delay timer.
            and group.previous_state is not EMPTY
            and group.has_all_members_joined()
        ):
            self._complete_join(group, fx)

    def on_join_timer(self, key: TimerKey, fx: Effects) -> None:
        group = self._group(key[1])
        if group is None:
            return
        if group.initial_delay is not None:
            delay, remaining = group.initial_delay
            if group.new_member_added and remaining != 0:
                # Someone arrived during the last delay: wait one more delay, within the budget.
                group.new_member_added = False
                new_delay = min(self.config.group_initial_rebalance_delay_ms, remaining)
                group.initial_delay = (new_delay, max(remaining - delay, 0))
                fx.schedule(classic_join_key(group.group_id), new_delay)
                return
        self._complete_join(group, fx)

    def _complete_join(self, group: ClassicGroup, fx: Effects) -> None:
        fx.cancel(classic_join_key(group.group_id))
        group.initial_delay = None
        for member in list(group.members.values()):
            # Dynamic members that did not rejoin are gone; static ones keep their slot (and their
            # last metadata) until their session times out.
            if not member.is_awaiting_join and not member.is_static:
                group.remove(member.member_id)
                fx.cancel(classic_heartbeat_key(group.group_id, member.member_id))
                fx.event(MemberLeft(group.group_id, member.member_id, "did-not-rejoin"))

        if group.state is DEAD:
            return
        if not self._maybe_elect_new_joined_leader(group) and group.members:
            # Nobody rejoined (all remaining members are static and silent): keep waiting; session
            # timeouts will eventually clear them.
            fx.schedule(classic_join_key(group.group_id), group.rebalance_timeout_ms())
            return

        self._init_next_generation(group, fx)
        if group.state is EMPTY:
            fx.record(Record(GroupMetadataKey(group.group_id), group.to_metadata_value({})))
            self._rebalance_completed(group, fx)
            return
        for member in group.members.values():
            if member.join_ref is not None:
                fx.reply(member.join_ref, self._join_response(group, member, group.is_leader(member.member_id)))
                member.join_ref = None
            self._reschedule_heartbeat(group, member, fx)
            member.is_new = False
            group.pending_sync_members[member.member_id] = None
        group.sync_generation = group.generation_id
        fx.schedule(classic_sync_key(group.group_id), group.rebalance_timeout_ms())

    def _maybe_elect_new_joined_leader(self, group: ClassicGroup) -> bool:
        if group.leader_id is None:
            return False
        if group.members[group.leader_id].is_awaiting_join:
            return True
        for member in group.members.values():
            if member.is_awaiting_join:
                group.leader_id = member.member_id
                return True
        return False

    def _init_next_generation(self, group: ClassicGroup, fx: Effects) -> None:
        group.generation_id += 1
        if group.members:
            group.protocol_name = group.select_protocol()
            group.subscribed_topics = group.compute_subscribed_topics()
            self._transition(group, COMPLETING_REBALANCE, fx)
        else:
            group.protocol_name = None
            group.subscribed_topics = group.compute_subscribed_topics()
            self._transition(group, EMPTY, fx)
        group.pending_sync_members.clear()

    def _rebalance_completed(self, group: ClassicGroup, fx: Effects) -> None:
        started = group.rebalance_started_ms
        duration = 0 if started is None else fx.now_ms - started
        group.rebalance_started_ms = None
        fx.event(RebalanceCompleted(group.group_id, group.generation_id, duration, len(group.members)))

    # =============================================================================================
    # SyncGroup
    # =============================================================================================

    def sync(self, req: SyncGroup, fx: Effects) -> None:
        if not req.group_id:
            raise CoordinatorError(ErrorCode.INVALID_GROUP_ID)
        group = self._group(req.group_id)
        if group is None:
            raise CoordinatorError(ErrorCode.UNKNOWN_MEMBER_ID)
        _raise_state_error(Api.SYNC, group, Check.BEFORE_MEMBER)
        member = group.validate_member(req.member_id, req.group_instance_id)
        if req.generation_id != group.generation_id:
            raise CoordinatorError(ErrorCode.ILLEGAL_GENERATION)
        if _inconsistent(req.protocol_type, group.protocol_type) or _inconsistent(
            req.protocol_name, group.protocol_name
        ):
            raise CoordinatorError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        _raise_state_error(Api.SYNC, group, Check.AFTER_MEMBER)
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
        fx.record(Record(GroupMetadataKey(group.group_id), group.to_metadata_value(assignment)))
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

    def _remove_pending_sync_member(self, group: ClassicGroup, member_id: str, fx: Effects) -> None:
        group.pending_sync_members.pop(member_id, None)
        if not group.pending_sync_members:
            fx.cancel(classic_sync_key(group.group_id))

    def _reset_and_propagate_assignment(self, group: ClassicGroup, error: ErrorCode, fx: Effects) -> None:
        assert group.state is COMPLETING_REBALANCE
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error, fx)

    def _propagate_assignment(self, group: ClassicGroup, error: ErrorCode, fx: Effects) -> None:
        ok = error is NONE
        for member in group.members.values():
            if member.sync_ref is None:
                continue
            fx.reply(
                member.sync_ref,
                SyncGroupResponse(
                    error,
                    group.protocol_type if ok else None,
                    group.protocol_name if ok else None,
                    member.assignment,
                ),
            )
            member.sync_ref = None
            # The member may have been "expired" while parked (expiry ignores parked members and does
            # not re-arm): give it a fresh session now.
            self._reschedule_heartbeat(group, member, fx)

    def on_sync_timer(self, key: TimerKey, fx: Effects) -> None:
        group = self._group(key[1])
        if group is None or group.sync_generation != group.generation_id:
            return
        if group.state not in (COMPLETING_REBALANCE, STABLE) or not group.pending_sync_members:
            return
        for member_id in list(group.pending_sync_members):
            group.remove(member_id)
            fx.cancel(classic_heartbeat_key(group.group_id, member_id))
            fx.event(MemberLeft(group.group_id, member_id, "did-not-sync"))
        self._prepare_rebalance(group, "members did not send SyncGroup in time", fx)

    # =============================================================================================
    # Heartbeat and session expiry
    # =============================================================================================

    def heartbeat(self, req: Heartbeat, fx: Effects) -> None:
        if not req.group_id:
            raise CoordinatorError(ErrorCode.INVALID_GROUP_ID)
        group = self._group(req.group_id)
        if group is None:
            raise CoordinatorError(ErrorCode.UNKNOWN_MEMBER_ID)
        _raise_state_error(Api.HEARTBEAT, group, Check.BEFORE_MEMBER)
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

    # =============================================================================================
    # LeaveGroup
    # =============================================================================================

    def leave(self, req: LeaveGroup, fx: Effects) -> None:
        if not req.group_id:
            raise CoordinatorError(ErrorCode.INVALID_GROUP_ID)
        group = self._group(req.group_id)
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
        _raise_state_error(Api.LEAVE, group, Check.BEFORE_MEMBER)
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

    # =============================================================================================
    # Load, unload, replay
    # =============================================================================================

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


def _inconsistent(requested: str | None, current: str | None) -> bool:
    return requested is not None and current is not None and requested != current
