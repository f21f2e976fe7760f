"""Decoding the embedded consumer protocol of classic groups whose protocol type is "consumer".

DescribeGroups returns each member's metadata (a ConsumerProtocolSubscription) and assignment (a
ConsumerProtocolAssignment) as opaque bytes. Both start with an int16 version; versions only append
fields, so a version newer than the newest known one is read as that one (its prefix), as Kafka's
`ConsumerProtocol` does. An empty assignment means the member has none yet (mid-rebalance).
"""

from __future__ import annotations

from dataclasses import dataclass

from protocol.client import decode_consumer_protocol

Partitions = dict[str, list[int]]


@dataclass(frozen=True, slots=True)
class Subscription:
    topics: tuple[str, ...]
    generation_id: int | None
    """The generation the member last knew (v2+), None when absent or unknown (-1)."""


def decode_assignment(data: bytes) -> Partitions:
    """Topic → sorted partitions of a serialized ConsumerProtocolAssignment (empty bytes: none).

    Raises ValueError for bytes that are not an assignment."""
    if not data:
        return {}
    value = decode_consumer_protocol("assignment", data)
    partitions: Partitions = {}
    for item in value.assigned_partitions:
        partitions.setdefault(item.topic, []).extend(int(p) for p in item.partitions)
    return {topic: sorted(parts) for topic, parts in sorted(partitions.items())}


def decode_subscription(data: bytes) -> Subscription:
    """The topics and generation of a serialized ConsumerProtocolSubscription.

    Raises ValueError for bytes that are not a subscription."""
    value = decode_consumer_protocol("subscription", data)
    generation = int(getattr(value, "generation_id", -1))
    return Subscription(tuple(value.topics), generation if generation >= 0 else None)
