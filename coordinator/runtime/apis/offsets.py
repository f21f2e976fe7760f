"""Offset APIs: OffsetCommit (8) v0–10, OffsetFetch (9) v0–10, OffsetDelete (47) v0.

Version notes:
- OffsetCommit v0 has no generation or member id (a simple commit: generation -1, member "");
  v1 adds a per-partition commit timestamp; v2–4 a retention time; v5 drops it; v6 adds the
  committed leader epoch; v7 the group instance id; v9 carries the member epoch of a KIP-848
  member (STALE_MEMBER_EPOCH). Throttle time from v3. v0–1 come from `protocol.legacy`. v10 (Kafka
  4.2) names topics by id instead of name, in the request and the response; the core resolves ids
  (UNKNOWN_TOPIC_ID for an id it does not know).
- OffsetFetch v0–1 report group-level errors inside every partition; v2–7 carry a top-level
  ErrorCode and accept null topics (= all committed offsets); v5 adds the leader epoch; v7
  RequireStable; v8+ batch several groups (KIP-709) with a per-group error; v9 adds member id and
  epoch. v10 names topics by id (request and response; UNKNOWN_TOPIC_ID per partition for an unknown
  id; a fetch of every committed offset lists only topics that still exist, by id). v0 comes from
  `protocol.legacy`.
- OffsetDelete v0: GROUP_SUBSCRIBED_TO_TOPIC per partition for topics the live group consumes.

OffsetCommit of a topic, or a partition, the topic source does not know is answered
UNKNOWN_TOPIC_OR_PARTITION for those partitions, as Kafka's KafkaApis answers it (every version,
after the group and topic authorization, before the coordinator sees the rest; a commit left with
nothing is answered without it). The source is the catalog (a shared one re-reads its file when
another node changed it, and the shard hears of the change before this commit) or the sidecar's
view of the upstream (which the sidecar refreshes on such a miss, `Sidecar.serve_locally`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from uuid import UUID

from protocol.errors import ErrorCode

from ...api.authorization import DELETE, READ, CommitOffsets, FetchOffsets
from ...api.decision import Answered, Decision, Filtered
from ...api.declaration import SidecarRoute
from ...api.placement import ByVersion, GroupEntries, OneGroup
from ...api.registry import ApiHandler, RequestContext
from ...core import requests as core
from ..shard import ShardRuntime
from .group_api import group_api, ms

if TYPE_CHECKING:
    from ...catalog.source import TopicSource
    from ...core.topics import TopicsImage

ZERO_UUID = UUID(int=0)


TOPIC_IDS = 10
"""OffsetCommit and OffsetFetch name topics by id from this version on (Kafka 4.2)."""

LEADER_EPOCHS = 6
"""OffsetCommit carries the committed leader epoch from this version on (and has had no retention
time or commit timestamp since v5)."""


def offset_commit(shard: Callable[[], ShardRuntime | None], topics: TopicSource | None = None) -> ApiHandler:
    """`topics`: the node's topic source; partitions it does not know are refused (module notes)."""
    def to_core(ctx: RequestContext, r: Any, ref: int) -> core.OffsetCommit:
        version = ctx.api_version
        if LEADER_EPOCHS <= version < TOPIC_IDS:
            # What today's clients send: every partition field is in the request (no timestamp
            # since v2), so no per-partition lookups; topics by name; no retention time since v5.
            return core.OffsetCommit(
                ref=ref, group_id=r.group_id, generation_id_or_member_epoch=r.generation_id_or_member_epoch,
                member_id=r.member_id, group_instance_id=getattr(r, "group_instance_id", None),
                retention_time_ms=-1,
                topics=tuple(core.OffsetCommitTopic(t.name, tuple(
                    core.OffsetCommitPartition(p.partition_index, p.committed_offset, p.committed_leader_epoch,
                                               p.committed_metadata)
                    for p in t.partitions)) for t in r.topics),
                supports_member_epoch=version >= 9,
            )
        by_id = version >= TOPIC_IDS
        topics = tuple(
            core.OffsetCommitTopic("" if by_id else t.name, tuple(
                core.OffsetCommitPartition(
                    p.partition_index, p.committed_offset,
                    getattr(p, "committed_leader_epoch", -1),
                    p.committed_metadata,
                    getattr(p, "commit_timestamp", -1),
                ) for p in t.partitions), _topic_id(t) if by_id else None)
            for t in r.topics
        )
        return core.OffsetCommit(
            ref=ref, group_id=r.group_id,
            generation_id_or_member_epoch=getattr(r, "generation_id_or_member_epoch", -1),
            member_id=getattr(r, "member_id", ""),
            group_instance_id=getattr(r, "group_instance_id", None),
            retention_time_ms=ms(getattr(r, "retention_time", None)),
            topics=topics,
            supports_member_epoch=ctx.api_version >= 9,
        )

    def to_wire(ctx: RequestContext, r: Any, resp: Any) -> dict[str, Any]:
        # Before v9 a commit to an unknown group with a generation is ILLEGAL_GENERATION (the
        # comparison inline, not a call per partition).
        unknown_group = ErrorCode.GROUP_ID_NOT_FOUND if ctx.api_version < 9 else None
        illegal = ErrorCode.ILLEGAL_GENERATION
        return {"throttle_time": 0, "topics": [
            {**_topic(ctx, t.name, t.topic_id),
             "partitions": [{"partition_index": p.partition_index,
                             "error_code": illegal if p.error_code == unknown_group else p.error_code}
                            for p in t.partitions]} for t in resp.topics]}

    def on_error(ctx: RequestContext, r: Any, code: int) -> dict[str, Any]:
        return {"topics": [{**_request_topic(ctx, t),
                            "partitions": [{"partition_index": p.partition_index, "error_code": code}
                                           for p in t.partitions]} for t in r.topics]}

    known = None if topics is None else _known_partitions(topics)
    return group_api(shard, 8, 0, TOPIC_IDS, to_core, to_wire, on_error, known=known,
                     authorization=CommitOffsets(READ, READ, topics_by_id=True, answer_when_none_left=True),
                     placement=OneGroup(), sidecar=SidecarRoute.SERVED_AFTER_IMPORT)


def _known_partitions(source: TopicSource) -> Callable[[RequestContext, Any, TopicsImage], Decision]:
    """OffsetCommit's metadata check: the partitions of topics `source` does not know, and those
    past a known topic's count, are UNKNOWN_TOPIC_OR_PARTITION; the core gets the rest. A topic id
    (v10) the source does not know is left to the core, which answers UNKNOWN_TOPIC_ID."""
    unknown = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    def check(ctx: RequestContext, r: Any, _: TopicsImage) -> Decision:
        by_id = ctx.api_version >= TOPIC_IDS
        kept: list[Any] = []
        refused: list[tuple[Any, list[int]]] = []
        for t in r.topics:
            if by_id:
                info = source.by_id(_topic_id(t))
                if info is None:
                    kept.append(t)
                    continue
            else:
                info = source.get(t.name)
            count = 0 if info is None else info.num_partitions
            outside = [p.partition_index for p in t.partitions if not 0 <= p.partition_index < count]
            if not outside:
                kept.append(t)
                continue
            refused.append((t, outside))
            if len(outside) < len(t.partitions):
                kept.append(dataclasses.replace(t, partitions=tuple(
                    p for p in t.partitions if 0 <= p.partition_index < count)))
        if not refused:
            return None
        answers = [(_request_topic(ctx, t), [{"partition_index": i, "error_code": unknown} for i in indexes])
                   for t, indexes in refused]

        def merge(d: dict[str, Any]) -> dict[str, Any]:
            # One entry per topic, as Kafka's response builder keeps them: a topic partly refused
            # gets its refused partitions added to the entry the core answered.
            topics = [{**topic, "partitions": list(topic["partitions"])} for topic in d["topics"]]
            for identity, partitions in answers:
                entry = next((topic for topic in topics if all(topic.get(k) == v for k, v in identity.items())), None)
                if entry is None:
                    topics.append({**identity, "partitions": partitions})
                else:
                    entry["partitions"].extend(partitions)
            return {**d, "topics": topics}

        if not kept:  # nothing left to commit: Kafka answers without the coordinator
            return Answered(merge({"throttle_time": 0, "topics": []}))
        return Filtered(dataclasses.replace(r, topics=tuple(kept)), merge)

    return check


def _topic_id(topic: Any) -> UUID:
    # kio reads the all-zero id as None; Kafka's ZERO_UUID is an id no topic has.
    return topic.topic_id if topic.topic_id is not None else ZERO_UUID


def _topic(ctx: RequestContext, name: str, topic_id: UUID | None) -> dict[str, Any]:
    """A response topic's identity: its id from v10 on, its name before."""
    if ctx.api_version >= TOPIC_IDS:
        return {"topic_id": topic_id if topic_id is not None else ZERO_UUID}
    return {"name": name}


def _request_topic(ctx: RequestContext, topic: Any) -> dict[str, Any]:
    if ctx.api_version >= TOPIC_IDS:
        return {"topic_id": _topic_id(topic)}
    return {"name": topic.name}


def _fetch_groups(ctx: RequestContext, r: Any) -> tuple[core.OffsetFetchGroup, ...]:
    if ctx.api_version >= TOPIC_IDS:
        return tuple(
            core.OffsetFetchGroup(
                g.group_id, g.member_id, g.member_epoch,
                None if g.topics is None else tuple(
                    core.OffsetFetchTopic("", tuple(t.partition_indexes), _topic_id(t)) for t in g.topics))
            for g in r.groups)
    if ctx.api_version >= 8:
        return tuple(
            core.OffsetFetchGroup(
                g.group_id, getattr(g, "member_id", None), getattr(g, "member_epoch", -1),
                None if g.topics is None else tuple(core.OffsetFetchTopic(t.name, tuple(t.partition_indexes))
                                                    for t in g.topics))
            for g in r.groups)
    topics = None if r.topics is None else tuple(core.OffsetFetchTopic(t.name, tuple(t.partition_indexes))
                                                 for t in r.topics)
    return (core.OffsetFetchGroup(r.group_id, None, -1, topics),)


def _wire_topics(ctx: RequestContext, topics: Any) -> list[dict[str, Any]]:
    if ctx.api_version >= TOPIC_IDS:
        # A topic without an id (committed by name, since deleted) cannot be named: left out, as
        # KafkaApis leaves it out.
        topics = [t for t in topics if t.topic_id is not None]
    return [{**_topic(ctx, t.name, t.topic_id), "partitions": [
        {"partition_index": p.partition_index, "committed_offset": p.committed_offset,
         "committed_leader_epoch": p.committed_leader_epoch, "metadata": p.metadata, "error_code": p.error_code}
        for p in t.partitions]} for t in topics]


def offset_fetch(shard: Callable[[], ShardRuntime | None]) -> ApiHandler:
    def to_core(ctx: RequestContext, r: Any, ref: int) -> core.OffsetFetch:
        return core.OffsetFetch(ref=ref, groups=_fetch_groups(ctx, r), require_stable=getattr(r, "require_stable", False))

    def to_wire(ctx: RequestContext, r: Any, resp: Any) -> dict[str, Any]:
        if ctx.api_version >= 8:
            return {"throttle_time": 0, "groups": [
                {"group_id": g.group_id, "error_code": g.error_code, "topics": _wire_topics(ctx, g.topics)}
                for g in resp.groups]}
        (group,) = resp.groups
        if ctx.api_version >= 2:
            return {"throttle_time": 0, "error_code": group.error_code, "topics": _wire_topics(ctx, group.topics)}
        return {"topics": _lift_into_partitions(ctx, r, group)}

    def on_error(ctx: RequestContext, r: Any, code: int) -> dict[str, Any]:
        if ctx.api_version >= 8:
            return {"groups": [{"group_id": g.group_id, "error_code": code, "topics": []} for g in r.groups]}
        if ctx.api_version >= 2:
            return {"error_code": code, "topics": []}
        return {"topics": [{"name": t.name, "partitions": [
            {"partition_index": i, "committed_offset": -1, "metadata": "", "error_code": code}
            for i in t.partition_indexes]} for t in r.topics]}

    return group_api(shard, 9, 0, TOPIC_IDS, to_core, to_wire, on_error, authorization=FetchOffsets(),
                     placement=ByVersion(8, OneGroup(), GroupEntries("groups", "groups", _refused_group)),
                     sidecar=SidecarRoute.SERVED_AFTER_IMPORT)


def _refused_group(group_id: str, code: int) -> dict[str, Any]:
    """An OffsetFetch v8+ group answered with one code."""
    return {"group_id": group_id, "error_code": code, "topics": []}


def _lift_into_partitions(ctx: RequestContext, r: Any, group: Any) -> list[dict[str, Any]]:
    """v0–1 have no group-level error: Kafka reports it in every requested partition."""
    if not group.error_code:
        return _wire_topics(ctx, group.topics)
    return [{"name": t.name, "partitions": [
        {"partition_index": i, "committed_offset": -1, "metadata": "", "error_code": group.error_code}
        for i in t.partition_indexes]} for t in r.topics]


def offset_delete(shard: Callable[[], ShardRuntime | None]) -> ApiHandler:
    def to_core(ctx: RequestContext, r: Any, ref: int) -> core.OffsetDelete:
        return core.OffsetDelete(ref=ref, group_id=r.group_id, topics=tuple(
            core.OffsetDeleteTopic(t.name, tuple(p.partition_index for p in t.partitions)) for t in r.topics))

    def to_wire(ctx: RequestContext, r: Any, resp: Any) -> dict[str, Any]:
        return {"error_code": resp.error_code, "throttle_time": 0, "topics": [
            {"name": t.name, "partitions": [{"partition_index": p.partition_index, "error_code": p.error_code}
                                            for p in t.partitions]} for t in resp.topics]}

    def on_error(ctx: RequestContext, r: Any, code: int) -> dict[str, Any]:
        return {"error_code": code, "topics": []}

    return group_api(shard, 47, 0, 0, to_core, to_wire, on_error,
                     authorization=CommitOffsets(DELETE, READ, topics_by_id=False, answer_when_none_left=False),
                     placement=OneGroup(), sidecar=SidecarRoute.SERVED_AFTER_IMPORT)
