"""Leaving and being removed: LeaveGroup-by-heartbeat (epoch -1 / -2), fencing, the session and
rebalance timers of KIP-848 members, and what loading the shard and topic changes mean for them.

Leaving (epoch -1) fences the member: current-assignment, target and metadata tombstones, then a
group epoch bump; the assignor runs on the next heartbeat. A static member's temporary leave (-2)
writes one current-assignment record at epoch -2 and keeps everything else (no rebalance); its
session timer keeps running and fences it unless a replacement arrives in time.

Timers: ``consumer-session/<group>/<member>`` (re-armed by every successful heartbeat; expiry
fences) and ``consumer-rebalance/<group>/<member>`` (armed when the member starts revoking; expiry
fences it if it is still revoking); for members speaking the classic protocol (online migration)
``consumer-join/<group>/<member>`` and ``consumer-sync/<group>/<member>`` instead of the rebalance
timer (``classic_members.py`` arms them; expiry fences). Keys in ``context.py``.

Fencing the last consumer-protocol members of a group that still has classic members converts it
back to a classic group instead, when the migration policy allows (``migration.py``).
"""

from __future__ import annotations

from collections.abc import Sequence

from msgspec.structs import replace

from coordinator.core.effects import Effects, TimerKey
from coordinator.core.errors import CoordinatorError, ErrorCode
from coordinator.core.events import MemberFenced, MemberLeft, RebalanceStarted, SessionExpired
from coordinator.core.migration import downgrade_reason
from coordinator.core.requests import ConsumerGroupHeartbeat, TopicsChanged
from coordinator.core.responses import ConsumerGroupHeartbeatResponse

from .assignment import NO_PARTITIONS, at_one_epoch, partition_count
from .context import ConsumerContext, member_timer_keys, rebalance_timer_key, session_timer_key
from .group import ConsumerGroup
from .member import LEAVE_GROUP_STATIC_MEMBER_EPOCH, ConsumerGroupMember, MemberState
from .migration import Migration
from .records import current_assignment_record, group_epoch_record, member_tombstones

NONE = ErrorCode.NONE


class Membership:
    def __init__(self, ctx: ConsumerContext, migration: Migration) -> None:
        self.ctx = ctx
        self.migration = migration

    def leave(self, req: ConsumerGroupHeartbeat, fx: Effects) -> None:
        group = self.ctx.existing_group(req.group_id)
        if req.instance_id is None:
            member = group.members.get(req.member_id)
            if member is None:
                raise CoordinatorError(
                    ErrorCode.UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a member of group {group.group_id}."
                )
        else:
            holder = group.static_member(req.instance_id)
            if holder is None:
                raise CoordinatorError(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {req.instance_id} is unknown.")
            if holder.member_id != req.member_id:
                raise CoordinatorError(
                    ErrorCode.FENCED_INSTANCE_ID,
                    f"Static member {req.member_id} with instance id {req.instance_id} was fenced by member "
                    f"{holder.member_id}.",
                )
            member = holder
            if req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                # Assignment epochs go back to 0 (Kafka 4.3): the instance's next incarnation holds
                # them from epoch 0 under its new member id, and this member id's commits are fenced.
                left = replace(
                    member,
                    member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH,
                    partitions_pending_revocation=NO_PARTITIONS,
                    assignment_epochs=at_one_epoch(member.assigned_partitions, 0),
                )
                fx.record(current_assignment_record(group.group_id, left))
                fx.cancel(rebalance_timer_key(group.group_id, member.member_id))
                fx.reply(
                    req.ref,
                    ConsumerGroupHeartbeatResponse(
                        NONE, member_id=member.member_id, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH
                    ),
                )
                return
        self.fence(group, member, "leave-group", fx)
        fx.reply(req.ref, ConsumerGroupHeartbeatResponse(NONE, member_id=req.member_id, member_epoch=req.member_epoch))

    def fence(self, group: ConsumerGroup, member: ConsumerGroupMember, reason: str, fx: Effects) -> None:
        """Remove ``member`` and bump the group epoch (Kafka's ``consumerGroupFenceMember``)."""
        self.fence_members(group, [member], reason, fx)

    def fence_members(
        self, group: ConsumerGroup, members: Sequence[ConsumerGroupMember], reason: str, fx: Effects
    ) -> None:
        """Remove ``members`` and bump the group epoch once (Kafka's ``consumerGroupFenceMembers``),
        or, when only classic members would stay, convert the group back to a classic group."""
        if not members:
            return  # nothing to fence: no epoch bump
        gid = group.group_id
        if self.migration.can_downgrade(group, members):
            self.migration.downgrade(group, members, fx, rebalance=downgrade_reason(gid))
            for member in members:
                if reason != "leave-group":
                    fx.event(MemberFenced(gid, member.member_id, reason, partition_count(member.assigned_partitions)))
            return
        for member in members:
            for record in member_tombstones(gid, member.member_id):
                fx.record(record)
        metadata_hash = self.ctx.topics.metadata_hash(self.ctx.subscribed_topic_names_without(group, members))
        fx.record(group_epoch_record(gid, group.group_epoch + 1, metadata_hash))
        for member in members:
            for key in member_timer_keys(gid, member.member_id):
                fx.cancel(key)
            fx.event(MemberLeft(gid, member.member_id, reason, group_type="consumer"))
            if reason != "leave-group":
                fx.event(MemberFenced(gid, member.member_id, reason, partition_count(member.assigned_partitions)))
        who = ", ".join(m.member_id for m in members)
        fx.event(RebalanceStarted(gid, "consumer", group.group_epoch, f"member {who} {reason}"))

    # ---- timers ----------------------------------------------------------------------------------

    def on_session_timer(self, key: TimerKey, fx: Effects) -> None:
        group = self.ctx.group(key[1])
        member = None if group is None else group.members.get(key[2])
        if group is None or member is None:
            return
        fx.event(SessionExpired(group.group_id, member.member_id, group_type="consumer"))
        self.fence(group, member, "session-timeout", fx)

    def on_join_timer(self, key: TimerKey, fx: Effects) -> None:
        """A classic member told to rejoin did not (Kafka: "the classic member failed to join within
        the rebalance timeout")."""
        group = self.ctx.group(key[1])
        member = None if group is None else group.members.get(key[2])
        if group is not None and member is not None:
            self.fence(group, member, "join-timeout", fx)

    def on_sync_timer(self, key: TimerKey, fx: Effects) -> None:
        """A classic member answered a JoinGroup did not send its SyncGroup in time."""
        group = self.ctx.group(key[1])
        member = None if group is None else group.members.get(key[2])
        if group is not None and member is not None:
            self.fence(group, member, "sync-timeout", fx)

    def on_rebalance_timer(self, key: TimerKey, fx: Effects) -> None:
        group = self.ctx.group(key[1])
        member = None if group is None else group.members.get(key[2])
        if group is None or member is None or member.state is not MemberState.UNREVOKED_PARTITIONS:
            return
        if member.member_epoch < 0:
            return
        self.fence(group, member, "rebalance-timeout", fx)

    def on_loaded(self, fx: Effects) -> None:
        for group in self.ctx.consumer_groups():
            group.metadata_refresh_needed = True
            for member in group.members.values():
                # Fresh session for everyone, as Kafka's onLoaded (a classic member: its own timeout).
                fx.schedule(
                    session_timer_key(group.group_id, member.member_id),
                    self.ctx.member_session_timeout_ms(group.group_id, member),
                )
                if (
                    member.state is MemberState.UNREVOKED_PARTITIONS
                    and member.member_epoch >= 0
                    and member.classic is None  # classic members are timed by their join and sync
                ):
                    fx.schedule(rebalance_timer_key(group.group_id, member.member_id), member.rebalance_timeout_ms)

    def on_topics_changed(self, event: TopicsChanged, names: frozenset[str], fx: Effects) -> None:
        """Flag the groups the change concerns: their next heartbeat checks the metadata hash."""
        for group in self.ctx.consumer_groups():
            if event.snapshot or group.subscribed_regexes or any(n in group.subscribed_names for n in names):
                group.metadata_refresh_needed = True
