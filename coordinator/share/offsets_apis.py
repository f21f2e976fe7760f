"""The share group offsets APIs: DescribeShareGroupOffsets (90) v0-v1, AlterShareGroupOffsets (91) v0
and DeleteShareGroupOffsets (92) v0, served by the shard in either mode (they touch only the
coordinator's own share-partition state; the lag needs the log end, which the mode supplies).

Version notes: all flexible; Describe v1 (KIP-1226) adds each partition's ``Lag``: the log end
minus the start offset minus the records finished above it (-1 when the log end is unknown).

Authorization, as Kafka's ``KafkaApis`` handlers:

- Describe: DESCRIBE on each group (a refused one answers GROUP_AUTHORIZATION_FAILED), and topics
  the principal may not DESCRIBE are left out of the answer silently.
- Alter: READ on the group (the whole request GROUP_AUTHORIZATION_FAILED), READ on each topic
  (its partitions TOPIC_AUTHORIZATION_FAILED).
- Delete: DELETE on the group (whole request), READ on each topic (the topic
  TOPIC_AUTHORIZATION_FAILED).

What Alter and Delete do to the state is the core's (``core/share/offsets.py``): both need an
empty group (NON_EMPTY_GROUP), an id of another type is GROUP_ID_NOT_FOUND, and their records
(the new start offset with a new state epoch, or the tombstones) are one log entry.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol
from uuid import UUID

from protocol.errors import ErrorCode

from ..api.authorization import DELETE, DESCRIBE, GROUP, READ, TOPIC, InHandler, allowed
from ..api.declaration import SidecarRoute
from ..api.placement import GroupEntries, OneGroup
from ..api.registry import ApiHandler, RequestContext
from ..core.share.registration import ShareGroupType
from ..core.share.requests import (
    AlterShareGroupOffsets,
    DeleteShareGroupOffsets,
    DescribeShareGroupOffsets,
    DescribeShareGroupOffsetsResponse,
    ShareOffsetsResponse,
)
from ..runtime.apis.group_api import group_api
from ..runtime.shard import ShardRuntime

AskedTopic = tuple[str, UUID | None, tuple[int, ...]]  # name, id (None: not in the metadata), partitions
AskedGroup = tuple[str, tuple[AskedTopic, ...] | None]  # None: every partition the group has state for

DESCRIBE_SHARE_GROUP_OFFSETS = 90
ALTER_SHARE_GROUP_OFFSETS = 91
DELETE_SHARE_GROUP_OFFSETS = 92


class EndOffsets(Protocol):
    """A partition's log end offset (for the lag), or None when it cannot be read now."""

    def __call__(self, topic_id: UUID, partition: int) -> int | None: ...


def share_offsets_handlers(shard: Callable[[], ShardRuntime | None], ends: EndOffsets | None) -> list[ApiHandler]:
    return [describe_share_group_offsets(shard, ends), alter_share_group_offsets(shard),
            delete_share_group_offsets(shard)]


def _share(runtime: ShardRuntime | None) -> ShareGroupType | None:
    share = runtime.core.types.get("share") if runtime is not None else None
    return share if isinstance(share, ShareGroupType) else None


# ---- Describe ---------------------------------------------------------------------------------------

def describe_share_group_offsets(shard: Callable[[], ShardRuntime | None], ends: EndOffsets | None) -> ApiHandler:
    def to_core(ctx: RequestContext, r: Any, ref: int) -> DescribeShareGroupOffsets:
        runtime = shard()
        groups: list[AskedGroup] = []
        for g in r.groups:
            if not allowed(ctx, DESCRIBE, GROUP, g.group_id):
                continue
            if g.topics is None:
                groups.append((g.group_id, None))
                continue
            topics: list[AskedTopic] = []
            for t in g.topics:
                if not allowed(ctx, DESCRIBE, TOPIC, t.topic_name):
                    continue  # Kafka leaves such topics out of the answer, without an error
                info = runtime.core.topics.by_name(t.topic_name) if runtime is not None else None
                topics.append((t.topic_name, info.topic_id if info is not None else None,
                               tuple(int(p) for p in t.partitions)))
            groups.append((g.group_id, tuple(topics)))
        return DescribeShareGroupOffsets(ref, tuple(groups), _log_ends(runtime, ends, groups))

    def to_wire(ctx: RequestContext, r: Any, resp: DescribeShareGroupOffsetsResponse) -> dict[str, Any]:
        answered = iter(resp.groups)
        out = []
        for g in r.groups:
            if not allowed(ctx, DESCRIBE, GROUP, g.group_id):
                out.append(_refused_group(g.group_id, ErrorCode.GROUP_AUTHORIZATION_FAILED))
                continue
            group = next(answered)
            if g.topics is None:
                # "all topics": those the principal may see
                group = {**group, "topics": [t for t in group["topics"] if allowed(ctx, DESCRIBE, TOPIC,
                                                                                    t["topic_name"])]}
            out.append(group)
        return {"throttle_time": 0, "groups": out}

    def on_error(ctx: RequestContext, r: Any, code: int) -> dict[str, Any]:
        return {"throttle_time": 0, "groups": [_refused_group(g.group_id, code) for g in r.groups]}

    return group_api(shard, DESCRIBE_SHARE_GROUP_OFFSETS, 0, 1, to_core, to_wire, on_error,
                     authorization=InHandler("DESCRIBE each group; topics without DESCRIBE left out"),
                     placement=GroupEntries("groups", "groups", _refused_group), sidecar=SidecarRoute.SERVED)


def _log_ends(runtime: ShardRuntime | None, ends: EndOffsets | None,
              groups: list[AskedGroup]) -> tuple[tuple[UUID, int, int], ...]:
    """The log end of every partition the answer will name (for "all topics": the partitions the
    group has state for, a read-only look at the core's state; the core decides what it answers)."""
    share = _share(runtime)
    if ends is None or share is None:
        return ()
    wanted: set[tuple[UUID, int]] = set()
    for group_id, topics in groups:
        if topics is None:
            wanted.update((p.key.topic_id, p.key.partition) for p in share.partitions.of_group(group_id))
        else:
            wanted.update((t, i) for _, t, indexes in topics if t is not None for i in indexes)
    out = []
    for topic_id, partition in wanted:
        end = ends(topic_id, partition)
        if end is not None:
            out.append((topic_id, partition, end))
    return tuple(out)


def _refused_group(group_id: str, code: int) -> dict[str, Any]:
    return {"group_id": group_id, "error_code": code, "error_message": None, "topics": []}


# ---- Alter ------------------------------------------------------------------------------------------

def alter_share_group_offsets(shard: Callable[[], ShardRuntime | None]) -> ApiHandler:
    def precheck(ctx: RequestContext, r: Any) -> int | None:
        return None if allowed(ctx, READ, GROUP, r.group_id) else ErrorCode.GROUP_AUTHORIZATION_FAILED

    def to_core(ctx: RequestContext, r: Any, ref: int) -> AlterShareGroupOffsets:
        return AlterShareGroupOffsets(ref, r.group_id, tuple(
            (t.topic_name, tuple((int(p.partition_index), int(p.start_offset)) for p in t.partitions))
            for t in r.topics if allowed(ctx, READ, TOPIC, t.topic_name)))

    def to_wire(ctx: RequestContext, r: Any, resp: ShareOffsetsResponse) -> dict[str, Any]:
        answered = {name: (topic_id, codes) for name, topic_id, codes in resp.topics}
        responses = []
        if not resp.error_code:
            for t in r.topics:
                if t.topic_name in answered:
                    topic_id, codes = answered[t.topic_name]
                    rows = [{"partition_index": i, "error_code": c} for i, c in codes]
                else:  # left out: the principal may not READ it
                    topic_id = None
                    rows = [{"partition_index": p.partition_index, "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED}
                            for p in t.partitions]
                responses.append({"topic_name": t.topic_name, "topic_id": topic_id or UUID(int=0), "partitions": rows})
        return {"throttle_time": 0, "error_code": resp.error_code, "error_message": resp.error_message,
                "responses": responses}

    def on_error(ctx: RequestContext, r: Any, code: int) -> dict[str, Any]:
        return {"throttle_time": 0, "error_code": code, "error_message": None, "responses": []}

    return group_api(shard, ALTER_SHARE_GROUP_OFFSETS, 0, 0, to_core, to_wire, on_error, precheck,
                     authorization=InHandler("READ on the group, then READ on each topic"),
                     placement=OneGroup(), sidecar=SidecarRoute.SERVED)


# ---- Delete -----------------------------------------------------------------------------------------

def delete_share_group_offsets(shard: Callable[[], ShardRuntime | None]) -> ApiHandler:
    def precheck(ctx: RequestContext, r: Any) -> int | None:
        return None if allowed(ctx, DELETE, GROUP, r.group_id) else ErrorCode.GROUP_AUTHORIZATION_FAILED

    def to_core(ctx: RequestContext, r: Any, ref: int) -> DeleteShareGroupOffsets:
        return DeleteShareGroupOffsets(ref, r.group_id, tuple(
            t.topic_name for t in r.topics if allowed(ctx, READ, TOPIC, t.topic_name)))

    def to_wire(ctx: RequestContext, r: Any, resp: ShareOffsetsResponse) -> dict[str, Any]:
        answered = {name: (topic_id, dict(codes).get(None, ErrorCode.NONE)) for name, topic_id, codes in resp.topics}
        responses = []
        if not resp.error_code:
            for t in r.topics:
                topic_id, code = answered.get(t.topic_name, (None, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                responses.append({"topic_name": t.topic_name, "topic_id": topic_id or UUID(int=0), "error_code": code})
        return {"throttle_time": 0, "error_code": resp.error_code, "error_message": resp.error_message,
                "responses": responses}

    def on_error(ctx: RequestContext, r: Any, code: int) -> dict[str, Any]:
        return {"throttle_time": 0, "error_code": code, "error_message": None, "responses": []}

    return group_api(shard, DELETE_SHARE_GROUP_OFFSETS, 0, 0, to_core, to_wire, on_error, precheck,
                     authorization=InHandler("DELETE on the group, then READ on each topic"),
                     placement=OneGroup(), sidecar=SidecarRoute.SERVED)


__all__ = ["ALTER_SHARE_GROUP_OFFSETS", "DELETE_SHARE_GROUP_OFFSETS", "DESCRIBE_SHARE_GROUP_OFFSETS", "EndOffsets",
           "share_offsets_handlers"]
