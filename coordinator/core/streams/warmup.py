"""Warm-up tasks: how a streams group gets from where its tasks run to the assignor's target
without stopping a stateful task while its new owner restores the state.

Theory of operation
===================

The assignor (``assignor.py``) decides *where* each task belongs; ``refine`` decides *how the group
gets there* (Kafka's ``AssignmentRefiner``, which in every Kafka release through trunk returns the
target unchanged: "No warm-up tasks are inserted yet"). It derives, for the whole group at once,
the assignment members reconcile toward:

1. Start from the target (active and standby tasks; the assignor places no warm-ups).
2. For each active task the target moves from the member that runs it now (the *owner*) to
   another member (the *newcomer*), the task moves **at once** when any of these holds:

   - the task is stateless (nothing to restore);
   - the owner left the group, or nobody runs the task (nothing to keep running);
   - owner and newcomer are members of one process (one state directory);
   - warm-ups are off (``num_warmup_replicas`` = 0);
   - the newcomer reports no task offsets (StreamsGroupHeartbeat v0: Kafka Streams 4.2/4.3 never
     report them, so nothing would ever show that a warm-up caught up; they are served as Kafka
     serves them, tasks move at once);
   - the newcomer is **caught up**: its lag for the task (end offset minus offset, both changelog
     offset sums it reported; an end offset it did not report is taken from the other members'
     reports) is at most ``acceptable_recovery_lag``. This is the promotion: the warm-up the
     newcomer ran becomes the active task in place (``reconciliation.py``), once the owner released
     it. An end offset of ``Long.MAX_VALUE`` or below 0 is unknown (the trunk client's report
     for an empty changelog), and an unknown lag is never caught up;
   - the move is **stalled** (``stall.py``): the newcomer's lag has not come down for a bound of
     time, or was never known, so waiting longer would not end.

   Otherwise the task **stays active on its owner** and, while the group's warm-up budget lasts
   (``num_warmup_replicas`` warm-ups in the group at a time, Kafka's name and default 2), the
   newcomer gets a **warm-up** copy, which Kafka Streams restores like a standby. Warm-ups already
   running get the budget first (so a warm-up is never replaced by another mid-restore), then
   tasks in (subtopology, partition) order. A held-back task the budget leaves without a warm-up
   stays where it runs until a later step has budget for it.
3. The owner's process must not hold the task twice: a standby of that task the target gave to a
   member of the owner's process is dropped while the owner keeps it active (it holds the state).

So the refined assignment keeps every task active exactly once (the count Kafka checks with
``preservesActiveTaskCount``), never holds a task twice in one process, and never has more warm-ups
than the budget. The budget counts warm-ups still restoring: a promoted warm-up (caught up) stays
with its member, reconciliation keeping it until the owner released the active task, while the
freed budget already starts the next warm-up. A warm-up ends in one of two ways, both computed by a later call: promoted (the
newcomer caught up, or its move stalled) or dropped (the target no longer moves the task there, the newcomer left, or
the owner left and the task moved at once). The caller re-derives the refined assignment when
members report offsets (at the task-offset interval, or as soon as a warm-up comes within the
acceptable lag: the trunk client reports then) and gives it its own assignment epoch when it
changed, as Kafka's REFINED epoch bump does; between those steps it is frozen. Nothing here is
persisted: after a failover it is derived again from the current assignments, and lags are unknown
until members report again (held-back tasks stay where they run meanwhile).

Deterministic: the same members, target and offsets always give the same refined assignment.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping

import msgspec

from ..errors import CoordinatorError, ErrorCode
from .tasks import NO_TASKS, Task, TasksTuple


class MemberTaskOffsets(msgspec.Struct, frozen=True):
    """The changelog offset sums a member reported (Kafka's ``MemberTaskOffsets``), in memory only.
    ``reported`` is False until a heartbeat carried one of the maps (never, on v0)."""

    offsets: Mapping[Task, int] = msgspec.field(default_factory=dict)
    end_offsets: Mapping[Task, int] = msgspec.field(default_factory=dict)
    reported: bool = False

    def update(self, offsets: Iterable[tuple[str, int, int]] | None,
               end_offsets: Iterable[tuple[str, int, int]] | None) -> MemberTaskOffsets:
        """The maps a heartbeat carried replace the old ones, each on its own (None keeps it).
        A duplicate task is INVALID_REQUEST, as in Kafka; validate before storing, so a refused
        request leaves nothing behind."""
        if offsets is None and end_offsets is None:
            return self
        return MemberTaskOffsets(self.offsets if offsets is None else _by_task(offsets),
                                 self.end_offsets if end_offsets is None else _by_task(end_offsets), True)


def _by_task(entries: Iterable[tuple[str, int, int]]) -> dict[Task, int]:
    result: dict[Task, int] = {}
    for subtopology, partition, offset in entries:
        if (subtopology, partition) in result:
            raise CoordinatorError(ErrorCode.INVALID_REQUEST, "Task offsets contain a duplicate entry for subtopology "
                                   f"{subtopology} and partition {partition}.")
        result[(subtopology, partition)] = offset
    return result


class WarmupMember(msgspec.Struct, frozen=True):
    """What the warm-up step knows of a member."""

    process_id: str
    current: TasksTuple = TasksTuple()
    """The tasks it is assigned now, in each role (pending revocation left out: a task being revoked
    is already on its way to the member the refined assignment gave it)."""
    offsets: MemberTaskOffsets = MemberTaskOffsets()


class WarmupConfig(msgspec.Struct, frozen=True):
    num_warmup_replicas: int = 2
    """``group.streams.num.warmup.replicas``: warm-ups the group runs at a time; 0 turns them off."""
    acceptable_recovery_lag: int = 10000
    """``group.streams.acceptable.recovery.lag``: at or below this lag a warm-up is caught up."""


UNKNOWN_END_OFFSET = 2**63 - 1
"""``Long.MAX_VALUE``: the end offset sum the trunk client reports for a warm-up when it does not
know the end of one of the task's changelogs (seen over empty changelogs) or the sum overflows;
like a negative one, it is no end offset at all."""


def known_end(end: int | None) -> bool:
    return end is not None and 0 <= end < UNKNOWN_END_OFFSET


def lag(member: WarmupMember, task: Task, end_offsets: Mapping[Task, int]) -> int | None:
    """The member's lag for a task, or None when unknown (no offset, or no known end offset from it
    or any member; a negative offset is Kafka Streams' "unknown")."""
    offset = member.offsets.offsets.get(task)
    end = member.offsets.end_offsets.get(task)
    if not known_end(end):
        end = end_offsets.get(task)
    if offset is None or end is None or offset < 0 or not known_end(end):
        return None
    return max(end - offset, 0)


def group_end_offsets(members: Iterable[WarmupMember]) -> dict[Task, int]:
    """The highest known end offset any member reported for each task."""
    ends: dict[Task, int] = {}
    for member in members:
        for task, end in member.offsets.end_offsets.items():
            if end > ends.get(task, -1) and known_end(end):
                ends[task] = end
    return ends


def refine(members: Mapping[str, WarmupMember], target: Mapping[str, TasksTuple], stateful: Iterable[str],
           config: WarmupConfig, stalled: Collection[tuple[str, Task]] = frozenset()) -> dict[str, TasksTuple]:
    """The assignment members reconcile toward: the target, with stateful moves to members that are
    not caught up held back on their owner and warmed up within the budget. See the module doc;
    ``stalled`` (newcomer, task) moves go ahead at once (``stall.py``).

    Cost: set operations on the members' task sets, Python work only for the tasks that move (and
    for every task when some task is reported active twice); members nothing is held back from keep
    the target's sets."""
    if config.num_warmup_replicas <= 0:
        return {m: TasksTuple(t.active, t.standby) for m, t in target.items()}
    stateful_ids = frozenset(stateful)
    owner: dict[Task, str] = {}
    reported = 0
    for member_id in sorted(members, reverse=True):  # a task reported twice: the lowest id counts
        running = members[member_id].current.active
        if running:
            owner.update(dict.fromkeys(running, member_id))
            reported += len(running)
    once = reported == len(owner)  # no task reported twice: a newcomer owns what it runs
    ends = group_end_offsets(members.values())
    held: list[tuple[int, Task, str, str]] = []
    for newcomer in sorted(target):
        incoming = members.get(newcomer)
        if incoming is None or not incoming.offsets.reported:
            continue
        moving = target[newcomer].active - incoming.current.active if once else target[newcomer].active
        for task in moving:
            current = owner.get(task)
            if current is None or current == newcomer or current not in target or task[0] not in stateful_ids:
                continue
            if members[current].process_id == incoming.process_id:
                continue
            task_lag = lag(incoming, task, ends)
            if (task_lag is not None and task_lag <= config.acceptable_recovery_lag) or (newcomer, task) in stalled:
                continue  # caught up, or stalled: promoted now
            held.append((0 if task in incoming.current.warmup else 1, task, newcomer, current))
    if not held:
        return {m: TasksTuple(t.active, t.standby) for m, t in target.items()}
    active: dict[str, set[Task]] = {}  # copies of the target's sets, for the members that change
    standby: dict[str, set[Task]] = {}
    warmup: dict[str, set[Task]] = {}
    process_members: dict[str, list[str]] = {}
    for member_id in target:
        if member_id in members:
            process_members.setdefault(members[member_id].process_id, []).append(member_id)
    budget = config.num_warmup_replicas
    for _, task, newcomer, current in sorted(held):
        _copy(active, newcomer, target).discard(task)
        _copy(active, current, target).add(task)
        for member_id in process_members[members[current].process_id]:
            if task in target[member_id].standby:
                _copy(standby, member_id, target, False).discard(task)
        if budget > 0:
            warmup.setdefault(newcomer, set()).add(task)
            budget -= 1
    result: dict[str, TasksTuple] = {}
    for m, t in target.items():
        a, s, w = active.get(m), standby.get(m), warmup.get(m)
        result[m] = TasksTuple(t.active if a is None else frozenset(a), t.standby if s is None else frozenset(s),
                               NO_TASKS if w is None else frozenset(w))
    return result


def _copy(sets: dict[str, set[Task]], member_id: str, target: Mapping[str, TasksTuple],
          active: bool = True) -> set[Task]:
    found = sets.get(member_id)
    if found is None:
        found = sets[member_id] = set(target[member_id].active if active else target[member_id].standby)
    return found


def active_task_count(assignment: Mapping[str, TasksTuple]) -> int:
    return sum(len(t.active) for t in assignment.values())


def preserves_active_task_count(target: Mapping[str, TasksTuple], refined: Mapping[str, TasksTuple]) -> bool:
    """Kafka's safety check: a refined assignment hands out exactly the target's active tasks."""
    return active_task_count(target) == active_task_count(refined)
