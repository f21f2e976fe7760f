"""The share group type's version-free requests and responses, as the shard sees them.

The API adapters (``runtime/apis/share_group_*.py``) turn the wire into these and back. A response
that describes groups carries the descriptions :mod:`.describe` builds (``protocol.build`` turns
them into any version's entity).
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

import msgspec

from coordinator.core.errors import ErrorCode


class ShareGroupHeartbeat(msgspec.Struct, frozen=True, gc=False):
    """A ShareGroupHeartbeat; ``None`` fields mean "unchanged since the last heartbeat"."""

    ref: int
    group_id: str
    member_id: str
    member_epoch: int  # 0 join, -1 leave, > 0 heartbeat
    rack_id: str | None = None
    subscribed_topic_names: tuple[str, ...] | None = None
    client_id: str = ""
    client_host: str = ""


class ShareGroupHeartbeatResponse(msgspec.Struct, frozen=True, gc=False):
    error_code: ErrorCode
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: tuple[tuple[UUID, tuple[int, ...]], ...] | None = None
    """(topic id, partitions), or None: unchanged, not sent."""
    to_initialize: tuple[tuple[UUID, int], ...] = ()
    """Subscribed share partitions without state yet: the edge finds their start offsets in the log
    (``share.auto.offset.reset``) and sends :class:`ShareInitialize`."""


class ShareGroupDescribe(msgspec.Struct, frozen=True, gc=False):
    ref: int
    group_ids: tuple[str, ...]


class ShareGroupDescribeResponse(msgspec.Struct, frozen=True, gc=False):
    groups: tuple[dict[str, Any], ...]
    """One ``Groups`` entry per group id asked, as :func:`.describe.describe_group` describes it."""


class ShareInitialize(msgspec.Struct, frozen=True, gc=False):
    """Start share partitions of a group at the offsets the edge found in the log (Kafka's
    ``initializeShareGroupState`` after a heartbeat named them): (topic id, partition, start offset).
    A partition that has state already is left alone, so a repeated or racing request is harmless."""

    ref: int
    group_id: str
    partitions: tuple[tuple[UUID, int, int], ...]


class ShareInitializeResponse(msgspec.Struct, frozen=True, gc=False):
    error_code: ErrorCode
    initialized: int = 0
