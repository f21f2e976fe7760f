"""Tasks and task sets of streams groups (KIP-1071): the vocabulary every other module speaks.

A task is one partition of one subtopology, ``(subtopology_id, partition)``, Kafka's ``TaskId``. A
member holds three sets of them, Kafka's ``TasksTuple``: active tasks (it processes them), standby
tasks (it keeps a copy of their state) and warm-up tasks (a standby on its way to becoming the
active owner). Active tasks also carry the epoch at which they were granted (Kafka's
``TasksTupleWithEpochs``), so an offset commit at an older epoch can be checked per task.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import msgspec

Task = tuple[str, int]
"""``(subtopology_id, partition)``."""

NO_TASKS: frozenset[Task] = frozenset()


class TasksTuple(msgspec.Struct, frozen=True):
    """A member's active, standby and warm-up tasks (Kafka's ``TasksTuple``)."""

    active: frozenset[Task] = NO_TASKS
    standby: frozenset[Task] = NO_TASKS
    warmup: frozenset[Task] = NO_TASKS

    def is_empty(self) -> bool:
        return not (self.active or self.standby or self.warmup)

    def all_tasks(self) -> frozenset[Task]:
        return self.active | self.standby | self.warmup

    def contains_any(self, other: TasksTuple) -> bool:
        """Whether any task of ``other`` is held here in the same role."""
        return bool(self.active & other.active or self.standby & other.standby or self.warmup & other.warmup)


EMPTY = TasksTuple()


class TasksWithEpochs(msgspec.Struct, frozen=True):
    """Tasks with each active task's assignment epoch (Kafka's ``TasksTupleWithEpochs``)."""

    active: Mapping[Task, int] = msgspec.field(default_factory=dict)
    standby: frozenset[Task] = NO_TASKS
    warmup: frozenset[Task] = NO_TASKS

    def is_empty(self) -> bool:
        return not (self.active or self.standby or self.warmup)

    def tasks(self) -> TasksTuple:
        return TasksTuple(frozenset(self.active), self.standby, self.warmup)


NO_TASKS_WITH_EPOCHS = TasksWithEpochs()


def by_subtopology(tasks: Iterable[Task]) -> list[tuple[str, list[int]]]:
    """Tasks grouped as Kafka's ``TaskIds`` lists carry them: subtopologies sorted, partitions
    ascending (what responses and records hold)."""
    grouped: dict[str, list[int]] = {}
    for subtopology, partition in tasks:
        grouped.setdefault(subtopology, []).append(partition)
    return [(s, sorted(grouped[s])) for s in sorted(grouped)]


def from_task_ids(task_ids: Iterable[tuple[str, Iterable[int]]]) -> frozenset[Task]:
    """``TaskIds`` lists (subtopology, partitions) back to a task set."""
    return frozenset((subtopology, p) for subtopology, partitions in task_ids for p in partitions)
