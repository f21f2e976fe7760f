"""The classic rebalance machinery every classic handler builds on: lookup, state transitions, the
join barrier (prepare, complete, next generation), assignment propagation and the join and sync
timers (Kafka's ``GroupMetadataManager`` classic half).

Read ``state.py`` first: it states the rules, the states and the invariants, and holds the two tables
(transitions, per-state errors) the handlers consult. The handlers are layered on this class:
``join.py`` (JoinGroup), ``members.py`` (SyncGroup, Heartbeat, LeaveGroup, session expiry), and
``manager.py`` puts them together with load, unload and replay.

Every handler takes the operation's :class:`~coordinator.core.effects.Effects` and writes replies,
records (``records.py``), timers and events into it. Handlers validate before they mutate: a
``CoordinatorError`` raised by a handler means "nothing happened", and the shard answers the request
with its code.
"""

from __future__ import annotations

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
    MemberLeft,
    RebalanceCompleted,
    RebalanceStarted,
)
from coordinator.core.groups import Group
from coordinator.core.migration import Bridges
from coordinator.core.responses import (
    JoinGroupResponse,
    SyncGroupResponse,
)

from .group import ClassicGroup, ClassicGroupMember
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
    can_rebalance,
    can_transition,
    state_error,
)

NONE = ErrorCode.NONE


def raise_state_error(api: Api, group: ClassicGroup, check: Check) -> None:
    error = state_error(api, group.state, check)
    if error is not None:
        raise CoordinatorError(error)


def inconsistent(requested: str | None, current: str | None) -> bool:
    return requested is not None and current is not None and requested != current


class ClassicRebalance:
    def __init__(self, config: GroupConfig, groups: dict[str, Group], bridges: Bridges | None = None) -> None:
        self.config = config
        self.groups = groups  # shared with the shard: one namespace for every group type
        self.bridges = bridges if bridges is not None else Bridges()

    def _group(self, group_id: str) -> ClassicGroup | None:
        group = self.groups.get(group_id)
        return group if isinstance(group, ClassicGroup) else None

    def _hosted(self, group_id: str, request: object, fx: Effects) -> bool:
        """A request for a group of another type that serves classic members (a consumer group in an
        online migration): handed to that type. False when there is no such group."""
        other = self.groups.get(group_id)
        if other is None or isinstance(other, ClassicGroup):
            return False
        handler = self.bridges.handler(other, request)
        if handler is None:
            return False
        handler(other, request, fx)
        return True

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
            fx.record(group_metadata_record(group.group_id, group.to_metadata_value({})))
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
