"""Kafka's sticky task assignor for streams groups (``StickyTaskAssignor``, name ``sticky``),
deterministic.

Input: the members (process id, the tasks each holds now, the task offsets it reported), the
subtopologies (number of tasks, stateful or not) and ``num.standby.replicas``. Output: each
member's active and standby tasks; the assignor never places warm-ups (``warmup.py`` does).

How, as Kafka does it:

- Quotas: ``ceil(active tasks / members)`` active tasks per member and ``ceil((active + stateful x
  standby replicas) / members)`` tasks per member; when a member reaches a quota it leaves the
  divisor and the quota is recomputed, so the remainder spreads evenly.
- Active tasks (sorted by partition, then subtopology): back to the member that holds it, if below
  the active quota; then to the least loaded of the members that hold it as a standby (or, Apache
  trunk's KAFKA-20719, reported offsets for it: the state is on their disk), if below the quota;
  the rest (sorted by subtopology, then partition: range-like) to the least loaded member of the
  least loaded process.
- Standby tasks of stateful subtopologies, ``num.standby.replicas`` of each: to the previous active
  owner, then to previous standby holders, if their process does not hold the task and they are
  below the total quota; the rest to the least loaded process that does not hold the task
  (KAFKA-20899: every process is tried). A process never holds a task twice; a standby that finds
  no such process is not placed (Kafka logs that capacity is missing).

Kafka breaks ties by hash-map and heap order; here every tie is broken by process id and member
id, so the same input always gives the same assignment (a new coordinator after a failover
computes what the old one would have).

How it is fast enough (Kafka's benchmark shapes, 1,000 members and 15,000 tasks, are timed by
``bench/streams_assignor_bench.py``; BENCHMARKS.md has the numbers): tasks, members and processes
are list indexes (ids sorted, so comparing indexes breaks ties as comparing ids would), the task
table is built once per topology, the sticky passes keep the quotas in locals, and the range-like
passes serve processes level by level of load instead of through a heap of processes. The code
before this (tests/core/streams/oracle.py) is kept as the oracle: the tests hold the two equal
on every input. The passes are modules of their own: the working state (`assignor_state.py`),
the active pass (`assignor_active.py`), the standby pass (`assignor_standby.py`).
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from .assignor_active import assign_active
from .assignor_standby import assign_standby
from .assignor_state import AssignmentState, task_table
from .tasks import NO_TASKS, Task, TasksTuple


class AssignorMember(msgspec.Struct, frozen=True):
    """What the assignor knows of a member (Kafka's ``MemberAssignmentState`` and metadata)."""

    process_id: str
    active: frozenset[Task] = NO_TASKS
    standby: frozenset[Task] = NO_TASKS
    task_offsets: Mapping[Task, int] = msgspec.field(default_factory=dict)
    """Changelog offset sums the member reported (v1 only); state it has on disk."""


class SubtopologySpec(msgspec.Struct, frozen=True):
    number_of_tasks: int
    stateful: bool


class AssignorError(Exception):
    """No member can take a task (an empty group): Kafka's ``TaskAssignorException``."""


def assign(members: Mapping[str, AssignorMember], subtopologies: Mapping[str, SubtopologySpec],
           num_standby_replicas: int) -> dict[str, TasksTuple]:
    """The target assignment: member id -> its active and standby tasks. Tasks of subtopologies or
    partitions the topology does not have are ignored."""
    if not members:
        if any(s.number_of_tasks for s in subtopologies.values()):
            raise AssignorError("No process available to assign active tasks.")
        return {}
    tasks = task_table(subtopologies)
    state = AssignmentState(members, tasks, num_standby_replicas)
    assign_active(state, tasks)
    if num_standby_replicas > 0:
        assign_standby(state, tasks.stateful_by_partition[::-1])
    return state.results(members, tasks)
