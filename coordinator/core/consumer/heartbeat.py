"""ConsumerGroupHeartbeat of KIP-848 groups (Kafka's ``consumerGroupHeartbeat``, 4.x semantics).

Read ``group.py`` (epochs, states, records, replay) and ``reconciliation.py`` (member states) first.

Theory of operation
===================

Handlers never mutate durable state: they validate, compute values and write records into the
operation's :class:`~coordinator.core.effects.Effects`; the shard replays the records. Everything
that can fail (validation, unknown members, epochs, an invalid regex) runs before the first record
is written, so an error answer never leaves half a change behind.

A heartbeat (epoch >= 0) runs in two phases, ONE code path for every heartbeat:

Phase 1, membership (``_heartbeat``)
    1. Validate the request (``validation.validate_heartbeat``).
    2. Find the group: created by an epoch-0 join (an EMPTY group of another type is replaced through
       its tombstones, as Kafka's offline upgrade does; a live classic group is converted, policy
       permitting: ``migration.py``); otherwise GROUP_ID_NOT_FOUND. GROUP_MAX_SIZE_REACHED for
       newcomers.
    3. Find the member and check its epoch (``validation.find_member``: static members, the 4.2
       rejoin rule, the lost-response rule).
    4. Update the member with the non-null fields; a new regex is compiled (INVALID_REGULAR_EXPRESSION).
    5. Bump the group epoch if the group is new, the subscription changed, or (checked then, and
       after a topic change concerning the group) the subscribed topics' metadata hash changed.
    Records: a static replacement's records, member metadata (5), group epoch (3). Events; the
    session timer is (re)armed.

Phase 2, assignment (``_reconcile``, for one member or for every member waiting)
    6. If the group epoch is ahead of the assignment epoch, the target is recomputed first
       (``targets.TargetAssigner``): changed target members (7), then the target epoch (6).
    7. Reconcile the member (``reconciliation.reconcile``), write its current assignment (8) if it
       changed, (re)arm or cancel its rebalance timer. A STABLE member whose target is what it
       holds only moves to the assignment epoch: it is answered with that epoch and writes nothing
       (``ConsumerGroup.is_caught_up``); one whose target moved since reconciles from the epoch its
       client names (``ConsumerGroup.as_told``).
    8. Answer with the member's epoch, the heartbeat interval and the assignment when the request was
       full (epoch 0, or rebalance timeout + subscription + owned partitions all present, KAFKA-16367)
       or the assigned partitions changed.

When the target is current (the steady heartbeat), phase 2 follows phase 1 at once. When it is not
(a join, a subscription change, after a leave) or the heartbeat is a static replacement, the member
WAITS after phase 1: its records are written and replayed like any others, its reply is held. The
group's waiting members are completed together (``_complete``: the assignor runs ONCE for all of
them, then each is reconciled and answered in arrival order, an ownership overlay making
revoke-before-assign hold between them) when any of these comes first:

* the end of the runtime's batch (the shard's ``end_of_batch`` hook; a batch of one completes at
  once, in the same Result as the heartbeat);
* an event that could observe the group (``before_event``): anything but a heartbeat; for a
  heartbeat of the group, a leave, a static member's heartbeat or a second heartbeat of a waiting
  member.

So a group whose 50 members join in one batch computes one target instead of 50 (Kafka runs the
assignor inside every such heartbeat): the outcome of handling them one by one with only the last
of them running the assignor. The replies were going to wait for the batch's durable point anyway.
A crash between the entries leaves members without a current assignment (epoch 0) in an
``Assigning`` group, the state a leave leaves behind; their clients got no answer and rejoin. If
the assignor fails, every waiting heartbeat gets UNKNOWN_SERVER_ERROR and the group stays
``Assigning`` until the next heartbeat (its membership records stay, as after a leave).
"""

from __future__ import annotations

from collections.abc import Callable
from uuid import UUID

import msgspec

from coordinator.core.effects import Effects
from coordinator.core.errors import CoordinatorError, ErrorCode
from coordinator.core.events import (
    MemberAssignmentChanged,
    MemberJoined,
    RebalanceStarted,
    StaticMemberReplaced,
)
from coordinator.core.record_codec import Record
from coordinator.core.requests import ConsumerGroupHeartbeat
from coordinator.core.responses import ConsumerGroupHeartbeatResponse
from coordinator.core.topics import InvalidRegexError, compile_regex

from .assignment import NO_PARTITIONS, Assignment
from .context import ConsumerContext, rebalance_timer_key, session_timer_key
from .group import ConsumerGroup
from .member import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroupMember,
    MemberState,
)
from .membership import Membership
from .migration import Commit, Migration
from .reconciliation import Owned, reconcile
from .records import (
    current_assignment_record,
    group_epoch_record,
    member_metadata_record,
    member_tombstones,
    target_member_record,
)
from .targets import TargetAssigner
from .validation import (
    check_group_size,
    find_member,
    owned_partitions,
    updated_member,
    validate_heartbeat,
)

NONE = ErrorCode.NONE

OwnerOf = Callable[[UUID, int], "str | None"]


class Waiting(msgspec.Struct, frozen=True):
    """A heartbeat past phase 1 whose reply waits for the group's target assignment."""

    req: ConsumerGroupHeartbeat
    member_id: str
    is_new_member: bool
    owned: Owned | None


class Heartbeats:
    def __init__(
        self, ctx: ConsumerContext, targets: TargetAssigner, membership: Membership, migration: Migration
    ) -> None:
        self.ctx = ctx
        self.targets = targets
        self.membership = membership
        self.migration = migration
        # Soft, empty between runtime batches: group id -> heartbeats waiting for its target.
        self._waiting: dict[str, list[Waiting]] = {}
        self._waiting_members: set[tuple[str, str]] = set()

    # ---- the handler ------------------------------------------------------------------------------

    def heartbeat(self, req: ConsumerGroupHeartbeat, fx: Effects) -> None:
        try:
            if req.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                validate_heartbeat(req, self.targets.assignors)
                self.membership.leave(req, fx)
            else:
                self._heartbeat(req, fx)
        except CoordinatorError as exc:
            assert not fx.records, "a consumer group handler raised after producing records"
            fx.reply(req.ref, ConsumerGroupHeartbeatResponse(exc.code, exc.message))

    def _heartbeat(self, req: ConsumerGroupHeartbeat, fx: Effects) -> None:
        # ---- phase 1: membership -------------------------------------------------------------------
        validate_heartbeat(req, self.targets.assignors)
        joining = req.member_epoch == 0
        records: list[Record] = []
        group, converted = self._group_for_heartbeat(req.group_id, joining, records)
        max_size = self.ctx.config.consumer_group_max_size
        if len(group.members) >= max_size:  # tested before the call: a steady heartbeat makes none
            check_group_size(group, req.member_id, max_size)
        member_id = req.member_id or req.new_member_id
        assert member_id, "a v0 join needs an adapter-generated new_member_id"
        owned = None if req.topic_partitions is None else owned_partitions(req)

        member, replaced = find_member(group, member_id, req, owned)
        if replaced is not None:
            records += member_tombstones(group.group_id, replaced)
            records.append(member_metadata_record(group.group_id, member))
            records.append(target_member_record(group.group_id, member_id, group.target(replaced)))
            records.append(current_assignment_record(group.group_id, member))

        updated = updated_member(member, req)
        regex = updated.subscribed_topic_regex
        if regex and regex != member.subscribed_topic_regex and group.subscribed_regexes.get(regex, 0) <= 0:
            try:
                compile_regex(regex)
            except InvalidRegexError as exc:
                raise CoordinatorError(
                    ErrorCode.INVALID_REGULAR_EXPRESSION,
                    f"SubscribedTopicRegex `{regex}` is not a valid regular expression: {exc}.",
                ) from None
        if req.describable_topics is not None or updated.regex_topics is not None:
            updated = self._authorized_regex(updated, req.describable_topics)

        is_new_member = member_id not in group.members and replaced is None
        subscription_changed = (
            updated.subscribed_topic_names != member.subscribed_topic_names
            or updated.subscribed_topic_regex != member.subscribed_topic_regex
            or updated.regex_topics != member.regex_topics
        )
        # The member the group currently holds under this identity (for counters and hashes).
        previous = group.members.get(member_id) or (group.members.get(replaced) if replaced else None)

        group_epoch = group.group_epoch
        metadata_hash = group.metadata_hash
        bump = subscription_changed or group_epoch == 0
        if bump or group.metadata_refresh_needed:
            metadata_hash = self.ctx.topics.metadata_hash(self.ctx.subscribed_topic_names(group, previous, updated))
            bump = bump or metadata_hash != group.metadata_hash
            if bump:
                group_epoch += 1

        gid = group.group_id
        if is_new_member or (updated is not member and updated.metadata_view() != member.metadata_view()):
            records.append(member_metadata_record(gid, updated))
        if bump:
            records.append(group_epoch_record(gid, group_epoch, metadata_hash))
            reason = "new group" if group.group_epoch == 0 else (
                f"member {member_id} changed its subscription" if subscription_changed
                else "subscribed topic metadata changed"
            )
            fx.event(RebalanceStarted(gid, "consumer", group.group_epoch, reason))

        if converted is not None:
            converted(fx)  # nothing can fail any more: the classic group is given up
        if group_epoch > group.assignment_epoch or replaced is not None:
            # The target is behind (or the member takes over a static slot): wait for the group's
            # one target computation of this batch (``_complete``).
            for record in records:
                fx.record(record)
            self._after_membership(group, member_id, updated, replaced, is_new_member, req, fx)
            self._waiting.setdefault(gid, []).append(Waiting(req, member_id, is_new_member, owned))
            self._waiting_members.add((gid, member_id))
            return

        # ---- phase 2 at once: the target is current ------------------------------------------------
        reconciled, epoch = self._reconcile(
            group, member, updated, group.assignment_epoch, group.target_assignment.get(member_id, NO_PARTITIONS),
            group.owner, owned,
            is_new_member, req.member_epoch, records, fx,
        )
        for record in records:
            fx.record(record)
        self._after_membership(group, member_id, updated, replaced, is_new_member, req, fx)
        self._answer(req, member_id, member, reconciled, epoch, fx)

    def _authorized_regex(self, member: ConsumerGroupMember, describable: frozenset[str] | None) -> ConsumerGroupMember:
        """The member with what its regex may match: the regex's matches its principal may DESCRIBE
        (``describable``, computed at the edge; None: no authorizer, no filter). Kafka's regex
        resolution filters the same way (``filterTopicDescribeAuthorizedTopics``). The filter is part
        of the member's metadata record, so a replay resolves the regex as the live group did; a
        topic created later counts from the member's next heartbeat."""
        regex = member.subscribed_topic_regex
        allowed = None if describable is None or not regex else self.ctx.topics.resolve(regex) & describable
        return member if allowed == member.regex_topics else msgspec.structs.replace(member, regex_topics=allowed)

    # ---- phase 2: reconciliation and the answer (one code path) -----------------------------------

    def _reconcile(
        self,
        group: ConsumerGroup,
        before: ConsumerGroupMember,
        base: ConsumerGroupMember,
        target_epoch: int,
        target: Assignment,
        owner_of: OwnerOf,
        owned: Owned | None,
        is_new_member: bool,
        told: int,
        records: list[Record],
        fx: Effects,
    ) -> tuple[ConsumerGroupMember, int]:
        """Reconcile ``base`` towards ``target``; write its current assignment (8) if it is new or
        changed compared with ``before``, with the rebalance timer and the event. Returns it and
        the member epoch to answer with.

        A STABLE member whose target is exactly what it holds only moves to ``target_epoch``: it
        is told that epoch and writes nothing (``ConsumerGroup.is_caught_up``: after a join, every
        member of the group but the few the newcomer takes from, which Kafka records one by one)."""
        if (
            not is_new_member
            and base.state is MemberState.STABLE
            and 0 < base.member_epoch < target_epoch
            and base.classic is None
            and (target is base.assigned_partitions or target == base.assigned_partitions)
        ):
            return base, target_epoch
        # A member told an epoch without a record reconciles from the epoch its client names.
        if told > base.member_epoch:  # not the steady heartbeat's case: skip the call
            base = group.as_told(base, told)
        reconciled = base
        if not base.is_reconciled_to(target_epoch):
            reconciled = reconcile(base, target_epoch, target, owner_of, owned)
        if is_new_member or (reconciled is not before and (
            reconciled.member_epoch != before.member_epoch  # a catch-up: no need to compare the rest
            or reconciled.assignment_view() != before.assignment_view()
        )):
            gid = group.group_id
            records.append(current_assignment_record(gid, reconciled, group.assignment_value(reconciled)))
            self._rebalance_timer(gid, before, reconciled, fx)
            if reconciled.assigned_partitions != before.assigned_partitions:
                fx.event(assignment_changed(gid, before, reconciled))
        return reconciled, reconciled.member_epoch

    def _answer(
        self,
        req: ConsumerGroupHeartbeat,
        member_id: str,
        before: ConsumerGroupMember,
        reconciled: ConsumerGroupMember,
        member_epoch: int,
        fx: Effects,
    ) -> None:
        full_request = req.member_epoch == 0 or (
            req.rebalance_timeout_ms != -1
            and (req.subscribed_topic_names is not None or req.subscribed_topic_regex is not None)
            and req.topic_partitions is not None
        )
        assignment = None
        if full_request or (reconciled is not before and reconciled.assigned_partitions != before.assigned_partitions):
            assignment = tuple(
                (topic_id, tuple(sorted(parts))) for topic_id, parts in sorted(reconciled.assigned_partitions.items())
            )
        fx.reply(
            req.ref,
            ConsumerGroupHeartbeatResponse(
                NONE,
                member_id=member_id,
                member_epoch=member_epoch,
                heartbeat_interval_ms=self.ctx.heartbeat_interval_ms(req.group_id),
                assignment=assignment,
            ),
        )

    def _complete(self, group_id: str, fx: Effects) -> None:
        """Run the assignor once for the group's waiting heartbeats, then reconcile and answer each,
        in arrival order (as if the last of them had computed the target and the others had arrived
        just after it). Records: changed target members (7), target epoch (6), then each member's
        current assignment (8)."""
        items = self._waiting.pop(group_id, [])
        for item in items:
            self._waiting_members.discard((group_id, item.member_id))
        group = self.ctx.group(group_id)
        assert group is not None, f"{group_id}: waiting heartbeats for a group that is gone"
        records: list[Record] = []
        new_targets: dict[str, Assignment] | None = None
        target_epoch = group.assignment_epoch
        if group.group_epoch > group.assignment_epoch:
            try:
                new_targets = self.targets.compute(group, group.group_epoch, group.members, fx)
            except CoordinatorError as exc:
                for item in items:
                    fx.reply(item.req.ref, ConsumerGroupHeartbeatResponse(exc.code, exc.message))
                return
            target_epoch = group.group_epoch
            records += self.targets.records(group, target_epoch, new_targets)
        # Ownership changes made by the members completed before (replay has not run yet).
        moved: dict[tuple[UUID, int], str | None] = {}

        def owner_of(topic_id: UUID, partition: int) -> str | None:
            key = (topic_id, partition)
            return moved[key] if key in moved else group.owner(topic_id, partition)

        for item in items:
            mid = item.member_id
            current = group.members[mid]  # the member after its phase-1 records were replayed
            target = new_targets.get(mid, NO_PARTITIONS) if new_targets is not None else group.target(mid)
            reconciled, epoch = self._reconcile(
                group, current, current, target_epoch, target, owner_of, item.owned, item.is_new_member,
                item.req.member_epoch, records, fx,
            )
            if reconciled is not current:
                for assignment in (current.assigned_partitions, current.partitions_pending_revocation):
                    for topic_id, partitions in assignment.items():
                        for partition in partitions:
                            moved[(topic_id, partition)] = None
                for assignment in (reconciled.assigned_partitions, reconciled.partitions_pending_revocation):
                    for topic_id, partitions in assignment.items():
                        for partition in partitions:
                            moved[(topic_id, partition)] = mid
            self._answer(item.req, mid, current, reconciled, epoch, fx)
        for record in records:
            fx.record(record)

    # ---- when waiting heartbeats complete (the shard's batch hooks) --------------------------------

    def has_waiting(self) -> bool:
        return bool(self._waiting)

    def before_event(self, event: object, fx: Effects) -> None:
        """Complete the waiting heartbeats ``event`` could observe (see the module docstring)."""
        if not self._waiting:
            return
        if not isinstance(event, ConsumerGroupHeartbeat):
            groups = list(self._waiting)
        else:
            gid = event.group_id
            if gid not in self._waiting:
                return
            member_id = event.member_id or event.new_member_id
            if not (event.member_epoch < 0 or event.instance_id is not None or (gid, member_id) in self._waiting_members):
                return
            groups = [gid]
        for group_id in groups:
            self._complete(group_id, fx)

    def end_of_batch(self, fx: Effects) -> None:
        for group_id in list(self._waiting):
            self._complete(group_id, fx)

    def abandon(self) -> list[int]:
        refs = [item.req.ref for items in self._waiting.values() for item in items]
        self._waiting.clear()
        self._waiting_members.clear()
        return refs

    # ---- helpers ----------------------------------------------------------------------------------

    def _group_for_heartbeat(
        self, group_id: str, joining: bool, records: list[Record]
    ) -> tuple[ConsumerGroup, Commit | None]:
        """Kafka's ``getOrMaybeCreateConsumerGroup``: the group, and what a conversion still has to do
        once the heartbeat is accepted (the group's records are the caller's to write)."""
        existing = self.ctx.groups.get(group_id)
        if isinstance(existing, ConsumerGroup):
            return existing, None
        if existing is None:
            if not joining:
                raise CoordinatorError(ErrorCode.GROUP_ID_NOT_FOUND, f"Consumer group {group_id} not found.")
            # Not inserted: the group exists once its records are replayed.
            return self.ctx.new_group(group_id), None
        if not joining:
            raise CoordinatorError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
        if not existing.members and existing.is_empty:
            # Offline upgrade: an empty group of another type is replaced (its offsets stay).
            records += existing.tombstones()
            return self.ctx.new_group(group_id), None
        # Online upgrade of a live classic group, policy permitting.
        return self.migration.upgrade(existing, records)

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
        fx.schedule(session_timer_key(gid, member_id), self.ctx.session_timeout_ms(gid))

    @staticmethod
    def _rebalance_timer(group_id: str, before: ConsumerGroupMember, after: ConsumerGroupMember, fx: Effects) -> None:
        key = rebalance_timer_key(group_id, after.member_id)
        if after.state is MemberState.UNREVOKED_PARTITIONS:
            # Not reset while the member keeps revoking at the same epoch (KAFKA-16249).
            same = before.state is MemberState.UNREVOKED_PARTITIONS and before.member_epoch == after.member_epoch
            if not (same and key in fx.timers.deadlines):
                fx.schedule(key, after.rebalance_timeout_ms)
        else:
            fx.cancel(key)


def assignment_changed(
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
