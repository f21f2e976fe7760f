"""The group types one shard hosts, in one namespace (a group id names one group of one type).

Kafka keeps classic and consumer (KIP-848) groups in one map too: a ConsumerGroupHeartbeat for the id
of a classic group, or a JoinGroup for the id of a consumer group, sees the other type and answers
accordingly.
"""

from __future__ import annotations

from coordinator.core.classic.group import ClassicGroup
from coordinator.core.consumer.group import ConsumerGroup

Group = ClassicGroup | ConsumerGroup

__all__ = ["ClassicGroup", "ConsumerGroup", "Group"]
