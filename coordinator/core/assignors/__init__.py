"""KIP-848 server-side partition assignors (``uniform``, ``range``), pure and deterministic.

This package owns the target-assignment *computation* only: given the members (subscriptions,
current target assignment, rack, instance id) and the subscribed topics' partition counts, return
each member's new target assignment. Choosing the assignor, resolving topic names and regexes to
ids, diffing against the previous target and writing records belong to the consumer group code.

- :mod:`.api` - the interface types (:class:`GroupSpec`, :class:`MemberSubscriptionSpec`,
  :class:`PartitionAssignor`, ...);
- :mod:`.uniform` - Kafka's default assignor (theory of operation there), with its homogeneous and
  heterogeneous builders;
- :mod:`.range_assignor` - the co-partitioning range assignor;
- :mod:`.registry` - :data:`ASSIGNORS` by name and ``group.consumer.assignors`` parsing.
"""

from coordinator.core.assignors.api import (
    GroupAssignment,
    GroupSpec,
    MemberAssignment,
    MemberSubscriptionSpec,
    PartitionAssignor,
    PartitionAssignorError,
    SubscribedTopicDescriber,
    SubscribedTopicMetadata,
    SubscriptionType,
    TopicMetadata,
)
from coordinator.core.assignors.range_assignor import RangeAssignor
from coordinator.core.assignors.registry import (
    ASSIGNORS,
    CONSUMER_GROUP_ASSIGNORS_CONFIG,
    CONSUMER_GROUP_ASSIGNORS_DEFAULT,
    consumer_group_assignors,
)
from coordinator.core.assignors.uniform import UniformAssignor

__all__ = [
    "ASSIGNORS",
    "CONSUMER_GROUP_ASSIGNORS_CONFIG",
    "CONSUMER_GROUP_ASSIGNORS_DEFAULT",
    "GroupAssignment",
    "GroupSpec",
    "MemberAssignment",
    "MemberSubscriptionSpec",
    "PartitionAssignor",
    "PartitionAssignorError",
    "RangeAssignor",
    "SubscribedTopicDescriber",
    "SubscribedTopicMetadata",
    "SubscriptionType",
    "TopicMetadata",
    "UniformAssignor",
    "consumer_group_assignors",
]
