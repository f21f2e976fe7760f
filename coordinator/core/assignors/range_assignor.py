"""The ``range`` server-side assignor (Kafka's ``RangeAssignor``, as rewritten in 3.9 by KAFKA-16944).

Rules, per topic: the members subscribed to the topic, in the *member order* below, receive
contiguous ranges of its partitions; with ``n`` partitions and ``m`` subscribers the first
``n % m`` subscribers get ``n // m + 1`` partitions and the others ``n // m`` (so with more members
than partitions the last ones get none of that topic).

Member order: static members (with a ``group.instance.id``) first, by instance id; then dynamic
members by member id. Strings compare as Java's ``String.compareTo`` does (UTF-16 code units).

Consequences:

- Co-partitioning: when all members subscribe to the same topics and those topics have the same
  partition count, every member gets the same partition numbers of every topic.
- The result is a function of (member order, subscriptions, partition counts) only. The current
  assignment is *not* an input, exactly as in Kafka 4.x: stickiness comes only from a stable
  order, which static members keep across restarts (a new dynamic member id can shift ranges).
  Re-running with unchanged inputs therefore always returns the same assignment.
- A subscribed topic unknown to the describer raises :class:`PartitionAssignorError`, as in Kafka.
"""

from __future__ import annotations

from typing import Final
from uuid import UUID

from coordinator.core.assignors._helpers import partition_counts
from coordinator.core.assignors.api import (
    GroupAssignment,
    GroupSpec,
    MemberAssignment,
    SubscribedTopicDescriber,
)

__all__ = ["RangeAssignor", "range_member_order"]


class RangeAssignor:
    """Contiguous ranges per topic in member order; co-partitions homogeneous groups."""

    NAME: Final = "range"

    @property
    def name(self) -> str:
        return self.NAME

    def assign(self, group_spec: GroupSpec, topics: SubscribedTopicDescriber) -> GroupAssignment:
        members = group_spec.members
        ordered = range_member_order(group_spec)

        subscribers: dict[UUID, list[int]] = {}
        for position, member_id in enumerate(ordered):
            for topic_id in members[member_id].subscribed_topic_ids:
                subscribers.setdefault(topic_id, []).append(position)
        num_partitions = partition_counts(subscribers, topics)

        assignments: list[MemberAssignment] = [{} for _ in ordered]
        # Equal ranges recur across topics with equal partition and subscriber counts (always in
        # a co-partitioned group): share one frozenset per (start, end).
        ranges: dict[tuple[int, int], frozenset[int]] = {}
        for topic_id, count in num_partitions.items():  # ascending topic id order
            topic_subscribers = subscribers[topic_id]
            quota, extra = divmod(count, len(topic_subscribers))
            start = 0
            for rank, position in enumerate(topic_subscribers):
                end = start + quota + (1 if rank < extra else 0)
                if end == start:
                    break  # every later subscriber gets nothing of this topic either
                key = (start, end)
                partitions = ranges.get(key)
                if partitions is None:
                    partitions = ranges[key] = frozenset(range(start, end))
                assignments[position][topic_id] = partitions
                start = end

        by_position = dict(zip(ordered, assignments, strict=True))
        return {member_id: by_position[member_id] for member_id in group_spec.sorted_member_ids}

    def __repr__(self) -> str:
        return "RangeAssignor()"


def range_member_order(group_spec: GroupSpec) -> list[str]:
    """Static members by instance id, then dynamic members by member id (Kafka's ``sortMemberIds``)."""
    members = group_spec.members

    def key(member_id: str) -> tuple[int, bytes, bytes]:
        instance_id = members[member_id].instance_id
        if instance_id is not None:
            return (0, _java_order(instance_id), _java_order(member_id))
        return (1, b"", _java_order(member_id))

    return sorted(group_spec.sorted_member_ids, key=key)


def _java_order(text: str) -> bytes:
    """A key that orders strings like Java's ``String.compareTo`` (by UTF-16 code unit)."""
    return text.encode("utf-16-be", "surrogatepass")
