"""One group's OffsetFetch asked of the upstream and answered at the client's version.

A client may speak a newer OffsetFetch than the upstream (OffsetFetch v10 names topics by id, Kafka
4.2; an upstream Kafka 4.0 speaks up to v9), so the question is put at the highest version both
this code and the upstream speak, one group per request, and the answer is described version-free
and rendered at the client's version: topics by id from v10 (ids from the sidecar's catalog, which
is the upstream's), the group error where that version has it (top level for v2-7, per group from
v8, in every partition for v0-1). RequireStable is passed on as the client asked (v7+); the member
id and epoch (v9+) are not: the upstream sees no members, and they were checked here first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from protocol.build import build
from protocol.client import request_class

from .cluster import UpstreamCatalog

OFFSET_FETCH = 9
TOPIC_IDS = 10
HIGHEST = 10
"""The highest OffsetFetch version this module can put to the upstream."""


@dataclass(frozen=True, slots=True)
class Ask:
    group_id: str
    topics: tuple[tuple[str, tuple[int, ...]], ...] | None  # None: every committed offset
    require_stable: bool


@dataclass(frozen=True, slots=True)
class Fetched:
    """One partition of the upstream's answer."""

    partition_index: int
    committed_offset: int
    committed_leader_epoch: int
    metadata: str | None
    error_code: int


@dataclass(frozen=True, slots=True)
class Answer:
    error_code: int
    topics: tuple[tuple[str, tuple[Fetched, ...]], ...]


def asks(api_version: int, request: Any, groups: set[str], catalog: UpstreamCatalog) -> list[Ask]:
    """What the client asked of each group in `groups`, by topic name."""
    stable = bool(getattr(request, "require_stable", False))
    if api_version < 8:
        return [Ask(request.group_id, _names(api_version, request.topics, catalog), stable)]
    return [Ask(g.group_id, _names(api_version, g.topics, catalog), stable) for g in request.groups
            if g.group_id in groups]


def _names(api_version: int, topics: Any, catalog: UpstreamCatalog) -> tuple[tuple[str, tuple[int, ...]], ...] | None:
    if topics is None:
        return None
    out = []
    for t in topics:
        if api_version >= TOPIC_IDS:
            info = catalog.by_id(t.topic_id) if t.topic_id is not None else None
            if info is None:
                continue  # an id no topic has: nothing to ask (answered UNKNOWN_TOPIC_ID here)
            name = info.name
        else:
            name = t.name
        out.append((name, tuple(t.partition_indexes)))
    return tuple(out)


def request_at(version: int, ask: Ask) -> Any:
    """The upstream's OffsetFetch of `ask` at `version` (by name: at most v9 unless the caller
    maps ids; `HIGHEST` is only reached by a client that itself spoke v10 and an upstream that
    does too)."""
    topics = None if ask.topics is None else [{"name": n, "partition_indexes": list(ps)} for n, ps in ask.topics]
    if version >= 8:
        return build(request_class(OFFSET_FETCH, version), {
            "groups": [{"group_id": ask.group_id, "member_id": None, "member_epoch": -1, "topics": topics}],
            "require_stable": ask.require_stable})
    return build(request_class(OFFSET_FETCH, version), {
        "group_id": ask.group_id, "topics": topics, "require_stable": ask.require_stable})


def request_by_id(ask: Ask, catalog: UpstreamCatalog) -> Any:
    """v10: the same question naming topics by id."""
    topics = None
    if ask.topics is not None:
        topics = []
        for name, partitions in ask.topics:
            info = catalog.get(name)
            if info is not None:
                topics.append({"topic_id": info.topic_id, "partition_indexes": list(partitions)})
    return build(request_class(OFFSET_FETCH, TOPIC_IDS), {
        "groups": [{"group_id": ask.group_id, "member_id": None, "member_epoch": -1, "topics": topics}],
        "require_stable": ask.require_stable})


def answer_of(version: int, response: Any, catalog: UpstreamCatalog) -> Answer:
    if version >= 8:
        (group,) = response.groups
        code, topics = int(group.error_code), group.topics
    else:
        code, topics = int(getattr(response, "error_code", 0) or 0), response.topics
    out = []
    for t in topics or ():
        if version >= TOPIC_IDS:
            info = catalog.by_id(t.topic_id) if t.topic_id is not None else None
            if info is None:
                continue
            name = info.name
        else:
            name = str(t.name)
        out.append((name, tuple(Fetched(int(p.partition_index), int(p.committed_offset),
                                        int(getattr(p, "committed_leader_epoch", -1)), p.metadata,
                                        int(p.error_code)) for p in t.partitions)))
    return Answer(code, tuple(out))


def group_description(api_version: int, group_id: str, answer: Answer, catalog: UpstreamCatalog) -> dict[str, Any]:
    """One group of a v8+ response."""
    return {"group_id": group_id, "error_code": answer.error_code, "topics": topics_description(api_version, answer,
                                                                                                catalog)}


def response_description(api_version: int, answer: Answer, catalog: UpstreamCatalog, request: Any) -> dict[str, Any]:
    """A v0-7 response."""
    if api_version >= 2:
        return {"throttle_time": 0, "error_code": answer.error_code,
                "topics": topics_description(api_version, answer, catalog)}
    if answer.error_code:  # v0-1 have no group error: Kafka puts it in every partition asked
        return {"topics": [{"name": t.name, "partitions": [
            {"partition_index": i, "committed_offset": -1, "metadata": "", "error_code": answer.error_code}
            for i in t.partition_indexes]} for t in request.topics or ()]}
    return {"topics": topics_description(api_version, answer, catalog)}


def topics_description(api_version: int, answer: Answer, catalog: UpstreamCatalog) -> list[dict[str, Any]]:
    out = []
    for name, partitions in answer.topics:
        if api_version >= TOPIC_IDS:
            info = catalog.get(name)
            if info is None:
                continue  # a topic without an id cannot be named in v10: left out, as Kafka does
            identity: dict[str, Any] = {"topic_id": info.topic_id}
        else:
            identity = {"name": name}
        out.append({**identity, "partitions": [
            {"partition_index": p.partition_index, "committed_offset": p.committed_offset,
             "committed_leader_epoch": p.committed_leader_epoch, "metadata": p.metadata, "error_code": p.error_code}
            for p in partitions]})
    return out


def described(entity: Any) -> Any:
    """A kio entity as a description: its fields, nested entities and tuples of them too."""
    if isinstance(entity, tuple):
        return [described(item) for item in entity]
    fields = getattr(entity, "__dataclass_fields__", None)
    if fields is None:
        return entity
    return {name: described(getattr(entity, name)) for name in fields if not name.startswith("__")}
