"""ConsumerGroupHeartbeat, ConsumerGroupDescribe, timers and topic changes of KIP-848 groups
(Kafka's ``GroupMetadataManager`` consumer half, 4.x semantics).

Read ``group.py`` (epochs, states, records, replay) and ``reconciliation.py`` (member states) first.

How a handler works
===================

Handlers never mutate durable state. They validate, compute the new member, target and reconciled
member as values, then write records into the operation's :class:`~coordinator.core.effects.Effects`;
the shard replays those records right after the handler returns. Everything that can fail (request
validation, unknown members, epochs, invalid regex, the assignor) runs before the first record is
written, so an error answer never leaves half a change behind.

A heartbeat (epoch >= 0), in order:

1. Validate the request (``_validate``: Kafka's ``throwIfConsumerGroupHeartbeatRequestIsInvalid``,
   INVALID_REQUEST with Kafka's messages, UNSUPPORTED_ASSIGNOR).
2. Find the group: created by an epoch-0 join (an EMPTY classic group is replaced, as Kafka's
   offline upgrade does); otherwise GROUP_ID_NOT_FOUND. GROUP_MAX_SIZE_REACHED for newcomers.
3. Find the member and check its epoch (``_member``): dynamic members by id, static members by
   instance id (UNRELEASED_INSTANCE_ID, FENCED_INSTANCE_ID, UNKNOWN_MEMBER_ID; an epoch-0 join of a
   released instance id replaces the old member and takes over its assignment). Epoch rules: greater
   than the server's -> FENCED_MEMBER_EPOCH; smaller -> accepted only if it is the previous epoch and
   the reported partitions are a subset of the assigned ones (lost response); 0 is accepted for an
   existing member (Kafka 4.2, KAFKA-19233: a fenced member rejoins with its member id).
4. Update the member with the non-null fields; a new regex is compiled (INVALID_REGULAR_EXPRESSION).
5. Bump the group epoch if the group is new, the subscription changed, or (checked then, and after a
   topic change concerning the group) the subscribed topics' metadata hash changed.
6. If the group epoch is ahead of the assignment epoch, run the assignor now (``_target``): the most
   requested ``ServerAssignor`` among members, else the first of ``group.consumer.assignors``.
7. Reconcile the member (``reconciliation.reconcile``) and (re)arm or cancel its rebalance timer.
8. Re-arm the session timer; answer with the member's epoch, the heartbeat interval and the
   assignment when the request was full (epoch 0, or rebalance timeout + subscription + owned
   partitions all present, KAFKA-16367) or the assigned partitions changed.

Leaving (epoch -1) fences the member: current-assignment, target and metadata tombstones, then a
group epoch bump; the assignor runs on the next heartbeat. A static member's temporary leave (-2)
writes one current-assignment record at epoch -2 and keeps everything else (no rebalance); its
session timer keeps running and fences it unless a replacement arrives in time.

Deferred target assignment (batched handling)
=============================================

Kafka runs the assignor inside every heartbeat that finds the group epoch ahead of the assignment
epoch, so a group whose 50 members join together computes 50 targets. The runtime hands the shard
its queued events in batches; in a batch (``deferring``) such a heartbeat stops after step 5: its
member-metadata and group-epoch records are written (one entry, as always) and its session timer is
armed, then it waits. At the end of the batch (``CoordinatorShard.flush``), or before any event
that could observe the group (anything but a heartbeat; a leave, a static member's heartbeat or a
second heartbeat of the same member), ``complete_deferred`` runs the assignor ONCE for the group,
writes the changed target members and the target epoch, and reconciles and answers each waiting
member in arrival order (steps 7-8) — the outcome of handling them one by one with only the last
of them running the assignor. Revoke-before-assign is unchanged: reconciliation sees the ownership
changes of the members completed before it. Replies were released behind the batch's durable point
anyway, so deferring adds no latency. A crash between the two entries leaves members that exist
with no current assignment (epoch 0) in an ``Assigning`` group, the state a leave leaves behind;
their clients got no answer and rejoin. If the assignor fails, every waiting heartbeat gets
UNKNOWN_SERVER_ERROR and the group stays ``Assigning`` until the next heartbeat.

Timers: ``consumer-session/<group>/<member>`` (re-armed by every successful heartbeat; expiry
fences) and ``consumer-rebalance/<group>/<member>`` (armed when the member starts revoking; expiry
fences it if it is still revoking).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from uuid import UUID

import msgspec
from msgspec.structs import replace

from coordinator.core.assignors import (
    GroupSpec,
    MemberSubscriptionSpec,
    PartitionAssignor,
    PartitionAssignorError,
    SubscribedTopicMetadata,
    TopicMetadata,
    consumer_group_assignors,
)
from coordinator.core.config import GroupConfig
from coordinator.core.consumer.group import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    NO_PARTITIONS,
    Assignment,
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
    assignment_to_record,
    normalized,
    partition_count,
)
from coordinator.core.consumer.reconciliation import Owned, reconcile
from coordinator.core.consumer.topics import InvalidRegexError, TopicsImage, compile_regex
from coordinator.core.effects import Effects, TimerKey
from coordinator.core.errors import CoordinatorError, ErrorCode
from coordinator.core.events import (
    GroupStateChanged,
    MemberAssignmentChanged,
    MemberFenced,
    MemberJoined,
    MemberLeft,
    RebalanceStarted,
    SessionExpired,
    StaticMemberReplaced,
    TargetAssignmentComputed,
)
from coordinator.core.groups import Group
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
    GroupMetadataKey,
    Record,
)
from coordinator.core.requests import ConsumerGroupDescribe, ConsumerGroupHeartbeat, TopicsChanged
from coordinator.core.responses import (
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatResponse,
    DescribedConsumerGroup,
    DescribedConsumerGroupMember,
    DescribedTopicPartitions,
)

NONE = ErrorCode.NONE
SESSION_TIMER = "consumer-session"
REBALANCE_TIMER = "consumer-rebalance"


def session_timer_key(group_id: str, member_id: str) -> TimerKey:
    return (SESSION_TIMER, group_id, member_id)


def rebalance_timer_key(group_id: str, member_id: str) -> TimerKey:
    return (REBALANCE_TIMER, group_id, member_id)


def _blank(value: str | None) -> bool:
    return value is not None and not value.strip()


def _invalid(message: str) -> CoordinatorError:
    return CoordinatorError(ErrorCode.INVALID_REQUEST, message)


class ConsumerGroupManager:
    def __init__(
        self,
        config: GroupConfig,
        groups: dict[str, Group],
        topics: TopicsImage,
        stopwatch: Callable[[], int] | None = None,
    ) -> None:
        self.config = config
        self.groups = groups  # shared with the shard: one namespace for every group type
        self.topics = topics
        # Only used to measure the assignor for metrics (nanoseconds); never influences state.
        self.stopwatch = stopwatch or (lambda: 0)
        self.assignors: dict[str, PartitionAssignor] = {
            a.name: a for a in consumer_group_assignors(config.consumer_group_assignors)
        }
        self.default_assignor = next(iter(self.assignors))
        self._dirty: set[str] = set()  # groups touched by replay since the last state report
        # Batched handling (see "Deferred target assignment" above): soft, empty between batches.
        self.deferring = False  # set by the shard while it handles an event of a runtime batch
        self._deferred: dict[str, list[_Deferred]] = {}  # group id -> heartbeats awaiting the target
        self._deferred_members: set[tuple[str, str]] = set()
        self._replayers: dict[
            type, Callable[[ConsumerGroup, ConsumerGroupRecordKey, ConsumerGroupRecordValue | None], None]
        ] = {
            ConsumerGroupMetadataKey: self._replay_metadata,
            ConsumerGroupMemberMetadataKey: self._replay_member_metadata,
            ConsumerGroupTargetAssignmentMetadataKey: self._replay_target_metadata,
            ConsumerGroupTargetAssignmentMemberKey: self._replay_target_member,
            ConsumerGroupCurrentMemberAssignmentKey: self._replay_current_assignment,
        }

    # =============================================================================================
    # Lookup
    # =============================================================================================

    def group(self, group_id: str) -> ConsumerGroup | None:
        group = self.groups.get(group_id)
        return group if isinstance(group, ConsumerGroup) else None

    def _existing_group(self, group_id: str) -> ConsumerGroup:
        group = self.groups.get(group_id)
        if group is None:
            raise CoordinatorError(ErrorCode.GROUP_ID_NOT_FOUND, f"Consumer group {group_id} not found.")
        if not isinstance(group, ConsumerGroup):
            raise CoordinatorError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
        return group

    def subscribed_topic_names(
        self,
        group: ConsumerGroup,
        removed: ConsumerGroupMember | None = None,
        added: ConsumerGroupMember | None = None,
    ) -> set[str]:
        """Names ∪ regex-resolved topics the group subscribes to, with one member swapped."""
        names = Counter(group.subscribed_names)
        regexes = Counter(group.subscribed_regexes)
        if removed is not None:
            names.subtract(removed.subscribed_topic_names)
            if removed.subscribed_topic_regex:
                regexes[removed.subscribed_topic_regex] -= 1
        if added is not None:
            names.update(added.subscribed_topic_names)
            if added.subscribed_topic_regex:
                regexes[added.subscribed_topic_regex] += 1
        result = {name for name, count in names.items() if count > 0}
        for regex, count in regexes.items():
            if count > 0:
                result |= self.topics.resolve(regex)
        return result

    def member_topic_ids(self, member: ConsumerGroupMember) -> frozenset[UUID]:
        ids = set()
        for name in member.subscribed_topic_names:
            topic = self.topics.by_name(name)
            if topic is not None:
                ids.add(topic.topic_id)
        if member.subscribed_topic_regex:
            for name in self.topics.resolve(member.subscribed_topic_regex):
                topic = self.topics.by_name(name)
                if topic is not None:
                    ids.add(topic.topic_id)
        return frozenset(ids)

    def heartbeat_interval_ms(self, group_id: str) -> int:
        return self.config.consumer_group_heartbeat_interval_ms

    def session_timeout_ms(self, group_id: str) -> int:
        return self.config.consumer_group_session_timeout_ms

    def members_by_state(self) -> dict[str, int]:
        """Member reconciliation state name -> members, over every consumer group (for gauges).

        Members that left temporarily (static, epoch -2) count as "LEFT_TEMPORARILY"."""
        counts: Counter[str] = Counter()
        for group in self.groups.values():
            if isinstance(group, ConsumerGroup):
                for member in group.members.values():
                    counts["LEFT_TEMPORARILY" if member.member_epoch == -2 else member.state.name] += 1
        return dict(counts)

    # =============================================================================================
    # ConsumerGroupHeartbeat
    # =============================================================================================

    def heartbeat(self, req: ConsumerGroupHeartbeat, fx: Effects) -> None:
        try:
            if req.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                self._validate(req)
                self._leave(req, fx)
            else:
                self._heartbeat(req, fx)
        except CoordinatorError as exc:
            assert not fx.records, "a consumer group handler raised after producing records"
            fx.reply(req.ref, ConsumerGroupHeartbeatResponse(exc.code, exc.message))

    def _validate(self, req: ConsumerGroupHeartbeat) -> None:
        if not req.group_id.strip():
            raise _invalid("GroupId can't be empty.")
        if _blank(req.instance_id):
            raise _invalid("InstanceId can't be empty.")
        if _blank(req.rack_id):
            raise _invalid("RackId can't be empty.")
        epoch = req.member_epoch
        if (req.member_id_required or epoch > 0 or epoch == LEAVE_GROUP_MEMBER_EPOCH) and not req.member_id.strip():
            raise _invalid("MemberId can't be empty.")
        if epoch == 0:
            if req.rebalance_timeout_ms == -1:
                raise _invalid("RebalanceTimeoutMs must be provided in first request.")
            if req.topic_partitions is None or req.topic_partitions:
                raise _invalid("TopicPartitions must be empty when (re-)joining.")
            if req.subscribed_topic_names is None and req.subscribed_topic_regex is None:
                raise _invalid("SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
        elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if req.instance_id is None:
                raise _invalid("InstanceId can't be null.")
        elif epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            raise _invalid("MemberEpoch is invalid.")
        if req.server_assignor is not None and req.server_assignor not in self.assignors:
            raise CoordinatorError(
                ErrorCode.UNSUPPORTED_ASSIGNOR,
                f"ServerAssignor {req.server_assignor} is not supported. "
                f"Supported assignors: {', '.join(self.assignors)}.",
            )

    def _heartbeat(self, req: ConsumerGroupHeartbeat, fx: Effects) -> None:
        self._validate(req)
        joining = req.member_epoch == 0
        records: list[Record] = []
        group = self._group_for_heartbeat(req.group_id, joining, records)
        self._check_group_size(group, req.member_id)
        member_id = req.member_id or req.new_member_id
        assert member_id, "a v0 join needs an adapter-generated new_member_id"
        owned = _owned(req)

        member, replaced = self._member(group, member_id, req, owned)
        if replaced is not None:
            self._replace_member_records(group, replaced, member, records)

        updated = _updated_member(member, req)
        regex = updated.subscribed_topic_regex
        if regex and regex != member.subscribed_topic_regex and group.subscribed_regexes.get(regex, 0) <= 0:
            try:
                compile_regex(regex)
            except InvalidRegexError as exc:
                raise CoordinatorError(
                    ErrorCode.INVALID_REGULAR_EXPRESSION, f"SubscribedTopicRegex `{regex}` is not a valid regular expression: {exc}."
                ) from None

        is_new_member = member_id not in group.members and replaced is None
        subscription_changed = (
            updated.subscribed_topic_names != member.subscribed_topic_names
            or updated.subscribed_topic_regex != member.subscribed_topic_regex
        )
        # The member the group currently holds under this identity (for counters and hashes).
        previous = group.members.get(member_id) or (group.members.get(replaced) if replaced else None)

        # ---- group epoch -------------------------------------------------------------------------
        group_epoch = group.group_epoch
        metadata_hash = group.metadata_hash
        bump = subscription_changed or group_epoch == 0
        if bump or group.metadata_refresh_needed:
            metadata_hash = self.topics.metadata_hash(self.subscribed_topic_names(group, previous, updated))
            bump = bump or metadata_hash != group.metadata_hash
            if bump:
                group_epoch += 1

        gid = group.group_id
        if (
            self.deferring
            and replaced is None
            and group_epoch > group.assignment_epoch
            and member.state is not MemberState.UNKNOWN
            and (gid, member_id) not in self._deferred_members
        ):
            # Batched: persist the membership change now, run the assignor once for the batch
            # (``complete_deferred``), which also reconciles and answers this member.
            self._membership_records(group, member_id, member, updated, is_new_member, bump, group_epoch,
                                     metadata_hash, subscription_changed, records, fx)
            for record in records:
                fx.record(record)
            self._after_membership(group, member_id, updated, replaced, is_new_member, req, fx)
            self._deferred.setdefault(gid, []).append(_Deferred(req, member_id, is_new_member, owned))
            self._deferred_members.add((gid, member_id))
            return

        # ---- target assignment --------------------------------------------------------------------
        new_targets: dict[str, Assignment] | None = None
        if group_epoch > group.assignment_epoch:
            members_after = dict(group.members)
            if replaced is not None:
                members_after.pop(replaced, None)
            members_after[member_id] = updated
            new_targets = self._target(group, group_epoch, members_after, replaced, member_id, fx)
            target_epoch = group_epoch
            target = new_targets.get(member_id, NO_PARTITIONS)
        else:
            target_epoch = group.assignment_epoch
            target = group.target(replaced if replaced is not None else member_id)

        # ---- reconciliation -------------------------------------------------------------------------
        reconciled = updated
        if not updated.is_reconciled_to(target_epoch):
            def owner_of(topic_id: UUID, partition: int) -> str | None:
                owner = group.owner(topic_id, partition)
                return member_id if replaced is not None and owner == replaced else owner

            reconciled = reconcile(updated, target_epoch, target, owner_of, owned)

        # ---- from here on nothing fails: write the records ------------------------------------------
        self._membership_records(group, member_id, member, updated, is_new_member, bump, group_epoch,
                                 metadata_hash, subscription_changed, records, fx)
        if new_targets is not None:
            self._target_records(group, group_epoch, new_targets, records)
        self._current_assignment_record(gid, member, reconciled, is_new_member, records, fx)
        for record in records:
            fx.record(record)
        self._after_membership(group, member_id, updated, replaced, is_new_member, req, fx)
        self._answer(req, member_id, member, reconciled, fx)

    def _membership_records(
        self,
        group: ConsumerGroup,
        member_id: str,
        member: ConsumerGroupMember,
        updated: ConsumerGroupMember,
        is_new_member: bool,
        bump: bool,
        group_epoch: int,
        metadata_hash: int,
        subscription_changed: bool,
        records: list[Record],
        fx: Effects,
    ) -> None:
        """Member metadata (5) if new or changed, then the group epoch (3) if bumped."""
        gid = group.group_id
        if is_new_member or (updated is not member and updated.metadata_view() != member.metadata_view()):
            records.append(Record(ConsumerGroupMemberMetadataKey(gid, member_id), updated.to_metadata_value()))
        if bump:
            records.append(
                Record(ConsumerGroupMetadataKey(gid), ConsumerGroupMetadataValue(group_epoch, metadata_hash))
            )
            reason = "new group" if group.group_epoch == 0 else (
                f"member {member_id} changed its subscription" if subscription_changed
                else "subscribed topic metadata changed"
            )
            fx.event(RebalanceStarted(gid, "consumer", group.group_epoch, reason))

    @staticmethod
    def _target_records(
        group: ConsumerGroup, group_epoch: int, new_targets: Mapping[str, Assignment], records: list[Record]
    ) -> None:
        """Target members that changed (7), sorted by member id, then the target epoch (6)."""
        gid = group.group_id
        current = group.target_assignment
        for mid in sorted(new_targets):
            new = new_targets[mid]
            old = current.get(mid)
            if old is not new and old != new:
                records.append(
                    Record(
                        ConsumerGroupTargetAssignmentMemberKey(gid, mid),
                        ConsumerGroupTargetAssignmentMemberValue(assignment_to_record(new)),
                    )
                )
        records.append(
            Record(ConsumerGroupTargetAssignmentMetadataKey(gid), ConsumerGroupTargetAssignmentMetadataValue(group_epoch))
        )

    def _current_assignment_record(
        self,
        gid: str,
        member: ConsumerGroupMember,
        reconciled: ConsumerGroupMember,
        is_new_member: bool,
        records: list[Record],
        fx: Effects,
    ) -> bool:
        """The member's current assignment (8) if new or changed; True if written."""
        if not (
            is_new_member or (reconciled is not member and reconciled.assignment_view() != member.assignment_view())
        ):
            return False
        records.append(
            Record(ConsumerGroupCurrentMemberAssignmentKey(gid, reconciled.member_id), reconciled.to_assignment_value())
        )
        self._rebalance_timer(gid, member, reconciled, fx)
        if reconciled.assigned_partitions != member.assigned_partitions:
            fx.event(_assignment_changed(gid, member, reconciled))
        return True

    def _after_membership(
        self,
        group: ConsumerGroup,
        member_id: str,
        updated: ConsumerGroupMember,
        replaced: str | None,
        is_new_member: bool,
        req: ConsumerGroupHeartbeat,
        fx: Effects,
    ) -> None:
        gid = group.group_id
        if is_new_member:
            fx.event(
                MemberJoined(gid, member_id, updated.instance_id, req.client_id, req.client_host, group_type="consumer")
            )
        if replaced is not None and req.instance_id is not None:
            fx.event(StaticMemberReplaced(gid, req.instance_id, replaced, member_id))
        group.metadata_refresh_needed = False  # soft: the hash was checked above if it had to be
        fx.schedule(session_timer_key(gid, member_id), self.session_timeout_ms(gid))

    def _answer(
        self,
        req: ConsumerGroupHeartbeat,
        member_id: str,
        member: ConsumerGroupMember,
        reconciled: ConsumerGroupMember,
        fx: Effects,
    ) -> None:
        full_request = req.member_epoch == 0 or (
            req.rebalance_timeout_ms != -1
            and (req.subscribed_topic_names is not None or req.subscribed_topic_regex is not None)
            and req.topic_partitions is not None
        )
        assignment = None
        if full_request or (reconciled is not member and reconciled.assigned_partitions != member.assigned_partitions):
            assignment = tuple(
                (topic_id, tuple(sorted(parts))) for topic_id, parts in sorted(reconciled.assigned_partitions.items())
            )
        fx.reply(
            req.ref,
            ConsumerGroupHeartbeatResponse(
                NONE,
                member_id=member_id,
                member_epoch=reconciled.member_epoch,
                heartbeat_interval_ms=self.heartbeat_interval_ms(req.group_id),
                assignment=assignment,
            ),
        )

    # ---- deferred target assignment (batched handling) -------------------------------------------

    def has_deferred(self) -> bool:
        return bool(self._deferred)

    def deferred_groups(self) -> list[str]:
        return list(self._deferred)

    def deferred_refs(self) -> list[int]:
        """The request refs still waiting for ``complete_deferred`` (to fail them on a core bug)."""
        return [item.req.ref for items in self._deferred.values() for item in items]

    def groups_to_complete_before(self, event: object) -> list[str]:
        """The groups whose deferred heartbeats must be completed before ``event`` is handled.

        Any event other than a consumer heartbeat may read or change any group (timers, topic
        changes, describes, offsets): all of them. A heartbeat of a group with deferred work: that
        group if it is a leave, static (replacement rules), or from a member already deferred."""
        if not self._deferred:
            return []
        if not isinstance(event, ConsumerGroupHeartbeat):
            return list(self._deferred)
        gid = event.group_id
        if gid not in self._deferred:
            return []
        member_id = event.member_id or event.new_member_id
        if event.member_epoch < 0 or event.instance_id is not None or (gid, member_id) in self._deferred_members:
            return [gid]
        return []

    def complete_deferred(self, group_id: str, fx: Effects) -> None:
        """Run the assignor once for the group's deferred heartbeats, then reconcile and answer each,
        in arrival order (as if the last of them had computed the target and the others had arrived
        just after it). Records: changed target members (7), target epoch (6), then each member's
        current assignment (8), as a heartbeat writes them."""
        items = self._deferred.pop(group_id, [])
        for item in items:
            self._deferred_members.discard((group_id, item.member_id))
        group = self.group(group_id)
        assert group is not None, f"{group_id}: deferred heartbeats for a group that is gone"
        records: list[Record] = []
        new_targets: dict[str, Assignment] | None = None
        target_epoch = group.assignment_epoch
        if group.group_epoch > group.assignment_epoch:
            try:
                new_targets = self._target(group, group.group_epoch, group.members, None, "", fx)
            except CoordinatorError as exc:
                # The membership changes stay (as after a leave the group stays Assigning until the
                # next heartbeat); these heartbeats fail as Kafka's do when the assignor fails.
                for item in items:
                    fx.reply(item.req.ref, ConsumerGroupHeartbeatResponse(exc.code, exc.message))
                return
            target_epoch = group.group_epoch
            self._target_records(group, target_epoch, new_targets, records)
        # Ownership changes made by earlier members of this batch (replay has not run yet).
        moved: dict[tuple[UUID, int], str | None] = {}

        def owner_of(topic_id: UUID, partition: int) -> str | None:
            key = (topic_id, partition)
            return moved[key] if key in moved else group.owner(topic_id, partition)

        for item in items:
            mid = item.member_id
            current = group.members[mid]  # the member after its metadata record was replayed
            target = new_targets.get(mid, NO_PARTITIONS) if new_targets is not None else group.target(mid)
            reconciled = current
            if not current.is_reconciled_to(target_epoch):
                reconciled = reconcile(current, target_epoch, target, owner_of, item.owned)
            if self._current_assignment_record(group_id, current, reconciled, item.is_new_member, records, fx):
                for assignment in (current.assigned_partitions, current.partitions_pending_revocation):
                    for topic_id, partitions in assignment.items():
                        for partition in partitions:
                            moved[(topic_id, partition)] = None
                for assignment in (reconciled.assigned_partitions, reconciled.partitions_pending_revocation):
                    for topic_id, partitions in assignment.items():
                        for partition in partitions:
                            moved[(topic_id, partition)] = mid
            self._answer(item.req, mid, current, reconciled, fx)
        for record in records:
            fx.record(record)

    def _group_for_heartbeat(self, group_id: str, joining: bool, records: list[Record]) -> ConsumerGroup:
        existing = self.groups.get(group_id)
        if isinstance(existing, ConsumerGroup):
            return existing
        if existing is None:
            if not joining:
                raise CoordinatorError(ErrorCode.GROUP_ID_NOT_FOUND, f"Consumer group {group_id} not found.")
            # Not inserted: the group exists once its records are replayed.
            return ConsumerGroup(group_id, self.topics)
        if joining and not existing.members and existing.state_name == "Empty":
            # Offline upgrade: an empty classic group is replaced (its offsets stay).
            records.append(Record(GroupMetadataKey(group_id), None))
            return ConsumerGroup(group_id, self.topics)
        # Online upgrade of a live classic group is not implemented (Kafka: policy permitting).
        raise CoordinatorError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")

    def _check_group_size(self, group: ConsumerGroup, member_id: str) -> None:
        max_size = self.config.consumer_group_max_size
        if len(group.members) >= max_size and (not member_id or member_id not in group.members):
            raise CoordinatorError(
                ErrorCode.GROUP_MAX_SIZE_REACHED,
                f"The consumer group has reached its maximum capacity of {max_size} members.",
            )

    def _member(
        self, group: ConsumerGroup, member_id: str, req: ConsumerGroupHeartbeat, owned: Owned | None
    ) -> tuple[ConsumerGroupMember, str | None]:
        """(the member as it stands, the member id it replaces if it is a static replacement)."""
        joining = req.member_epoch == 0
        instance_id = req.instance_id
        if instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                if not joining:
                    raise CoordinatorError(
                        ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group.group_id}."
                    )
                return ConsumerGroupMember(member_id), None
            _check_epoch(member, req.member_epoch, owned)
            return member, None
        holder = group.static_member(instance_id)
        if joining:
            if holder is None:
                existing = group.members.get(member_id)
                if existing is not None:  # a dynamic member turning static
                    _check_epoch(existing, 0, owned)
                    return existing, None
                return ConsumerGroupMember(member_id), None
            if holder.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                raise CoordinatorError(
                    ErrorCode.UNRELEASED_INSTANCE_ID,
                    f"Static member {member_id} with instance id {instance_id} cannot join the group because "
                    f"the instance id is owned by {holder.member_id} member.",
                )
            # The restarted instance takes over the old member's subscription and assignment.
            copy = replace(holder, member_id=member_id, member_epoch=0, previous_member_epoch=0)
            return copy, holder.member_id
        if holder is None:
            raise CoordinatorError(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
        if holder.member_id != member_id:
            raise CoordinatorError(
                ErrorCode.FENCED_INSTANCE_ID,
                f"Static member {member_id} with instance id {instance_id} was fenced by member {holder.member_id}.",
            )
        _check_epoch(holder, req.member_epoch, owned)
        return holder, None

    def _replace_member_records(
        self, group: ConsumerGroup, old_member_id: str, new: ConsumerGroupMember, records: list[Record]
    ) -> None:
        gid = group.group_id
        records += _removal_records(gid, old_member_id)
        records.append(Record(ConsumerGroupMemberMetadataKey(gid, new.member_id), new.to_metadata_value()))
        records.append(
            Record(
                ConsumerGroupTargetAssignmentMemberKey(gid, new.member_id),
                ConsumerGroupTargetAssignmentMemberValue(assignment_to_record(group.target(old_member_id))),
            )
        )
        records.append(Record(ConsumerGroupCurrentMemberAssignmentKey(gid, new.member_id), new.to_assignment_value()))

    def _target(
        self,
        group: ConsumerGroup,
        group_epoch: int,
        members: Mapping[str, ConsumerGroupMember],
        replaced: str | None,
        updated_id: str,
        fx: Effects,
    ) -> dict[str, Assignment]:
        """Run the assignor for ``members`` (Kafka's ``TargetAssignmentBuilder``)."""
        assignor_name = self.preferred_assignor(members.values())
        assignor = self.assignors[assignor_name]
        by_subscription: dict[tuple[tuple[str, ...], str], frozenset[UUID]] = {}
        specs: dict[str, MemberSubscriptionSpec] = {}
        for mid, m in members.items():
            key = (m.subscribed_topic_names, m.subscribed_topic_regex)
            ids = by_subscription.get(key)
            if ids is None:
                ids = by_subscription[key] = self.member_topic_ids(m)
            previous = group.target(replaced) if mid == updated_id and replaced is not None else group.target(mid)
            specs[mid] = MemberSubscriptionSpec(ids, previous, m.rack_id, m.instance_id)
        topics: dict[UUID, TopicMetadata] = {}
        for ids in by_subscription.values():
            for topic_id in ids:
                if topic_id not in topics:
                    info = self.topics.by_id(topic_id)
                    assert info is not None
                    topics[topic_id] = TopicMetadata(info.name, info.num_partitions)
        started = self.stopwatch()
        try:
            result = assignor.assign(GroupSpec(specs), SubscribedTopicMetadata(topics))
        except PartitionAssignorError as exc:
            raise CoordinatorError(
                ErrorCode.UNKNOWN_SERVER_ERROR,
                f"Failed to compute a new target assignment for epoch {group_epoch}: {exc}",
            ) from None
        duration_ns = self.stopwatch() - started
        fx.event(
            TargetAssignmentComputed(
                group.group_id,
                group_epoch,
                assignor_name,
                len(specs),
                sum(t.num_partitions for t in topics.values()),
                duration_ns,
            )
        )
        # Members whose target did not change keep the very same mapping (the assignors hand back
        # their input's frozensets), so ``_target_records`` skips them by identity.
        targets: dict[str, Assignment] = {}
        for mid, spec in specs.items():
            new = result.get(mid, {})
            previous = spec.assigned_partitions
            targets[mid] = previous if new == previous else normalized(new)
        return targets

    def preferred_assignor(self, members: Iterable[ConsumerGroupMember]) -> str:
        """Most requested configured ``ServerAssignor`` (ties: config order), else the default."""
        counts: Counter[str] = Counter()
        for m in members:
            if m.server_assignor is not None and m.server_assignor in self.assignors:
                counts[m.server_assignor] += 1
        if not counts:
            return self.default_assignor
        best = max(counts.values())
        return next(name for name in self.assignors if counts.get(name) == best)

    def _rebalance_timer(
        self, group_id: str, before: ConsumerGroupMember, after: ConsumerGroupMember, fx: Effects
    ) -> None:
        key = rebalance_timer_key(group_id, after.member_id)
        if after.state is MemberState.UNREVOKED_PARTITIONS:
            # Not reset while the member keeps revoking at the same epoch (KAFKA-16249).
            same = before.state is MemberState.UNREVOKED_PARTITIONS and before.member_epoch == after.member_epoch
            if not (same and key in fx.timers.deadlines):
                fx.schedule(key, after.rebalance_timeout_ms)
        else:
            fx.cancel(key)

    # ---- leaving ---------------------------------------------------------------------------------

    def _leave(self, req: ConsumerGroupHeartbeat, fx: Effects) -> None:
        group = self._existing_group(req.group_id)
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
                left = replace(
                    member, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH, partitions_pending_revocation=NO_PARTITIONS
                )
                fx.record(
                    Record(
                        ConsumerGroupCurrentMemberAssignmentKey(group.group_id, member.member_id),
                        left.to_assignment_value(),
                    )
                )
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
        gid = group.group_id
        for record in _removal_records(gid, member.member_id):
            fx.record(record)
        metadata_hash = self.topics.metadata_hash(self.subscribed_topic_names(group, member, None))
        fx.record(Record(ConsumerGroupMetadataKey(gid), ConsumerGroupMetadataValue(group.group_epoch + 1, metadata_hash)))
        fx.cancel(session_timer_key(gid, member.member_id))
        fx.cancel(rebalance_timer_key(gid, member.member_id))
        fx.event(MemberLeft(gid, member.member_id, reason, group_type="consumer"))
        if reason != "leave-group":
            fx.event(MemberFenced(gid, member.member_id, reason, partition_count(member.assigned_partitions)))
        fx.event(RebalanceStarted(gid, "consumer", group.group_epoch, f"member {member.member_id} {reason}"))

    # ---- timers ----------------------------------------------------------------------------------

    def on_session_timer(self, key: TimerKey, fx: Effects) -> None:
        group = self.group(key[1])
        member = None if group is None else group.members.get(key[2])
        if group is None or member is None:
            return
        fx.event(SessionExpired(group.group_id, member.member_id, group_type="consumer"))
        self.fence(group, member, "session-timeout", fx)

    def on_rebalance_timer(self, key: TimerKey, fx: Effects) -> None:
        group = self.group(key[1])
        member = None if group is None else group.members.get(key[2])
        if group is None or member is None or member.state is not MemberState.UNREVOKED_PARTITIONS:
            return
        if member.member_epoch < 0:
            return
        self.fence(group, member, "rebalance-timeout", fx)

    def on_loaded(self, fx: Effects) -> None:
        for group in self.groups.values():
            if not isinstance(group, ConsumerGroup):
                continue
            group.metadata_refresh_needed = True
            for member in group.members.values():
                # Fresh session for everyone, as Kafka's onLoaded.
                fx.schedule(session_timer_key(group.group_id, member.member_id), self.session_timeout_ms(group.group_id))
                if member.state is MemberState.UNREVOKED_PARTITIONS and member.member_epoch >= 0:
                    fx.schedule(rebalance_timer_key(group.group_id, member.member_id), member.rebalance_timeout_ms)
        self.report_state_changes(fx)

    # ---- topic metadata --------------------------------------------------------------------------

    def on_topics_changed(self, event: TopicsChanged, fx: Effects) -> None:
        """Update the image; flag the groups it concerns (their next heartbeat checks the hash)."""
        names = {t.name for t in event.topics}
        for topic_id in event.deleted:
            info = self.topics.by_id(topic_id)
            if info is not None:
                names.add(info.name)
        if event.snapshot:
            names |= {t.name for t in self.topics}
            self.topics.replace(event.topics)
        else:
            self.topics.upsert(event.topics)
            self.topics.delete(event.deleted)
        for group in self.groups.values():
            if not isinstance(group, ConsumerGroup):
                continue
            if event.snapshot or group.subscribed_regexes or any(n in group.subscribed_names for n in names):
                group.metadata_refresh_needed = True

    # =============================================================================================
    # ConsumerGroupDescribe
    # =============================================================================================

    def describe(self, req: ConsumerGroupDescribe, fx: Effects) -> None:
        fx.reply(req.ref, ConsumerGroupDescribeResponse(tuple(self._describe(gid) for gid in req.group_ids)))

    def _describe(self, group_id: str) -> DescribedConsumerGroup:
        if not group_id:
            return DescribedConsumerGroup(group_id, ErrorCode.INVALID_GROUP_ID)
        try:
            group = self._existing_group(group_id)
        except CoordinatorError as exc:
            message = f"Group {group_id} not found." if group_id not in self.groups else exc.message
            return DescribedConsumerGroup(group_id, exc.code, message)
        members = tuple(
            DescribedConsumerGroupMember(
                member_id=m.member_id,
                instance_id=m.instance_id,
                rack_id=m.rack_id,
                member_epoch=m.member_epoch,
                client_id=m.client_id,
                client_host=m.client_host,
                subscribed_topic_names=m.subscribed_topic_names,
                subscribed_topic_regex=m.subscribed_topic_regex,
                assignment=self._described(m.assigned_partitions),
                target_assignment=self._described(group.target(m.member_id)),
            )
            for m in group.members.values()
        )
        return DescribedConsumerGroup(
            group_id,
            NONE,
            group_state=group.state_name,
            group_epoch=group.group_epoch,
            assignment_epoch=group.assignment_epoch,
            assignor_name=self.preferred_assignor(group.members.values()),
            members=members,
        )

    def _described(self, assignment: Assignment) -> tuple[DescribedTopicPartitions, ...]:
        result = []
        for topic_id, partitions in sorted(assignment.items()):
            topic = self.topics.by_id(topic_id)
            if topic is not None:  # topics no longer in metadata are omitted, as Kafka does
                result.append(DescribedTopicPartitions(topic_id, topic.name, tuple(sorted(partitions))))
        return tuple(result)

    # =============================================================================================
    # Replay (the only code that changes consumer-group state)
    # =============================================================================================

    def replay(self, key: ConsumerGroupRecordKey, value: ConsumerGroupRecordValue | None) -> None:
        group_id = key.group_id
        group = self.group(group_id)
        if group is None:
            if value is None:
                return  # tombstones for unknown groups are ignored (KAFKA-17306)
            group = ConsumerGroup(group_id, self.topics)  # also replaces a "simple" offsets-only classic group
            self.groups[group_id] = group
        self._replayers[type(key)](group, key, value)
        self._dirty.add(group_id)

    def _replay_metadata(
        self, group: ConsumerGroup, key: ConsumerGroupRecordKey, value: ConsumerGroupRecordValue | None
    ) -> None:
        if value is None:
            assert not group.members, f"{group.group_id}: group tombstone with members left"
            del self.groups[group.group_id]
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
            group = self.group(group_id)
            if group is None:
                fx.event(GroupStateChanged(group_id, "consumer", "", "Dead"))
                continue
            state = group.state_name
            if state != group.last_state:
                fx.event(GroupStateChanged(group_id, "consumer", group.last_state, state))
                group.last_state = state
        self._dirty.clear()


class _Deferred(msgspec.Struct, frozen=True):
    """A heartbeat whose membership records are written and whose target, reconciliation and
    answer wait for ``complete_deferred``."""

    req: ConsumerGroupHeartbeat
    member_id: str
    is_new_member: bool
    owned: Owned | None


def _removal_records(group_id: str, member_id: str) -> list[Record]:
    """A member's tombstones, in Kafka's order (``removeMember``)."""
    return [
        Record(ConsumerGroupCurrentMemberAssignmentKey(group_id, member_id), None),
        Record(ConsumerGroupTargetAssignmentMemberKey(group_id, member_id), None),
        Record(ConsumerGroupMemberMetadataKey(group_id, member_id), None),
    ]


def _updated_member(member: ConsumerGroupMember, req: ConsumerGroupHeartbeat) -> ConsumerGroupMember:
    """The member with the request's non-null fields (and the connection's client id and host)."""
    if (
        req.instance_id is None
        and req.rack_id is None
        and req.rebalance_timeout_ms == -1
        and req.server_assignor is None
        and req.subscribed_topic_names is None
        and req.subscribed_topic_regex is None
        and req.client_id == member.client_id
        and req.client_host == member.client_host
    ):
        return member  # the steady-state heartbeat: nothing to update
    return replace(
        member,
        instance_id=req.instance_id if req.instance_id is not None else member.instance_id,
        rack_id=req.rack_id if req.rack_id is not None else member.rack_id,
        rebalance_timeout_ms=(
            req.rebalance_timeout_ms if req.rebalance_timeout_ms != -1 else member.rebalance_timeout_ms
        ),
        server_assignor=req.server_assignor if req.server_assignor is not None else member.server_assignor,
        subscribed_topic_names=(
            tuple(sorted(set(req.subscribed_topic_names)))
            if req.subscribed_topic_names is not None
            else member.subscribed_topic_names
        ),
        subscribed_topic_regex=(
            req.subscribed_topic_regex if req.subscribed_topic_regex is not None else member.subscribed_topic_regex
        ),
        client_id=req.client_id,
        client_host=req.client_host,
    )


def _owned(req: ConsumerGroupHeartbeat) -> Owned | None:
    if req.topic_partitions is None:
        return None
    owned: dict[UUID, frozenset[int]] = {}
    for tp in req.topic_partitions:
        owned[tp.topic_id] = owned.get(tp.topic_id, frozenset()) | frozenset(tp.partitions)
    return owned


def _is_subset(owned: Owned | None, assigned: Assignment) -> bool:
    if owned is None:
        return False
    for topic_id, partitions in owned.items():
        if not partitions:
            continue
        mine = assigned.get(topic_id)
        if mine is None or not partitions <= mine:
            return False
    return True


def _check_epoch(member: ConsumerGroupMember, received: int, owned: Owned | None) -> None:
    """Kafka's ``throwIfConsumerGroupMemberEpochIsInvalid`` with the 4.2 rejoin rule."""
    current = member.member_epoch
    if received == 0 or received == current:
        return
    if received > current:
        raise CoordinatorError(
            ErrorCode.FENCED_MEMBER_EPOCH,
            f"The consumer group member has a greater member epoch ({received}) than the one known by the "
            f"group coordinator ({current}). The member must abandon all its partitions and rejoin.",
        )
    if received != member.previous_member_epoch or not _is_subset(owned, member.assigned_partitions):
        raise CoordinatorError(
            ErrorCode.FENCED_MEMBER_EPOCH,
            f"The consumer group member has a smaller member epoch ({received}) than the one known by the "
            f"group coordinator ({current}). The member must abandon all its partitions and rejoin.",
        )


def _assignment_changed(
    group_id: str, before: ConsumerGroupMember, after: ConsumerGroupMember
) -> MemberAssignmentChanged:
    assigned = 0
    revoked = 0
    old, new = before.assigned_partitions, after.assigned_partitions
    for topic_id in set(old) | set(new):
        o = old.get(topic_id, frozenset())
        n = new.get(topic_id, frozenset())
        assigned += len(n - o)
        revoked += len(o - n)
    return MemberAssignmentChanged(group_id, after.member_id, after.member_epoch, assigned, revoked)


__all__ = [
    "REBALANCE_TIMER",
    "SESSION_TIMER",
    "ConsumerGroupManager",
    "rebalance_timer_key",
    "session_timer_key",
]
