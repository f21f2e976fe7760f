"""Member reconciliation for streams groups (Kafka's ``streams.CurrentAssignmentBuilder``): how a
member walks from the tasks it holds to its (refined) target, one heartbeat at a time.

Theory of operation
===================

A member has an epoch, a state and its assigned tasks (active ones with the epoch they were granted
at) plus the tasks pending revocation. ``reconcile`` computes the member's next step toward the
target assignment of ``target_epoch``; it is called on every heartbeat of a member that is not yet
reconciled to the target epoch (state STABLE at that epoch).

States (Kafka's ``streams.MemberState``, persisted in the current-assignment record):

- STABLE: holds its assigned tasks. If its epoch is not the target's, the next assignment is
  computed.
- UNREVOKED_TASKS: must give up the tasks pending revocation. It stays here, **at its old epoch**,
  until a heartbeat proves the release: it carries the owned lists (all three) and none of the
  pending tasks is among them (a heartbeat without the lists proves nothing). Then the next
  assignment is computed at epoch + 1 (the epoch it was moving to).
- UNRELEASED_TASKS: at the target epoch, waiting for tasks another member still holds; each
  heartbeat recomputes, picking up what was released meanwhile.
- UNKNOWN (a record from a newer version): FENCED_MEMBER_EPOCH unless the member reports it owns
  nothing, then it takes the target.

The next assignment, for each role: kept = held ∩ target (active tasks keep their assignment
epoch); pending revocation = held − target; to grant = target − held, minus the tasks that are
**not yet released**:

- an active task while any member runs it as active (pending revocation included), or another
  member of this process holds it as a standby or warm-up;
- a standby while another member of this process runs it as active, this process already has it
  as a standby, or another member of this process has it as a warm-up;
- a warm-up while this process runs it as active, another member of this process has it as a
  standby, or this process already has it as a warm-up.

So **an active task is revoked before it is assigned elsewhere**: the new owner gets it only
after the old owner's heartbeat shows it gone. Role changes of one member happen in place (Kafka
4.4, KAFKA-20665, so Streams recycles the state store): an active task demoted to standby gets the
standby at once; a standby becomes a warm-up (and back) without a revocation; a standby or warm-up
promoted to active is kept (not revoked) until the active task is granted, then dropped.

Result: anything to revoke and not released → UNREVOKED_TASKS at the **unchanged** epoch with the
kept tasks; otherwise the target epoch, with the granted tasks added, UNRELEASED_TASKS if something
was held back, else STABLE. Each step returns a new member (members are immutable); the caller
writes the current-assignment record when it differs, and arms the rebalance timeout on entering
UNREVOKED_TASKS.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import msgspec

from ..errors import CoordinatorError, ErrorCode
from .member import MemberState, StreamsGroupMember
from .tasks import NO_TASKS, Task, TasksTuple, TasksWithEpochs


class TaskOwnership(msgspec.Struct, frozen=True):
    """Who holds each task now, over assigned and pending-revocation tasks of every member (Kafka's
    ``currentActiveTaskProcessId`` / ``current{Standby,Warmup}TaskProcessIds`` maps)."""

    active: Mapping[Task, str] = msgspec.field(default_factory=dict)
    """task -> process id of the member running it."""
    standby: Mapping[Task, frozenset[str]] = msgspec.field(default_factory=dict)
    warmup: Mapping[Task, frozenset[str]] = msgspec.field(default_factory=dict)


def ownership(members: Iterable[StreamsGroupMember]) -> TaskOwnership:
    active: dict[Task, str] = {}
    standby: dict[Task, set[str]] = {}
    warmup: dict[Task, set[str]] = {}
    for member in members:
        for held in (member.assigned, member.pending_revocation):
            for task in held.active:
                active[task] = member.process_id
            for task in held.standby:
                standby.setdefault(task, set()).add(member.process_id)
            for task in held.warmup:
                warmup.setdefault(task, set()).add(member.process_id)
    return TaskOwnership(active, {t: frozenset(p) for t, p in standby.items()},
                         {t: frozenset(p) for t, p in warmup.items()})


def _fenced(message: str) -> CoordinatorError:
    return CoordinatorError(ErrorCode.FENCED_MEMBER_EPOCH, message)


def check_member_epoch(member: StreamsGroupMember, received_epoch: int, owned: TasksTuple | None) -> None:
    """Kafka's ``throwIfStreamsGroupMemberEpochIsInvalid``: 0 rejoins; a newer epoch than known is
    fenced; an older one only passes when it is the previous epoch and the owned tasks are a subset
    of the assigned ones (the response that bumped the epoch was lost)."""
    if received_epoch == 0:
        return
    if received_epoch > member.member_epoch:
        raise _fenced(f"The streams group member has a greater member epoch ({received_epoch}) than the one known "
                      f"by the group coordinator ({member.member_epoch}). The member must abandon all its "
                      "partitions and rejoin.")
    if received_epoch < member.member_epoch:
        assigned = member.assigned
        if (received_epoch != member.previous_member_epoch or (owned is not None and not (
                owned.active <= assigned.active.keys() and owned.standby <= assigned.standby
                and owned.warmup <= assigned.warmup))):
            raise _fenced(f"The streams group member has a smaller member epoch ({received_epoch}) than the one known "
                          f"by the group coordinator ({member.member_epoch}). The member must abandon all its "
                          "partitions and rejoin.")


def reconcile(member: StreamsGroupMember, target_epoch: int, target: TasksTuple, held: TaskOwnership,
              owned: TasksTuple | None) -> StreamsGroupMember:
    """The member's next step toward ``target`` at ``target_epoch``. ``owned``: the tasks the
    heartbeat reported (None when it carried no lists)."""
    state = member.state
    if state == MemberState.STABLE:
        if member.member_epoch != target_epoch:
            return _Step(member, target_epoch, target, held, owned).next(member.member_epoch)
        return member
    if state == MemberState.UNREVOKED_TASKS:
        if _not_released(owned, member.pending_revocation):
            return member
        return _Step(member, target_epoch, target, held, owned).next(member.member_epoch + 1)
    if state == MemberState.UNRELEASED_TASKS:
        return _Step(member, target_epoch, target, held, owned).next(member.member_epoch)
    if owned is None or not owned.is_empty():
        raise _fenced("The streams group member is in a unknown state. The member must abandon all its tasks "
                      "and rejoin.")
    return _Step(member, target_epoch, target, held, owned).next(target_epoch)


def _not_released(owned: TasksTuple | None, pending: TasksWithEpochs) -> bool:
    """Kafka's ``hasNotReleased``: only owned lists without any pending task prove the release."""
    return owned is None or owned.contains_any(pending.tasks())


class _Step:
    def __init__(self, member: StreamsGroupMember, target_epoch: int, target: TasksTuple, held: TaskOwnership,
                 owned: TasksTuple | None) -> None:
        self.member, self.target_epoch, self.target, self.held, self.owned = member, target_epoch, target, held, owned
        self.process = member.process_id

    def _other_member_of_process_holds(self, holders: Mapping[Task, frozenset[str]], mine: frozenset[Task],
                                       task: Task) -> bool:
        return self.process in holders.get(task, NO_TASKS) and task not in mine

    def _unreleased_active(self, task: Task) -> bool:
        assigned = self.member.assigned
        return (task in self.held.active
                or self._other_member_of_process_holds(self.held.standby, assigned.standby, task)
                or self._other_member_of_process_holds(self.held.warmup, assigned.warmup, task))

    def _unreleased_standby(self, task: Task) -> bool:
        assigned = self.member.assigned
        runs_here = self.held.active.get(task) == self.process and task not in assigned.active
        return (runs_here or self.process in self.held.standby.get(task, NO_TASKS)
                or self._other_member_of_process_holds(self.held.warmup, assigned.warmup, task))

    def _unreleased_warmup(self, task: Task) -> bool:
        return (self.held.active.get(task) == self.process
                or self._other_member_of_process_holds(self.held.standby, self.member.assigned.standby, task)
                or self.process in self.held.warmup.get(task, NO_TASKS))

    def next(self, epoch: int) -> StreamsGroupMember:
        assigned, target = self.member.assigned, self.target
        held_active = assigned.active
        kept_active = {t: e for t, e in held_active.items() if t in target.active}
        revoke_active = {t: e for t, e in held_active.items() if t not in target.active}
        grant_active: dict[Task, int] = {}
        unreleased = False
        for task in target.active:
            if task not in held_active:
                if self._unreleased_active(task):
                    unreleased = True
                else:
                    grant_active[task] = self.target_epoch
        kept_standby, revoke_standby = set(assigned.standby & target.standby), set(assigned.standby - target.standby)
        grant_standby = set()
        for task in target.standby - assigned.standby:
            if self._unreleased_standby(task):
                unreleased = True
            else:
                grant_standby.add(task)
        kept_warmup, revoke_warmup = set(assigned.warmup & target.warmup), set(assigned.warmup - target.warmup)
        grant_warmup = set()
        for task in target.warmup - assigned.warmup:
            if self._unreleased_warmup(task):
                unreleased = True
            else:
                grant_warmup.add(task)
        # In-place role changes (KAFKA-20665): active demoted to standby gets the standby now.
        for task in held_active:
            if task in grant_standby:
                grant_standby.discard(task)
                kept_standby.add(task)
        # Standby <-> warm-up: swapped now, no revocation to wait for.
        for task in assigned.standby:
            if task in grant_warmup:
                grant_warmup.discard(task)
                kept_warmup.add(task)
                revoke_standby.discard(task)
        for task in assigned.warmup:
            if task in grant_standby:
                grant_standby.discard(task)
                kept_standby.add(task)
                revoke_warmup.discard(task)
        # Standby/warm-up promoted to active: not revoked; kept until the active task is granted.
        revoke_standby -= target.active
        revoke_warmup -= target.active
        pending = TasksWithEpochs(revoke_active, frozenset(revoke_standby), frozenset(revoke_warmup))
        to_revoke = not pending.is_empty() and _not_released(self.owned, pending)
        for replicas, kept in ((assigned.standby, kept_standby), (assigned.warmup, kept_warmup)):
            for task in replicas:
                promoted_now = not to_revoke and task in grant_active
                if task in target.active and not promoted_now:
                    kept.add(task)
        member = self.member
        if to_revoke:
            return _replace(member, MemberState.UNREVOKED_TASKS, epoch,
                            TasksWithEpochs(kept_active, frozenset(kept_standby), frozenset(kept_warmup)), pending)
        granted = bool(grant_active or grant_standby or grant_warmup)
        state = MemberState.UNRELEASED_TASKS if unreleased else MemberState.STABLE
        if granted:
            new = TasksWithEpochs({**kept_active, **grant_active}, frozenset(kept_standby | grant_standby),
                                  frozenset(kept_warmup | grant_warmup))
        else:
            new = TasksWithEpochs(kept_active, frozenset(kept_standby), frozenset(kept_warmup))
        return _replace(member, state, self.target_epoch, new, TasksWithEpochs())


def _replace(member: StreamsGroupMember, state: MemberState, epoch: int, assigned: TasksWithEpochs,
             pending: TasksWithEpochs) -> StreamsGroupMember:
    """Kafka's ``updateMemberEpoch``: the old epoch becomes the previous one."""
    return msgspec.structs.replace(member, state=state, member_epoch=epoch, previous_member_epoch=member.member_epoch,
                                   assigned=assigned, pending_revocation=pending)
