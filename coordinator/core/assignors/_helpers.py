"""Small pieces shared by the assignor implementations: partition-count lookup and output shaping."""

from __future__ import annotations

from collections.abc import Iterable
from uuid import UUID

from coordinator.core.assignors.api import (
    MemberAssignment,
    PartitionAssignorError,
    SubscribedTopicDescriber,
)


def partition_counts(
    topic_ids: Iterable[UUID], topics: SubscribedTopicDescriber
) -> dict[UUID, int]:
    """Partition count of every topic in ``topic_ids`` (in ascending topic id order).

    Raises :class:`PartitionAssignorError` if one does not exist, as Kafka's assignors do: the
    caller is expected to have dropped unknown topics when it resolved subscriptions to ids.
    """
    counts: dict[UUID, int] = {}
    for topic_id in sorted(topic_ids):
        count = topics.num_partitions(topic_id)
        if count is None or count < 0:
            raise PartitionAssignorError(
                f"Members are subscribed to topic {topic_id} which doesn't exist in the topic metadata."
            )
        counts[topic_id] = count
    return counts


def sorted_by_topic(assignment: MemberAssignment) -> MemberAssignment:
    """``assignment`` with its keys in ascending topic id order (a canonical, replayable shape)."""
    if len(assignment) < 2:
        return assignment
    return {topic_id: assignment[topic_id] for topic_id in sorted(assignment)}
