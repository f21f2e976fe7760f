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

from coordinator.core.assignors._helpers import partition_counts, subscribers_by_topic
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
        ordered = range_member_order(group_spec)
        subscribers = subscribers_by_topic(ordered, group_spec.members)
        counts = partition_counts(subscribers, topics)

        # Topics with the same partition count and the same subscribers (topics subscribed by the
        # same members share one list object) give every subscriber the same range: one class
        # per (count, subscribers). In a co-partitioned group there is a single class.
        classes: dict[tuple[int, int], list[UUID]] = {}
        for topic_id, count in counts.items():  # ascending topic id order
            classes.setdefault((count, id(subscribers[topic_id])), []).append(topic_id)

        rank_of = {topic_id: rank for rank, topic_id in enumerate(counts)}
        ranges: dict[tuple[int, int], frozenset[int]] = {}
        # Per member position: (class topics as a dict, their ranks, the member's range).
        shares: list[list[tuple[dict[UUID, None], list[int], frozenset[int]]]] = [
            [] for _ in ordered
        ]
        for (count, _), class_topics in classes.items():
            template = dict.fromkeys(class_topics)
            ranks = [rank_of[topic_id] for topic_id in class_topics]
            class_subscribers = subscribers[class_topics[0]]
            quota, extra = divmod(count, len(class_subscribers))
            start = 0
            for rank, position in enumerate(class_subscribers):
                end = start + quota + (1 if rank < extra else 0)
                if end == start:
                    break  # every later subscriber gets nothing of these topics either
                partitions = ranges.get((start, end))
                if partitions is None:
                    partitions = ranges[start, end] = frozenset(range(start, end))
                shares[position].append((template, ranks, partitions))
                start = end

        by_member_id: dict[str, MemberAssignment] = {}
        for member_id, member_shares in zip(ordered, shares, strict=True):
            if len(member_shares) == 1:
                # Copying from a dict reuses its stored hashes: no UUID.__hash__ calls.
                template, _, partitions = member_shares[0]
                by_member_id[member_id] = dict.fromkeys(template, partitions)
            else:  # keys in ascending topic id order across classes
                entries = sorted(
                    (rank, topic_id, partitions)
                    for template, ranks, partitions in member_shares
                    for rank, topic_id in zip(ranks, template, strict=True)
                )
                by_member_id[member_id] = {t: p for _, t, p in entries}
        return {member_id: by_member_id[member_id] for member_id in group_spec.sorted_member_ids}

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
