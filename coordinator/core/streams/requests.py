"""The streams group type's own core requests and responses (the version-free shapes the API
adapters build and read): StreamsGroupHeartbeat and StreamsGroupDescribe.

The heartbeat's response is the description ``heartbeat.heartbeat`` builds (Kafka's field names),
so the adapter hands it to ``protocol.build`` as it is; ``internal_topics`` are the topics the
heartbeat asks the node to create (repartition and changelog topics, Kafka's ``Topic creation``
step), which the edge creates in the embedded catalog.
"""

from __future__ import annotations

from typing import Any

import msgspec

from ..errors import ErrorCode
from .heartbeat_request import StreamsHeartbeat
from .topology import InternalTopic


class StreamsGroupHeartbeat(msgspec.Struct, frozen=True, gc=False):
    ref: int
    heartbeat: StreamsHeartbeat
    client_id: str
    client_host: str


class StreamsGroupHeartbeatResponse(msgspec.Struct, frozen=True, gc=False):
    error_code: ErrorCode
    error_message: str | None = None
    body: dict[str, Any] = msgspec.field(default_factory=dict)
    internal_topics: tuple[InternalTopic, ...] = ()


class StreamsGroupDescribe(msgspec.Struct, frozen=True, gc=False):
    ref: int
    group_ids: tuple[str, ...]


class StreamsGroupDescribeResponse(msgspec.Struct, frozen=True, gc=False):
    groups: tuple[dict[str, Any], ...]
    """One description per group id (Kafka's field names; ``error_code`` set on each)."""
