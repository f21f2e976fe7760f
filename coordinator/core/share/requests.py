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
    start_offsets: tuple[tuple[UUID, int, int], ...] = ()
    """(topic id, partition, start offset) of subscribed partitions without state, found by the
    edge in the log (``share.auto.offset.reset``): initialized in the same step, so a joining
    member is assigned them in its first answer instead of a heartbeat interval later."""


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


class ShareReadPartition(msgspec.Struct, frozen=True, gc=False):
    """What the edge read of one share partition's log for a ShareFetch: (base, last) offset of
    each batch read (ascending), the offset ranges of aborted transactions among them, and the log
    start offset; ``error_code``: the read failed (the partition is answered with it)."""

    topic_id: UUID
    partition: int
    log_start_offset: int = 0
    batches: tuple[tuple[int, int], ...] = ()
    aborted: tuple[tuple[int, int], ...] = ()
    error_code: ErrorCode = ErrorCode.NONE


class ShareAckPartition(msgspec.Struct, frozen=True, gc=False):
    """A partition's ``AcknowledgementBatches``: (first offset, last offset, acknowledge types)."""

    topic_id: UUID
    partition: int
    batches: tuple[tuple[int, int, tuple[int, ...]], ...]


class ShareFetch(msgspec.Struct, frozen=True, gc=False):
    """A ShareFetch (``acknowledge_only``: a ShareAcknowledge) with the edge's reads."""

    ref: int
    group_id: str
    member_id: str
    session_epoch: int
    connection_id: str
    api_version: int
    max_records: int = 0
    acquire_mode: int = 0
    is_renew_ack: bool = False
    added: tuple[tuple[UUID, int], ...] = ()
    forgotten: tuple[tuple[UUID, int], ...] = ()
    acks: tuple[ShareAckPartition, ...] = ()
    reads: tuple[ShareReadPartition, ...] = ()
    acknowledge_only: bool = False
    node: str = ""
    """The node the request was sent to, which keys its share session ("": the coordinator's own)."""


class SharePartitionAnswer(msgspec.Struct, frozen=True, gc=False):
    topic_id: UUID
    partition: int
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str | None = None
    ack_error_code: ErrorCode = ErrorCode.NONE
    ack_error_message: str | None = None
    acquired: tuple[tuple[int, int, int], ...] = ()
    """(first offset, last offset, delivery count) of each ``AcquiredRecords`` entry."""


class ShareFetchResponse(msgspec.Struct, frozen=True, gc=False):
    error_code: ErrorCode
    error_message: str | None = None
    lock_timeout_ms: int = 0
    partitions: tuple[SharePartitionAnswer, ...] = ()


class DescribeShareGroupOffsets(msgspec.Struct, frozen=True, gc=False):
    """DescribeShareGroupOffsets: per group, the topics asked (name, id or None when the metadata
    has no such topic, partitions), or None for every partition the group has state for.
    ``log_ends``: (topic id, partition, log end offset) the edge read, for the lag (v1)."""

    ref: int
    groups: tuple[tuple[str, tuple[tuple[str, UUID | None, tuple[int, ...]], ...] | None], ...]
    log_ends: tuple[tuple[UUID, int, int], ...] = ()


class DescribeShareGroupOffsetsResponse(msgspec.Struct, frozen=True, gc=False):
    groups: tuple[dict[str, Any], ...]
    """One ``Groups`` entry per group asked, as :func:`.describe.describe_offsets` describes it."""


class AlterShareGroupOffsets(msgspec.Struct, frozen=True, gc=False):
    """AlterShareGroupOffsets: per topic name, (partition, start offset) pairs."""

    ref: int
    group_id: str
    topics: tuple[tuple[str, tuple[tuple[int, int], ...]], ...]


class DeleteShareGroupOffsets(msgspec.Struct, frozen=True, gc=False):
    ref: int
    group_id: str
    topic_names: tuple[str, ...]


class ShareOffsetsResponse(msgspec.Struct, frozen=True, gc=False):
    """Alter's or Delete's answer: a top-level error, or per topic (name, id or None, and per
    partition index, or None for the whole topic (Delete), its error code)."""

    error_code: ErrorCode
    error_message: str | None = None
    topics: tuple[tuple[str, UUID | None, tuple[tuple[int | None, ErrorCode], ...]], ...] = ()


class ShareConnectionClosed(msgspec.Struct, frozen=True, gc=False):
    """A client connection closed: the share sessions it opened end and their members' acquired
    records come back at once (Kafka's ``ShareSessionCache`` connection listener)."""

    ref: int
    connection_id: str


class ShareConnectionClosedResponse(msgspec.Struct, frozen=True, gc=False):
    error_code: ErrorCode
    sessions: int = 0
    """How many share sessions the connection held."""


class DescribeSharePartitions(msgspec.Struct, frozen=True, gc=False):
    """This project's private DescribeSharePartitions: what is in flight in each share partition."""

    ref: int
    group_ids: tuple[str, ...]


class DescribeSharePartitionsResponse(msgspec.Struct, frozen=True, gc=False):
    groups: tuple[dict[str, Any], ...]
    """Per group asked: ``group_id``, ``error_code`` and ``partitions`` (``topic_name``,
    ``partition_index``, ``start_offset`` and the counts by state)."""
