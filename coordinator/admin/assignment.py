"""Decoding the embedded consumer protocol of classic groups whose protocol type is "consumer".

DescribeGroups returns each member's metadata (a ConsumerProtocolSubscription) and assignment (a
ConsumerProtocolAssignment) as opaque bytes. Both start with an int16 version; versions only append
fields, so a version newer than kio knows is read as the newest known one (its prefix), as Kafka's
`ConsumerProtocol` does. An empty assignment means the member has none yet (mid-rebalance).
"""

from __future__ import annotations

import importlib
import struct
from dataclasses import dataclass
from typing import Any

from kio.serial import entity_reader

_KNOWN_VERSIONS = range(4)
_ASSIGNMENTS: tuple[Any, ...] = tuple(
    importlib.import_module(f"kio.schema.consumer_protocol_assignment.v{v}.data").ConsumerProtocolAssignment
    for v in _KNOWN_VERSIONS
)
_SUBSCRIPTIONS: tuple[Any, ...] = tuple(
    importlib.import_module(f"kio.schema.consumer_protocol_subscription.v{v}.data").ConsumerProtocolSubscription
    for v in _KNOWN_VERSIONS
)
_VERSION = struct.Struct(">h")

Partitions = dict[str, list[int]]


@dataclass(frozen=True, slots=True)
class Subscription:
    topics: tuple[str, ...]
    generation_id: int | None
    """The generation the member last knew (v2+), None when absent or unknown (-1)."""


def _read(data: bytes, classes: tuple[Any, ...]) -> Any:
    (version,) = _VERSION.unpack_from(data, 0)
    if version < 0:
        raise ValueError(f"negative consumer protocol version {version}")
    cls = classes[min(version, len(classes) - 1)]
    try:
        value, _ = entity_reader(cls)(data, 2)
    except Exception as exc:  # kio raises several types for truncated or bad bytes
        raise ValueError(f"malformed consumer protocol v{version} data: {exc}") from exc
    return value


def decode_assignment(data: bytes) -> Partitions:
    """Topic → sorted partitions of a serialized ConsumerProtocolAssignment (empty bytes: none).

    Raises ValueError for bytes that are not an assignment."""
    if not data:
        return {}
    if len(data) < 2:
        raise ValueError("consumer protocol assignment shorter than its version")
    value = _read(data, _ASSIGNMENTS)
    partitions: Partitions = {}
    for item in value.assigned_partitions:
        partitions.setdefault(item.topic, []).extend(int(p) for p in item.partitions)
    return {topic: sorted(parts) for topic, parts in sorted(partitions.items())}


def decode_subscription(data: bytes) -> Subscription:
    """The topics and generation of a serialized ConsumerProtocolSubscription.

    Raises ValueError for bytes that are not a subscription."""
    if len(data) < 2:
        raise ValueError("consumer protocol subscription shorter than its version")
    value = _read(data, _SUBSCRIPTIONS)
    generation = int(getattr(value, "generation_id", -1))
    return Subscription(tuple(value.topics), generation if generation >= 0 else None)
