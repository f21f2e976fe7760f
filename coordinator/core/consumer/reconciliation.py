"""Member reconciliation (Kafka's ``CurrentAssignmentBuilder``): theory of operation.

Theory of operation
===================

A member holds ``assigned_partitions`` (what it may use now; exactly what its heartbeat responses
carry) and ``partitions_pending_revocation`` (what it was told to give up and has not yet confirmed).
The group's target assignment says what it should end up with at the assignment epoch ``T``. This
module computes the member's next step from (member, ``T``, its target, who owns what, and the
partitions the member reports owning in the heartbeat, ``owned``; ``None`` = "unchanged", which is
taken to mean "still owns everything").

Member states:

``STABLE``
    It owns exactly what it was given for its epoch; nothing is pending. If its epoch is not ``T``,
    compute the next assignment.
``UNREVOKED_PARTITIONS``
    It must give up ``partitions_pending_revocation`` first; its epoch is frozen. It stays here until
    ``owned`` contains none of the pending partitions (all-or-nothing, KAFKA-16249), then computes the
    next assignment from its current epoch (Kafka 4.2, KAFKA-19974: no "+1").
``UNRELEASED_PARTITIONS``
    It is at ``T`` but some target partitions are still owned by other members; each heartbeat
    recomputes and picks up those that were released meanwhile.
``UNKNOWN``
    A state byte this code does not know (read from a newer log): fence unless the member reports
    owning nothing, then recompute from scratch.

Computing the next assignment, per topic of target ∪ assigned:

* keep = assigned ∩ target; revoke = assigned - keep;
* add = target - keep - {partitions owned by ANOTHER member} (the latter are "unreleased"; a
  partition in the member's own pending revocation is not "unreleased", KAFKA-19449).

Each partition the member holds carries the epoch it was assigned at (KIP-1251, for offset commits
at an older epoch): kept and revoked partitions keep theirs, added ones get ``T``.

Then, in priority order:

1. revoke is non-empty and the member still owns some of it -> ``UNREVOKED_PARTITIONS`` at its
   current epoch (previous epoch := current), assigned := keep, pending := revoke. **It gets nothing
   new until it has revoked**: this is what guarantees that a partition is never given to a member
   while another still owns it (the ownership index covers pending revocations).
2. add is non-empty -> assigned := keep ∪ add at epoch ``T``; ``UNRELEASED_PARTITIONS`` if some
   target partition is unreleased, else ``STABLE``.
3. only unreleased partitions -> ``UNRELEASED_PARTITIONS`` at ``T`` with assigned := keep.
4. otherwise ``STABLE`` at ``T`` with assigned := keep.

If the member's ``owned`` list already excludes everything to revoke, step 1 is skipped and the
member moves straight to ``T``. Moving to a new epoch sets ``previous_member_epoch`` to the old one,
which is what lets the coordinator accept a heartbeat whose response was lost (see ``validation.check_epoch``).
A STABLE member that only moves to the new epoch is told it without a record (the heartbeat handler
does not call this module for it: ``ConsumerGroup.is_caught_up``).

Invariant (what the simulation checks): the union of a member's assigned and pending-revocation
partitions never gains a partition that another member has in its own union.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from uuid import UUID

from msgspec.structs import replace

from coordinator.core.consumer.assignment import (
    NO_PARTITIONS,
    Assignment,
    carried_epochs,
    normalized,
)
from coordinator.core.consumer.member import ConsumerGroupMember, MemberState
from coordinator.core.errors import CoordinatorError, ErrorCode

Owned = Mapping[UUID, frozenset[int]]
"""The partitions a heartbeat reports as owned (``TopicPartitions``)."""

OwnerOf = Callable[[UUID, int], "str | None"]


def owns_any(owned: Owned | None, partitions: Assignment) -> bool:
    """Whether the member may still own any of ``partitions`` (``owned is None`` = yes)."""
    if owned is None:
        return True
    for topic_id, reported in owned.items():
        pending = partitions.get(topic_id)
        if pending and not pending.isdisjoint(reported):
            return True
    return False


def reconcile(
    member: ConsumerGroupMember,
    target_epoch: int,
    target: Assignment,
    owner_of: OwnerOf,
    owned: Owned | None,
) -> ConsumerGroupMember:
    """The member's next state (``member`` itself when nothing changes).

    ``owner_of(topic, partition)`` names the member that holds the partition assigned or pending
    revocation (``None`` when free). Raises FENCED_MEMBER_EPOCH for an UNKNOWN member state.
    """
    state = member.state
    if state is MemberState.STABLE:
        if member.member_epoch == target_epoch:
            return member
        assigned = member.assigned_partitions
        if target is assigned or target == assigned:
            # Its target did not move (after a join, most members of the group): it only catches
            # up to the new epoch, keeping its partitions and their epochs. What ``_next`` would
            # compute, without its per-partition work.
            return replace(member, member_epoch=target_epoch, previous_member_epoch=member.member_epoch)
        return _next(member, target_epoch, target, owner_of, owned)
    if state is MemberState.UNREVOKED_PARTITIONS:
        if owns_any(owned, member.partitions_pending_revocation):
            return member
        return _next(member, target_epoch, target, owner_of, owned)
    if state is MemberState.UNRELEASED_PARTITIONS:
        return _next(member, target_epoch, target, owner_of, owned)
    # UNKNOWN
    if owned is None or any(owned.values()):
        raise CoordinatorError(
            ErrorCode.FENCED_MEMBER_EPOCH,
            "The consumer group member is in a unknown state. The member must abandon all its "
            "partitions and rejoin.",
        )
    return _next(member, target_epoch, target, owner_of, owned)


def _next(
    member: ConsumerGroupMember,
    target_epoch: int,
    target: Assignment,
    owner_of: OwnerOf,
    owned: Owned | None,
) -> ConsumerGroupMember:
    me = member.member_id
    current = member.assigned_partitions
    has_unreleased = False
    new_assigned: dict[UUID, frozenset[int]] = {}
    revoke: dict[UUID, frozenset[int]] = {}
    add: dict[UUID, frozenset[int]] = {}
    for topic_id in set(target) | set(current):
        wanted = target.get(topic_id, frozenset())
        have = current.get(topic_id, frozenset())
        keep = have & wanted
        if keep:
            new_assigned[topic_id] = keep
        if have - keep:
            revoke[topic_id] = have - keep
        candidates = wanted - keep
        if candidates:
            free = frozenset(p for p in candidates if owner_of(topic_id, p) in (None, me))
            if len(free) != len(candidates):
                has_unreleased = True
            if free:
                add[topic_id] = free

    old_epochs = member.assignment_epochs
    if revoke and owns_any(owned, revoke):
        assigned = normalized(new_assigned)
        pending = normalized(revoke)
        updated = replace(
            member,
            state=MemberState.UNREVOKED_PARTITIONS,
            member_epoch=member.member_epoch,
            previous_member_epoch=member.member_epoch,
            assigned_partitions=assigned,
            partitions_pending_revocation=pending,
            # What it keeps and what it revokes keep the epochs they were assigned at.
            assignment_epochs=carried_epochs(old_epochs, assigned, pending, {}, target_epoch),
        )
    else:
        kept = normalized(new_assigned)
        for topic_id, partitions in add.items():
            new_assigned[topic_id] = new_assigned.get(topic_id, frozenset()) | partitions
        # A partition given now is assigned at the target epoch (KIP-1251), even one it gave up
        # earlier and gets back.
        epochs = carried_epochs(old_epochs, kept, NO_PARTITIONS, add, target_epoch)
        updated = replace(
            member,
            state=MemberState.UNRELEASED_PARTITIONS if has_unreleased else MemberState.STABLE,
            member_epoch=target_epoch,
            previous_member_epoch=member.member_epoch,
            assigned_partitions=normalized(new_assigned),
            partitions_pending_revocation=NO_PARTITIONS,
            assignment_epochs=epochs,
        )
    return member if updated == member else updated
