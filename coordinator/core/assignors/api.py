"""The server-side assignor interface: what an assignor is given and what it returns.

This module owns the types shared by every KIP-848 server-side assignor, modelled on Kafka's
``org.apache.kafka.coordinator.group.api.assignor`` package:

- :class:`MemberSubscriptionSpec` - one member's subscribed topic ids, its current *target*
  assignment (the input for stickiness), rack id and ``group.instance.id``;
- :class:`GroupSpec` - the members by member id, with the :class:`SubscriptionType` derived from
  them (homogeneous iff every member subscribes to exactly the same set of topic ids);
- :class:`SubscribedTopicDescriber` - topic id -> partition count (and optionally partition
  racks), with :class:`SubscribedTopicMetadata` as the plain in-memory implementation;
- :data:`GroupAssignment` - member id -> topic id -> frozenset of partition numbers;
- :class:`PartitionAssignor` - the protocol every assignor implements;
- :class:`PartitionAssignorError` - raised for input no assignment can satisfy. The consumer group
  heartbeat turns it into ``UNKNOWN_SERVER_ERROR`` and persists nothing, as Kafka does.

Everything here is pure and deterministic: no clocks, randomness or I/O, and no result depends on
the iteration order of an input mapping or set.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import NamedTuple, Protocol, TypeAlias
from uuid import UUID

import msgspec

__all__ = [
    "GroupAssignment",
    "GroupSpec",
    "MemberAssignment",
    "MemberSubscriptionSpec",
    "PartitionAssignor",
    "PartitionAssignorError",
    "SubscribedTopicDescriber",
    "SubscribedTopicMetadata",
    "SubscriptionType",
    "TopicMetadata",
]

MemberAssignment: TypeAlias = dict[UUID, frozenset[int]]
"""One member's assignment: topic id -> partition numbers. Topics with no partition are absent."""

GroupAssignment: TypeAlias = dict[str, MemberAssignment]
"""The whole group's assignment: member id -> :data:`MemberAssignment`, one entry per member."""


class PartitionAssignorError(Exception):
    """The assignor cannot compute an assignment for this input (Kafka's PartitionAssignorException)."""


class SubscriptionType(enum.Enum):
    """Whether all members subscribe to the same topics (Kafka's ``SubscriptionType``)."""

    HOMOGENEOUS = "HOMOGENEOUS"
    HETEROGENEOUS = "HETEROGENEOUS"


_NO_PARTITIONS: Mapping[UUID, frozenset[int]] = MappingProxyType({})


def _no_partitions() -> Mapping[UUID, frozenset[int]]:
    return _NO_PARTITIONS


class MemberSubscriptionSpec(msgspec.Struct, frozen=True, gc=False):
    """What the assignor knows about one member.

    ``assigned_partitions`` is the member's current *target* assignment (for a static member that
    replaces a departed one: the departed incarnation's target). Assignors treat it as a hint only:
    entries for topics the member no longer subscribes to, partition numbers outside the topic and
    partitions also claimed by an earlier member (in member id order) are ignored.
    """

    subscribed_topic_ids: frozenset[UUID]
    assigned_partitions: Mapping[UUID, frozenset[int]] = msgspec.field(default_factory=_no_partitions)
    rack_id: str | None = None
    instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class GroupSpec:
    """The members to assign, by member id; the subscription type is derived from them."""

    members: Mapping[str, MemberSubscriptionSpec]
    sorted_member_ids: tuple[str, ...] = field(init=False, repr=False, compare=False)
    subscription_type: SubscriptionType = field(init=False, compare=False)

    def __post_init__(self) -> None:
        member_ids = tuple(sorted(self.members))
        object.__setattr__(self, "sorted_member_ids", member_ids)
        homogeneous = True
        if member_ids:
            first = self.members[member_ids[0]].subscribed_topic_ids
            homogeneous = all(
                self.members[member_id].subscribed_topic_ids == first for member_id in member_ids
            )
        object.__setattr__(
            self,
            "subscription_type",
            SubscriptionType.HOMOGENEOUS if homogeneous else SubscriptionType.HETEROGENEOUS,
        )


class TopicMetadata(NamedTuple):
    """A topic as the assignors see it. Racks are optional and unused by the built-in assignors."""

    name: str
    num_partitions: int
    partition_racks: Mapping[int, frozenset[str]] | None = None


class SubscribedTopicDescriber(Protocol):
    """Topic metadata lookups an assignor may make (Kafka's ``SubscribedTopicDescriber``)."""

    def num_partitions(self, topic_id: UUID) -> int | None:
        """The topic's partition count, or ``None`` if the topic does not exist."""
        ...

    def racks_for_partition(self, topic_id: UUID, partition: int) -> frozenset[str]:
        """The racks of the partition's replicas; empty when unknown."""
        ...


class SubscribedTopicMetadata:
    """:class:`SubscribedTopicDescriber` over a mapping of topic id -> :class:`TopicMetadata`."""

    __slots__ = ("_topics",)

    def __init__(self, topics: Mapping[UUID, TopicMetadata]) -> None:
        self._topics = topics

    def num_partitions(self, topic_id: UUID) -> int | None:
        topic = self._topics.get(topic_id)
        return None if topic is None else topic.num_partitions

    def racks_for_partition(self, topic_id: UUID, partition: int) -> frozenset[str]:
        topic = self._topics.get(topic_id)
        if topic is None or topic.partition_racks is None:
            return frozenset()
        return topic.partition_racks.get(partition, frozenset())

    def topic_name(self, topic_id: UUID) -> str | None:
        topic = self._topics.get(topic_id)
        return None if topic is None else topic.name


class PartitionAssignor(Protocol):
    """A server-side assignor (Kafka's ``ConsumerGroupPartitionAssignor``)."""

    @property
    def name(self) -> str:
        """The name members request in ``ServerAssignor`` and ``group.consumer.assignors`` lists."""
        ...

    def assign(self, group_spec: GroupSpec, topics: SubscribedTopicDescriber) -> GroupAssignment:
        """The new target assignment; every member of ``group_spec`` has an entry.

        Raises :class:`PartitionAssignorError` when no assignment can be computed (for example a
        member subscribed to a topic the describer does not know).
        """
        ...
