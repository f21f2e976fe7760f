"""Small pieces shared by the assignor implementations: subscriber lists and partition counts.

Performance note: ``uuid.UUID.__hash__`` is a Python-level method, so every dict or set operation
keyed by a topic id costs a Python call. The helpers here touch topic ids once per *distinct*
subscription set rather than once per member, relying on frozensets caching their own hash.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from itertools import chain
from uuid import UUID

from coordinator.core.assignors.api import (
    MemberSubscriptionSpec,
    PartitionAssignorError,
    SubscribedTopicDescriber,
)


def subscribers_by_topic(
    member_ids: Sequence[str], members: Mapping[str, MemberSubscriptionSpec]
) -> dict[UUID, list[int]]:
    """Topic id -> ascending positions in ``member_ids`` of the members subscribed to it.

    Topics subscribed by exactly the same members share one list object, so callers may group
    topics by the identity of their subscriber list. Callers must not mutate the lists.
    """
    by_subscription: dict[frozenset[UUID], list[int]] = {}
    for position, member_id in enumerate(member_ids):
        by_subscription.setdefault(members[member_id].subscribed_topic_ids, []).append(position)
    positions_of = list(by_subscription.values())

    subscription_numbers: dict[UUID, list[int]] = {}
    for number, subscription in enumerate(by_subscription):
        for topic_id in subscription:
            subscription_numbers.setdefault(topic_id, []).append(number)

    shared: dict[tuple[int, ...], list[int]] = {}
    result: dict[UUID, list[int]] = {}
    for topic_id, numbers in subscription_numbers.items():
        key = tuple(numbers)
        subscribers = shared.get(key)
        if subscribers is None:
            if len(numbers) == 1:
                subscribers = positions_of[numbers[0]]
            else:
                subscribers = sorted(chain.from_iterable(positions_of[n] for n in numbers))
            shared[key] = subscribers
        result[topic_id] = subscribers
    return result


def partition_counts(
    topic_ids: Iterable[UUID], topics: SubscribedTopicDescriber
) -> dict[UUID, int]:
    """Partition count of every topic in ``topic_ids``, in ascending topic id order.

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
