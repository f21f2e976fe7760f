"""Classic-protocol members inside a consumer group (online migration, ``coordinator/core/migration.py``):
JoinGroup, SyncGroup, Heartbeat and LeaveGroup addressed to a consumer group (Kafka's
``classicGroupJoinToConsumerGroup``, ``classicGroupSyncToConsumerGroup``,
``classicGroupHeartbeatToConsumerGroup``, ``classicGroupLeaveToConsumerGroup``).

Theory of operation
===================

A classic member is a consumer-group member like any other (records 5 and 8, the target, the
ownership index, reconciliation), with ``ClassicMemberMetadata`` (its session timeout and the
protocols of its JoinGroup). What differs is the conversation:

JoinGroup
    does what a heartbeat does: the embedded ``ConsumerProtocolSubscription`` gives its topics,
    rack and, as ``OwnedPartitions``, what it still owns; the group epoch is bumped if its topics
    changed; the target is computed at once if it is behind; the member is reconciled (with the
    same rules as any member: it gets nothing new while it still owns something to give up). The
    answer's generation is the member epoch and names no leader: the coordinator assigns.
SyncGroup
    answers with the member's assigned partitions, serialized in the version of its own
    subscription. REBALANCE_IN_PROGRESS if the group moved on since its join (unless it is
    revoking: it first finishes that).
Heartbeat
    REBALANCE_IN_PROGRESS when it must rejoin: the group epoch is ahead of its epoch, it has
    partitions to give up, or partitions it waits for were released meanwhile. This is how a
    classic member is made to give partitions up: its client revokes what its next SyncGroup no
    longer carries (cooperative-sticky) or everything (eager), and says so in its next JoinGroup.
LeaveGroup
    fences the listed members (by member id, or by instance id; an empty member id is the admin
    removal of a static member), with the group epoch bumped once.

Timers: the session timer runs on the member's classic session timeout; a member told to rejoin
must join within its rebalance timeout (``consumer-join``), a member answered a JoinGroup must sync
within it (``consumer-sync``); expiry fences. Any fence that leaves only classic members converts
the group back (``membership.fence_members``).

Kafka 4.3 compares the member epoch with the target's assignment epoch where this compares it with
the group epoch (4.2): 4.3 may compute a target later than the epoch bump (assignment batching,
KIP-1263); here a bump is followed by its target within the same runtime batch, or by the JoinGroup
this answer asks for, so the group epoch tells the member sooner.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from uuid import UUID

from msgspec.structs import replace

from coordinator.core.config import ConsumerGroupMigrationPolicy
from coordinator.core.consumer.schema import ClassicMemberMetadata
from coordinator.core.consumer_protocol import read_subscription, read_version, write_assignment
from coordinator.core.effects import Effects
from coordinator.core.errors import CoordinatorError, ErrorCode
from coordinator.core.events import MemberJoined, RebalanceStarted, StaticMemberReplaced
from coordinator.core.groups import Group
from coordinator.core.migration import CONSUMER_PROTOCOL_TYPE, stale_downgrade_reason
from coordinator.core.record_codec import Record
from coordinator.core.requests import Heartbeat, JoinGroup, LeaveGroup, SyncGroup
from coordinator.core.responses import (
    HeartbeatResponse,
    JoinGroupResponse,
    LeaveGroupMemberResponse,
    LeaveGroupResponse,
    SyncGroupResponse,
)

from .assignment import Assignment
from .context import ConsumerContext, join_timer_key, session_timer_key, sync_timer_key
from .group import ConsumerGroup
from .heartbeat import assignment_changed
from .member import ConsumerGroupMember, MemberState
from .membership import Membership
from .migration import Migration
from .reconciliation import reconcile
from .records import (
    current_assignment_record,
    group_epoch_record,
    member_metadata_record,
    member_tombstones,
    target_member_record,
)
from .targets import TargetAssigner
from .validation import check_group_size

NONE = ErrorCode.NONE


def _inconsistent(message: str) -> CoordinatorError:
    return CoordinatorError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, message)


class ClassicMembers:
    def __init__(
        self, ctx: ConsumerContext, targets: TargetAssigner, membership: Membership, migration: Migration
    ) -> None:
        self.ctx = ctx
        self.targets = targets
        self.membership = membership
        self.migration = migration

    # ---- JoinGroup ---------------------------------------------------------------------------------

    def join(self, group: Group, req: JoinGroup, fx: Effects) -> None:
        assert isinstance(group, ConsumerGroup)
        gid = group.group_id
        config = self.ctx.config  # the classic JoinGroup checked the group id and session timeout
        if config.consumer_group_migration_policy is ConsumerGroupMigrationPolicy.DISABLED:
            # KAFKA-20640 (4.3): with migrations disabled no classic member may join a consumer group.
            raise _inconsistent(
                f"Cannot join the consumer group {gid} with the classic protocol because the group migration "
                "is disabled."
            )
        unknown = req.member_id == ""
        member_id = req.new_member_id if unknown else req.member_id
        instance_id = req.group_instance_id
        holder = None if instance_id is None else group.static_member(instance_id)
        if holder is None:  # an existing static member may always rejoin (KAFKA-20601)
            check_group_size(group, member_id, config.consumer_group_max_size)
        names = {name for name, _ in req.protocols}
        if not self._supports(group, req.protocol_type, names):
            raise _inconsistent(f"Member {member_id}'s protocols are not supported.")
        if unknown and instance_id is None and req.require_known_member_id:
            # KIP-394: the new dynamic member comes back with this id (nothing is kept meanwhile).
            fx.reply(req.ref, JoinGroupResponse(ErrorCode.MEMBER_ID_REQUIRED, member_id=member_id))
            return

        replaced: ConsumerGroupMember | None = None
        if instance_id is None:
            member = group.members.get(member_id) or ConsumerGroupMember(member_id)
        elif unknown:
            if holder is None:
                member = group.members.get(member_id) or ConsumerGroupMember(member_id)
            else:
                # The restarted instance takes over the old member's assignment (Kafka copies it).
                replaced = holder
                member = replace(holder, member_id=member_id, member_epoch=0, previous_member_epoch=0)
        else:
            if holder is None:
                raise CoordinatorError(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
            if holder.member_id != member_id:
                raise CoordinatorError(
                    ErrorCode.FENCED_INSTANCE_ID,
                    f"Static member {member_id} with instance id {instance_id} was fenced by member "
                    f"{holder.member_id}.",
                )
            member = holder
        try:
            subscription = read_subscription(req.protocols[0][1])
        except (ValueError, IndexError):
            raise _inconsistent("Malformed embedded consumer protocol in subscription deserialization.") from None
        downgrade = replaced is not None and self.migration.can_downgrade_replacing(group, replaced)

        updated = replace(
            member,
            instance_id=instance_id if instance_id is not None else member.instance_id,
            rack_id=subscription.rack_id if subscription.rack_id is not None else member.rack_id,
            rebalance_timeout_ms=req.rebalance_timeout_ms if req.rebalance_timeout_ms != -1 else member.rebalance_timeout_ms,
            subscribed_topic_names=tuple(sorted(set(subscription.topics))),
            subscribed_topic_regex="",  # no regex subscriptions with the classic protocol
            regex_topics=None,
            client_id=req.client_id,
            client_host=req.client_host,
            classic=ClassicMemberMetadata(req.session_timeout_ms, req.protocols),
        )
        is_new = member_id not in group.members and replaced is None
        subscription_changed = (
            updated.subscribed_topic_names != member.subscribed_topic_names
            or updated.subscribed_topic_regex != member.subscribed_topic_regex
            or updated.regex_topics != member.regex_topics
        )
        previous = group.members.get(member_id) or replaced

        records: list[Record] = []
        if replaced is not None and not downgrade:
            records += member_tombstones(gid, replaced.member_id)
            records.append(member_metadata_record(gid, member))
            records.append(target_member_record(gid, member_id, group.target(replaced.member_id)))
            records.append(current_assignment_record(gid, member))
        group_epoch = group.group_epoch
        metadata_hash = group.metadata_hash
        bump = subscription_changed
        if bump or group.metadata_refresh_needed:
            metadata_hash = self.ctx.topics.metadata_hash(self.ctx.subscribed_topic_names(group, previous, updated))
            bump = bump or metadata_hash != group.metadata_hash
            if bump:
                group_epoch += 1
        if is_new or updated.metadata_view() != member.metadata_view():
            records.append(member_metadata_record(gid, updated))
        if bump:
            records.append(group_epoch_record(gid, group_epoch, metadata_hash))

        owned = self._owned(subscription.owned_partitions)
        # The ownership index still names the replaced member id for what the new one took over.
        def owner_of(topic_id: UUID, partition: int) -> str | None:
            owner = group.owner(topic_id, partition)
            return member_id if replaced is not None and owner == replaced.member_id else owner

        if downgrade:
            # The member's records (and the replacement's, Kafka writes them first) are left out: the
            # group's tombstones follow at once, and a consumer record replayed after them would
            # bring the consumer group back. Its state lives on in the classic group.
            assert replaced is not None
            rebalance = group.assignment_epoch < group_epoch
            reconciled = updated
            if not rebalance and not updated.is_reconciled_to(group.assignment_epoch):
                reconciled = reconcile(
                    updated, group.assignment_epoch, group.target(replaced.member_id), owner_of, owned
                )
            self.migration.downgrade(
                group, [], fx, joining=reconciled,
                rebalance=stale_downgrade_reason(gid) if rebalance else None,
            )
            fx.event(StaticMemberReplaced(gid, instance_id or "", replaced.member_id, member_id))
            fx.reply(req.ref, self._join_response(reconciled))
            return

        target_epoch = group.assignment_epoch
        target: Assignment = group.target(replaced.member_id if replaced is not None else member_id)
        if group_epoch > group.assignment_epoch:
            members = dict(group.members)
            if replaced is not None:
                del members[replaced.member_id]
            members[member_id] = updated
            before = {member_id: group.target(replaced.member_id)} if replaced is not None else None
            new_targets = self.targets.compute(group, group_epoch, members, fx, before)
            records += self.targets.records(group, group_epoch, new_targets)
            target_epoch = group_epoch
            target = new_targets[member_id]
        reconciled = updated
        if not updated.is_reconciled_to(target_epoch):
            reconciled = reconcile(updated, target_epoch, target, owner_of, owned)
        if is_new or reconciled.assignment_view() != member.assignment_view() or replaced is not None:
            records.append(current_assignment_record(gid, reconciled))
            if reconciled.assigned_partitions != member.assigned_partitions:
                fx.event(assignment_changed(gid, member, reconciled))
        for record in records:
            fx.record(record)
        if bump:
            fx.event(RebalanceStarted(gid, "consumer", group.group_epoch, f"member {member_id} changed its subscription"))
        if is_new:
            fx.event(MemberJoined(gid, member_id, instance_id, req.client_id, req.client_host, group_type="consumer"))
        if replaced is not None:
            fx.event(StaticMemberReplaced(gid, instance_id or "", replaced.member_id, member_id))
        fx.cancel(join_timer_key(gid, member_id))
        fx.schedule(session_timer_key(gid, member_id), req.session_timeout_ms)
        fx.schedule(sync_timer_key(gid, member_id), updated.rebalance_timeout_ms)
        group.metadata_refresh_needed = False  # soft: the hash was checked above if it had to be
        fx.reply(req.ref, self._join_response(reconciled))

    @staticmethod
    def _join_response(member: ConsumerGroupMember) -> JoinGroupResponse:
        assert member.classic is not None
        return JoinGroupResponse(
            NONE,
            member_id=member.member_id,
            generation_id=member.member_epoch,
            protocol_type=CONSUMER_PROTOCOL_TYPE,
            protocol_name=member.classic.supported_protocols[0][0],
            leader="",  # nobody leads: the coordinator assigns
        )

    @staticmethod
    def _supports(group: ConsumerGroup, protocol_type: str, names: set[str]) -> bool:
        """Kafka's ``supportsClassicProtocols``: a protocol every classic member supports."""
        if protocol_type != CONSUMER_PROTOCOL_TYPE:
            return False
        if group.is_empty:
            return bool(names)
        return any(group.classic_protocols.get(name, 0) == group.classic_members for name in names)

    def _owned(self, owned: Mapping[str, frozenset[int]]) -> dict[UUID, frozenset[int]]:
        """The subscription's OwnedPartitions by topic id (an empty list means it owns nothing)."""
        out: dict[UUID, frozenset[int]] = {}
        for name, partitions in owned.items():
            info = self.ctx.topics.by_name(name)
            if info is not None and partitions:
                out[info.topic_id] = out.get(info.topic_id, frozenset()) | partitions
        return out

    # ---- SyncGroup, Heartbeat, LeaveGroup ----------------------------------------------------------

    def sync(self, group: Group, req: SyncGroup, fx: Effects) -> None:
        assert isinstance(group, ConsumerGroup)
        member = self._classic_member(group, req.member_id, req.group_instance_id)
        if req.generation_id != member.member_epoch:
            raise self._illegal_generation(member, req.generation_id)
        assert member.classic is not None
        protocol_name = member.classic.supported_protocols[0][0]
        if req.protocol_type is not None and req.protocol_type != CONSUMER_PROTOCOL_TYPE:
            raise _inconsistent(
                f"The protocol type {req.protocol_type} from member {member.member_id} request is not equal to the "
                f"group protocol type {CONSUMER_PROTOCOL_TYPE}."
            )
        if req.protocol_name is not None and req.protocol_name != protocol_name:
            raise _inconsistent(
                f"The protocol name {req.protocol_name} from member {member.member_id} request is not equal to the "
                f"protocol name {protocol_name} returned in the join response."
            )
        gid = group.group_id
        if group.group_epoch > member.member_epoch and member.state is not MemberState.UNREVOKED_PARTITIONS:
            # A new rebalance started since its join: rejoin first (a revoking member finishes first).
            self._schedule_join_timeout(gid, member, fx)
            raise CoordinatorError(
                ErrorCode.REBALANCE_IN_PROGRESS,
                f"A new rebalance is triggered in group {gid} and member {member.member_id} should rejoin to catch up.",
            )
        fx.cancel(sync_timer_key(gid, member.member_id))
        fx.schedule(session_timer_key(gid, member.member_id), member.classic.session_timeout_ms)
        fx.reply(req.ref, SyncGroupResponse(NONE, req.protocol_type, req.protocol_name, self.assignment_bytes(member)))

    def assignment_bytes(self, member: ConsumerGroupMember) -> bytes:
        """Its assigned partitions as a ConsumerProtocolAssignment of its own subscription's version."""
        assert member.classic is not None
        try:
            version = read_version(member.classic.supported_protocols[0][1])
        except ValueError:
            version = 0
        return write_assignment(self.migration.named(member.assigned_partitions), version)

    def heartbeat(self, group: Group, req: Heartbeat, fx: Effects) -> None:
        assert isinstance(group, ConsumerGroup)
        member = self._classic_member(group, req.member_id, req.group_instance_id)
        if req.generation_id != member.member_epoch:
            raise self._illegal_generation(member, req.generation_id)
        assert member.classic is not None
        gid = group.group_id
        fx.schedule(session_timer_key(gid, member.member_id), member.classic.session_timeout_ms)
        error = NONE
        if (
            member.member_epoch < group.group_epoch
            or member.state is MemberState.UNREVOKED_PARTITIONS
            or (member.state is MemberState.UNRELEASED_PARTITIONS and not self._waits_on_unreleased(group, member))
        ):
            # Rejoin: to catch up with a new rebalance, to give partitions up, or to take the ones
            # it waited for, now released.
            error = ErrorCode.REBALANCE_IN_PROGRESS
            self._schedule_join_timeout(gid, member, fx)
        fx.reply(req.ref, HeartbeatResponse(error))

    def leave(self, group: Group, req: LeaveGroup, fx: Effects) -> None:
        assert isinstance(group, ConsumerGroup)
        responses = []
        leaving: dict[str, ConsumerGroupMember] = {}
        for identity in req.members:
            try:
                if identity.group_instance_id is None:
                    member = group.members.get(identity.member_id)
                    if member is None:
                        raise CoordinatorError(ErrorCode.UNKNOWN_MEMBER_ID)
                else:
                    member = group.static_member(identity.group_instance_id)
                    if member is None:
                        raise CoordinatorError(ErrorCode.UNKNOWN_MEMBER_ID)
                    # An empty member id is the admin removal of a static member (KAFKA-18188).
                    if identity.member_id and identity.member_id != member.member_id:
                        raise CoordinatorError(ErrorCode.FENCED_INSTANCE_ID)
            except CoordinatorError as exc:
                responses.append(LeaveGroupMemberResponse(identity.member_id, identity.group_instance_id, exc.code))
                continue
            leaving[member.member_id] = member
            responses.append(LeaveGroupMemberResponse(identity.member_id, identity.group_instance_id, NONE))
        self.membership.fence_members(group, list(leaving.values()), "leave-group", fx)
        fx.reply(req.ref, LeaveGroupResponse(NONE, tuple(responses)))

    # ---- helpers -----------------------------------------------------------------------------------

    @staticmethod
    def _classic_member(group: ConsumerGroup, member_id: str, instance_id: str | None) -> ConsumerGroupMember:
        """Kafka's ``validateConsumerGroupMember`` then ``throwIfMemberDoesNotUseClassicProtocol``."""
        if instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                raise CoordinatorError(
                    ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group.group_id}."
                )
        else:
            member = group.static_member(instance_id)
            if member is None:
                raise CoordinatorError(
                    ErrorCode.UNKNOWN_MEMBER_ID,
                    f"Member with instance id {instance_id} is not a member of group {group.group_id}.",
                )
            if member.member_id != member_id:
                raise CoordinatorError(
                    ErrorCode.FENCED_INSTANCE_ID,
                    f"Static member {member_id} with instance id {instance_id} was fenced by member {member.member_id}.",
                )
        if member.classic is None:
            raise CoordinatorError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member.member_id} does not use the classic protocol.")
        return member

    @staticmethod
    def _illegal_generation(member: ConsumerGroupMember, generation: int) -> CoordinatorError:
        return CoordinatorError(
            ErrorCode.ILLEGAL_GENERATION,
            f"The request generation id {generation} is not equal to the member epoch {member.member_epoch} of "
            f"member {member.member_id}.",
        )

    @staticmethod
    def _schedule_join_timeout(group_id: str, member: ConsumerGroupMember, fx: Effects) -> None:
        key = join_timer_key(group_id, member.member_id)
        if key not in fx.timers.deadlines:
            fx.schedule(key, member.rebalance_timeout_ms)

    @staticmethod
    def _waits_on_unreleased(group: ConsumerGroup, member: ConsumerGroupMember) -> bool:
        """Kafka's ``waitingOnUnreleasedPartition``: a target partition it does not have yet is still
        held by another member."""
        for topic_id, partitions in group.target(member.member_id).items():
            mine = member.assigned_partitions.get(topic_id, frozenset())
            for partition in partitions - mine:
                if group.owner(topic_id, partition) not in (None, member.member_id):
                    return True
        return False

    def hosted(self) -> dict[type, Any]:
        """The classic requests this type serves for its own groups (``Registration.hosted_requests``)."""
        return {JoinGroup: self.join, SyncGroup: self.sync, Heartbeat: self.heartbeat, LeaveGroup: self.leave}
