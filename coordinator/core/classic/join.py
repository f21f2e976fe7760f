"""JoinGroup of classic groups: new and known members, KIP-394 member ids, static members
(KIP-345), group.max.size, and when a join starts or completes a rebalance (see ``rebalance.py``)."""

from __future__ import annotations

from collections.abc import Callable

from coordinator.core.config import GroupConfig
from coordinator.core.effects import (
    Effects,
    classic_heartbeat_key,
)
from coordinator.core.errors import CoordinatorError, ErrorCode
from coordinator.core.events import (
    GroupStateChanged,
    MemberJoined,
    MemberLeft,
    StaticMemberReplaced,
)
from coordinator.core.groups import Group
from coordinator.core.migration import Bridges
from coordinator.core.requests import JoinGroup
from coordinator.core.responses import (
    JoinGroupResponse,
    SyncGroupResponse,
)

from .group import ClassicGroup, ClassicGroupMember
from .rebalance import ClassicRebalance, raise_state_error
from .records import empty_group_record, group_metadata_record
from .state import (
    COMPLETING_REBALANCE,
    DEAD,
    EMPTY,
    PREPARING_REBALANCE,
    STABLE,
    Api,
    Check,
    ClassicGroupState,
)

NONE = ErrorCode.NONE


class JoinHandlers(ClassicRebalance):
    def __init__(self, config: GroupConfig, groups: dict[str, Group], bridges: Bridges | None = None) -> None:
        super().__init__(config, groups, bridges)
        # Per-state behaviour of a JoinGroup from a known member, after validation.
        self._join_existing_by_state: dict[
            ClassicGroupState, Callable[[ClassicGroup, ClassicGroupMember, JoinGroup, Effects], None]
        ] = {
            PREPARING_REBALANCE: self._join_existing_preparing,
            COMPLETING_REBALANCE: self._join_existing_completing,
            STABLE: self._join_existing_stable,
        }

    def join(self, req: JoinGroup, fx: Effects) -> None:
        if not req.group_id:
            raise CoordinatorError(ErrorCode.INVALID_GROUP_ID)
        if not (
            self.config.group_min_session_timeout_ms
            <= req.session_timeout_ms
            <= self.config.group_max_session_timeout_ms
        ):
            raise CoordinatorError(ErrorCode.INVALID_SESSION_TIMEOUT)
        other = self.groups.get(req.group_id)
        if other is not None and not isinstance(other, ClassicGroup):
            if not other.is_empty:
                # A live group of another type (KIP-848): its type serves classic members, if it does.
                if not self._hosted(req.group_id, req, fx):
                    raise CoordinatorError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
                return
            if req.member_id:
                raise CoordinatorError(ErrorCode.UNKNOWN_MEMBER_ID)
            # An empty group of another type is replaced (Kafka's offline downgrade; its offsets stay):
            # its tombstones, then a new classic group, in this same log entry.
            for record in other.tombstones():
                fx.record(record)
            del self.groups[req.group_id]

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
            fx.record(empty_group_record(group.group_id, fx.now_ms))

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
        raise_state_error(Api.JOIN_NEW_MEMBER, group, Check.BEFORE_MEMBER)
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
        raise_state_error(Api.JOIN_EXISTING_MEMBER, group, Check.BEFORE_MEMBER)
        if not group.supports_protocols(req.protocol_type, req.protocols):
            raise CoordinatorError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if group.is_pending_member(req.member_id):
            if req.group_instance_id is not None:
                # Pending ids are only handed to dynamic members; Kafka fails this as a bug.
                raise CoordinatorError(ErrorCode.UNKNOWN_SERVER_ERROR)
            self._add_member_then_rebalance_or_complete_join(group, req, req.member_id, fx)
            return
        member = group.validate_member(req.member_id, req.group_instance_id)
        raise_state_error(Api.JOIN_EXISTING_MEMBER, group, Check.AFTER_MEMBER)
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
            if group.protocol_name != group.select_protocol():
                self._maybe_prepare_rebalance_or_complete_join(
                    group, f"static member {req.group_instance_id} changed the selected protocol", fx
                )
            elif _subscription_changed(group, old, new):
                # Not in Kafka 4.0 (KAFKA-12759, open upstream): the restarted member keeps the old
                # assignment when it fits its subscription, and the leader watches only the topics
                # the members subscribed to when it last assigned, so the topics the new
                # subscription adds would never be assigned. Only the topics count: what a
                # restarted member declares besides (owned partitions, generation) differs on
                # every restart.
                self._maybe_prepare_rebalance_or_complete_join(
                    group, f"static member {req.group_instance_id} changed its subscription", fx
                )
            else:
                # No rebalance: persist the new member id, answer with the current generation.
                fx.record(
                    group_metadata_record(group.group_id, group.to_metadata_value(group.group_assignment()))
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
        elif group.state is COMPLETING_REBALANCE:
            # The leader may be computing an assignment keyed by the old id (KAFKA-9801): rebalance.
            self._prepare_rebalance(group, f"static member {req.group_instance_id} rejoined", fx)
        else:
            assert group.state is PREPARING_REBALANCE, f"static replacement in {group.state}"
            self._maybe_complete_join_phase(group, fx)


def _subscription_changed(group: ClassicGroup, old: ClassicGroupMember, new: ClassicGroupMember) -> bool:
    """Whether a static replacement subscribes to other topics than the member it replaces (both
    readable as consumer-protocol subscriptions; otherwise Kafka's answer stands: no rebalance)."""
    before, after = group.member_topics(old), group.member_topics(new)
    return before is not None and after is not None and before != after
