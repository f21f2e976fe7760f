"""How each declared authorization rule checks (Kafka's KafkaApis and GroupCoordinator handling).

An API declares its rule as data (`api/authorization.py`); at start-up the security feature turns
each into a check (`authorization_checks`), which the runtime binds into the API's handler
(`runtime/apis/group_api.bind`) and asks, when an authorizer is configured (`ctx.authz`), as
`check(ctx, request, topics)` before the core sees the request; `topics` is the shard's topics
image, which names the topics that OffsetCommit and OffsetFetch v10 give by id (Kafka's KafkaApis
resolves them the same way: an id it does not know is UNKNOWN_TOPIC_ID, answered by the core,
before any topic ACL is asked). A check answers in the one decision shape (`api/decision.py`):
None, an error code (refused whole), `Filtered(request, merge)` or `Answered(description)`.
`Unchecked` and `InHandler` rules have no check here; a rule this module cannot interpret stops
start-up (`DeclarationError`), as an API with no rule does.

Per API (resource, operation, refusal):

=========================  ====================================  ==================================
JoinGroup, SyncGroup,      READ group                            GROUP_AUTHORIZATION_FAILED
Heartbeat, LeaveGroup
OffsetCommit               READ group; READ each topic           whole; TOPIC_AUTHORIZATION_FAILED
                                                                 for the topic's partitions
OffsetFetch                DESCRIBE group (each, v8+);           the group; the topic's partitions;
                           DESCRIBE each topic                   "all topics" shows authorized ones
OffsetDelete               DELETE group; READ each topic         whole; the topic's partitions
DescribeGroups,            DESCRIBE each group                   that group; authorized operations
ConsumerGroupDescribe,                                           are the principal's
DescribeGroupGenerations
(private, 32767)
ConsumerGroupDescribe      DESCRIBE each topic of its members'   that group (TOPIC_AUTHORIZATION_
                           assignments and target assignments    FAILED), nothing else shown
ListGroups                 DESCRIBE cluster, else DESCRIBE       (groups not allowed are left out)
                           each group
DeleteGroups               DELETE each group                     that group
ConsumerGroupHeartbeat     READ group; DESCRIBE each subscribed  whole (GROUP_, then
                           topic name; a regex matches only      TOPIC_AUTHORIZATION_FAILED)
                           topics the principal may DESCRIBE
                           (the adapter passes them to the core)
StreamsGroupHeartbeat      READ group; DESCRIBE each topic a     whole (GROUP_, then
                           topology names (unless one is Kafka-  TOPIC_AUTHORIZATION_FAILED); CREATE
                           internal or invalid: the core answers is asked by the adapter after the
                           STREAMS_INVALID_TOPOLOGY first)       core (`runtime/apis/streams_groups`)
=========================  ====================================  ==================================
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from protocol.errors import ErrorCode

from ..api.authorization import (
    CLUSTER,
    DELETE,
    DESCRIBE,
    GROUP,
    NOT_REQUESTED,
    READ,
    TOPIC,
    CommitOffsets,
    DeleteEachGroup,
    DescribeEachGroup,
    FetchOffsets,
    GroupMember,
    InHandler,
    JoinWithSubscription,
    JoinWithTopology,
    ListVisibleGroups,
    Rule,
    Unchecked,
    authorized_operations,
)
from ..api.decision import Answered, Check, Decision, Filtered, Merge
from ..api.declaration import ApiDeclaration, DeclarationError
from ..core.streams.topology import KAFKA_INTERNAL_TOPICS, is_valid_topic_name

if TYPE_CHECKING:
    from ..api.registry import RequestContext
    from ..core.topics import TopicsImage

GROUP_DENIED = ErrorCode.GROUP_AUTHORIZATION_FAILED
TOPIC_DENIED = ErrorCode.TOPIC_AUTHORIZATION_FAILED
__all__ = ["Answered", "Check", "Decision", "Filtered", "Merge", "authorization_checks", "check_for"]

TOPIC_IDS = 10
"""OffsetCommit and OffsetFetch name topics by id from this version on."""


def _allowed(ctx: RequestContext, operation: int, resource_type: int, name: str) -> bool:
    return bool(ctx.authz.allowed(ctx, operation, resource_type, name))


def group_operations(ctx: RequestContext, group_id: str) -> int:
    """Kafka's authorized operations bitmask of a group for the principal."""
    return authorized_operations(ctx, GROUP, group_id)


def _member_of_group(operation: int) -> Check:
    def check(ctx: RequestContext, r: Any, _: TopicsImage) -> Decision:
        return None if _allowed(ctx, operation, GROUP, r.group_id) else GROUP_DENIED

    return check


# ---- offsets -------------------------------------------------------------------------------


def _topic_name(ctx: RequestContext, topic: Any, image: TopicsImage) -> str | None:
    """A request topic's name; from v10 on the name of its id, None for an id not known here."""
    if ctx.api_version < TOPIC_IDS:
        return str(topic.name)
    info = None if topic.topic_id is None else image.by_id(topic.topic_id)
    return None if info is None else info.name


def _identity(ctx: RequestContext, topic: Any, name: str) -> dict[str, Any]:
    """How a response names a topic: by id from v10 on, by name before."""
    return {"topic_id": topic.topic_id} if ctx.api_version >= TOPIC_IDS else {"name": name}


def _refused_topic(identity: dict[str, Any], indexes: Any, code: int, fetch: bool) -> dict[str, Any]:
    if fetch:
        return {**identity, "partitions": [{"partition_index": i, "committed_offset": -1, "committed_leader_epoch": -1,
                                            "metadata": "", "error_code": code} for i in indexes]}
    return {**identity, "partitions": [{"partition_index": i, "error_code": code} for i in indexes]}


def _denied_topics(ctx: RequestContext, topics: Any, operation: int, image: TopicsImage) -> list[tuple[Any, str]]:
    """(topic, name) of the request's topics the principal may not touch; an id not known here is
    left to the core (UNKNOWN_TOPIC_ID)."""
    denied = []
    for topic in topics:
        name = _topic_name(ctx, topic, image)
        if name is not None and not _allowed(ctx, operation, TOPIC, name):
            denied.append((topic, name))
    return denied


def _commit_offsets(rule: CommitOffsets) -> Check:
    """OffsetCommit and OffsetDelete: the group, then each topic (module table)."""
    group_operation, topic_operation = rule.group_operation, rule.topic_operation

    def check(ctx: RequestContext, r: Any, image: TopicsImage) -> Decision:
        if not _allowed(ctx, group_operation, GROUP, r.group_id):
            return GROUP_DENIED
        if rule.topics_by_id:
            denied = _denied_topics(ctx, r.topics, topic_operation, image)
        else:
            denied = [(t, t.name) for t in r.topics if not _allowed(ctx, topic_operation, TOPIC, t.name)]
        if not denied:
            return None
        refused = [_refused_topic(_identity(ctx, t, name) if rule.topics_by_id else {"name": name},
                                  [p.partition_index for p in t.partitions], TOPIC_DENIED, False)
                   for t, name in denied]
        out = [t for t, _ in denied]
        allowed = tuple(t for t in r.topics if t not in out)
        if not allowed and rule.answer_when_none_left:  # nothing to commit: Kafka answers without the coordinator
            return Answered({"throttle_time": 0, "topics": refused})
        return Filtered(dataclasses.replace(r, topics=allowed), lambda d: {**d, "topics": [*d["topics"], *refused]})

    return check


def _fetch_topics(ctx: RequestContext, topics: Any, image: TopicsImage) -> tuple[Any, list[dict[str, Any]]]:
    """(topics the principal may describe, refused topic entries); None (all topics) stays None."""
    if topics is None:
        return None, []
    denied = _denied_topics(ctx, topics, DESCRIBE, image)
    out = [t for t, _ in denied]
    return (tuple(t for t in topics if t not in out),
            [_refused_topic(_identity(ctx, t, name), t.partition_indexes, TOPIC_DENIED, True) for t, name in denied])


def _visible(ctx: RequestContext, topics: list[dict[str, Any]], image: TopicsImage) -> list[dict[str, Any]]:
    """The response topics of an "all topics" fetch that the principal may describe."""
    if ctx.api_version < TOPIC_IDS:
        return [t for t in topics if _allowed(ctx, DESCRIBE, TOPIC, t["name"])]
    shown = []
    for topic in topics:
        info = image.by_id(topic["topic_id"])
        if info is not None and _allowed(ctx, DESCRIBE, TOPIC, info.name):
            shown.append(topic)
    return shown


def _offset_fetch(ctx: RequestContext, r: Any, image: TopicsImage) -> Decision:
    if ctx.api_version < 8:
        if not _allowed(ctx, DESCRIBE, GROUP, r.group_id):
            return GROUP_DENIED
        topics, refused = _fetch_topics(ctx, r.topics, image)
        everything = r.topics is None

        def merge_one(d: dict[str, Any]) -> dict[str, Any]:
            shown = _visible(ctx, d["topics"], image) if everything else d["topics"]
            return {**d, "topics": [*shown, *refused]}

        return Filtered(r if everything else dataclasses.replace(r, topics=topics), merge_one)
    allowed_groups = []
    refused_groups = []
    refused_topics: dict[str, list[dict[str, Any]]] = {}
    all_topics: set[str] = set()
    for group in r.groups:
        if not _allowed(ctx, DESCRIBE, GROUP, group.group_id):
            refused_groups.append({"group_id": group.group_id, "error_code": GROUP_DENIED, "topics": []})
            continue
        topics, refused = _fetch_topics(ctx, group.topics, image)
        refused_topics[group.group_id] = refused
        if group.topics is None:
            all_topics.add(group.group_id)
        allowed_groups.append(group if group.topics is None else dataclasses.replace(group, topics=topics))
    if not allowed_groups:
        return Answered({"throttle_time": 0, "groups": refused_groups})

    def merge(d: dict[str, Any]) -> dict[str, Any]:
        groups = []
        for g in d["groups"]:
            shown = _visible(ctx, g["topics"], image) if g["group_id"] in all_topics else g["topics"]
            groups.append({**g, "topics": [*shown, *refused_topics.get(g["group_id"], [])]})
        return {**d, "groups": [*groups, *refused_groups]}

    return Filtered(dataclasses.replace(r, groups=tuple(allowed_groups)), merge)


# ---- group administration --------------------------------------------------------------------


TOPICS_DENIED_MESSAGE = "The described group uses topics that the client is not authorized to describe."


def _uses_hidden_topics(ctx: RequestContext, group: dict[str, Any]) -> bool:
    """A ConsumerGroupDescribe entry whose members' assignments or target assignments name a topic
    the principal may not DESCRIBE (Kafka's KafkaApis, KAFKA-18813)."""
    return any(not _allowed(ctx, DESCRIBE, TOPIC, tp["topic_name"])
               for member in group.get("members", ())
               for assignment in (member["assignment"], member["target_assignment"])
               for tp in assignment["topic_partitions"])


def _describe_groups(field: str, refused_entry: Callable[[str, int], dict[str, Any]], topics: bool = False) -> Check:
    """DescribeGroups and ConsumerGroupDescribe: DESCRIBE each group; operations per principal;
    with `topics` (ConsumerGroupDescribe), a group whose assignments name a topic the principal may
    not DESCRIBE is TOPIC_AUTHORIZATION_FAILED, described no further."""

    def check(ctx: RequestContext, r: Any, _: TopicsImage) -> Decision:
        ids = getattr(r, field)
        denied = [g for g in ids if not _allowed(ctx, DESCRIBE, GROUP, g)]
        refused = [refused_entry(g, GROUP_DENIED) for g in denied]
        allowed = tuple(g for g in ids if g not in denied)

        def merge(d: dict[str, Any]) -> dict[str, Any]:
            groups = []
            for g in d["groups"]:
                if topics and not g.get("error_code") and _uses_hidden_topics(ctx, g):
                    groups.append({**refused_entry(g["group_id"], TOPIC_DENIED),
                                   "error_message": TOPICS_DENIED_MESSAGE})
                elif g.get("authorized_operations", NOT_REQUESTED) != NOT_REQUESTED:
                    groups.append({**g, "authorized_operations": group_operations(ctx, g["group_id"])})
                else:
                    groups.append(g)
            return {**d, "groups": [*groups, *refused]}

        if not allowed and refused:
            return Answered({"throttle_time": 0, "groups": refused})
        return Filtered(dataclasses.replace(r, **{field: allowed}) if denied else r, merge)

    return check


def _list_groups(ctx: RequestContext, r: Any, _: TopicsImage) -> Decision:
    if _allowed(ctx, DESCRIBE, CLUSTER, "kafka-cluster"):
        return None
    return Filtered(r, lambda d: {**d, "groups": [g for g in d["groups"]
                                                  if _allowed(ctx, DESCRIBE, GROUP, g["group_id"])]})


def _delete_groups(field: str, answer_field: str) -> Check:
    def check(ctx: RequestContext, r: Any, _: TopicsImage) -> Decision:
        names = getattr(r, field)
        denied = [g for g in dict.fromkeys(names) if not _allowed(ctx, DELETE, GROUP, g)]
        if not denied:
            return None
        refused = [{"group_id": g, "error_code": GROUP_DENIED} for g in denied]
        allowed = tuple(g for g in names if g not in denied)
        if not allowed:
            return Answered({"throttle_time": 0, answer_field: refused})
        return Filtered(dataclasses.replace(r, **{field: allowed}),
                        lambda d: {**d, answer_field: [*d[answer_field], *refused]})

    return check


def _consumer_group_heartbeat(ctx: RequestContext, r: Any, _: TopicsImage) -> Decision:
    if not _allowed(ctx, READ, GROUP, r.group_id):
        return GROUP_DENIED
    topics = r.subscribed_topic_names
    if topics and any(not _allowed(ctx, DESCRIBE, TOPIC, t) for t in topics):
        return TOPIC_DENIED
    return None


def _streams_group_heartbeat(ctx: RequestContext, r: Any, _: TopicsImage) -> Decision:
    if not _allowed(ctx, READ, GROUP, r.group_id):
        return GROUP_DENIED
    if r.topology is None:
        return None
    names = {name for s in r.topology.subtopologies for name in (
        *s.source_topics, *s.repartition_sink_topics, *(t.name for t in s.repartition_source_topics),
        *(t.name for t in s.state_changelog_topics))}
    if names & KAFKA_INTERNAL_TOPICS or not all(is_valid_topic_name(n) for n in names):
        return None  # Kafka checks the names before the ACLs: the core answers STREAMS_INVALID_TOPOLOGY
    if any(not _allowed(ctx, DESCRIBE, TOPIC, n) for n in sorted(names)):
        return TOPIC_DENIED
    return None


def check_for(rule: Rule) -> Check | None:
    """The check a declared rule asks before the shard (None: the rule asks nothing there)."""
    if isinstance(rule, (Unchecked, InHandler)):
        return None
    if isinstance(rule, GroupMember):
        return _member_of_group(rule.operation)
    if isinstance(rule, CommitOffsets):
        return _commit_offsets(rule)
    if isinstance(rule, FetchOffsets):
        return _offset_fetch
    if isinstance(rule, DescribeEachGroup):
        return _describe_groups(rule.field, rule.refused_entry, rule.hide_groups_using_hidden_topics)
    if isinstance(rule, ListVisibleGroups):
        return _list_groups
    if isinstance(rule, DeleteEachGroup):
        return _delete_groups(rule.field, rule.answer_field)
    if isinstance(rule, JoinWithSubscription):
        return _consumer_group_heartbeat
    if isinstance(rule, JoinWithTopology):
        return _streams_group_heartbeat
    raise DeclarationError(f"authorization rule {type(rule).__name__} has no interpretation in security/checks.py")


def authorization_checks(declarations: Iterable[ApiDeclaration]) -> dict[int, Check]:
    """api key -> the check of its declared rule, for the APIs whose rule asks one before the shard.
    Raises `DeclarationError` for an API with no rule, or one this module cannot interpret."""
    checks: dict[int, Check] = {}
    for declaration in declarations:
        if declaration.authorization is None:
            raise DeclarationError(f"api {declaration.name} (key {declaration.api_key}) declares no authorization "
                                   "rule (api/authorization.py): refusing to serve it unchecked")
        check = check_for(declaration.authorization)
        if check is not None:
            checks[declaration.api_key] = check
    return checks
