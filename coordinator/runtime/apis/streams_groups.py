"""Streams group APIs (KIP-1071): StreamsGroupHeartbeat (88) v0–1, StreamsGroupDescribe (89) v0.

Version notes:
- StreamsGroupHeartbeat v0 (Kafka 4.2/4.3 clients) and v1 (Kafka 4.4 / trunk, `protocol/newer.py`)
  carry the same request fields; the response v1 has `AcceptableRecoveryLag` int64, v0 an int32
  in its place that Kafka never sets (0 here). Task offsets are read from either version, but only
  the trunk client sends them, on v1.
- The member id is always the client's (Kafka refuses an empty one: INVALID_REQUEST).
- The topics the heartbeat asks for (repartition and changelog topics, with the partition count
  the topology decided, the replication factor it declared or -1 for the broker's default, and
  the topic configs it declared) are created here, at the edge, by the node's `InternalTopics`:
  the embedded catalog (`CatalogTopics`, at once) or, in sidecar mode, the upstream cluster
  (`sidecar/internal_topics.py`, CreateTopics off the heartbeat's path). The core stays pure, and
  a later heartbeat sees them through the topic source -> core topic events; until then it reports
  MISSING_INTERNAL_TOPICS, as Kafka's does.
- Authorization (Kafka's `KafkaApis.handleStreamsGroupHeartbeat`): READ on the group and DESCRIBE
  on every topic a joining member's topology names are asked before the core (`JoinWithTopology`,
  `security/checks.py`); CREATE on the topics to create is asked here, after the core, since only
  the core knows which are missing: CREATE on the cluster, else on each topic. If any is refused
  none is created and the MISSING_INTERNAL_TOPICS detail says "Unauthorized to CREATE on topics
  ..."; a creation that failed says "Creation failed: topic (reason), ..." (at most three named),
  as Kafka appends them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from ...api.authorization import (
    CLUSTER,
    CLUSTER_NAME,
    CREATE,
    NOT_REQUESTED,
    TOPIC,
    DescribeEachGroup,
    JoinWithTopology,
    allowed,
)
from ...api.declaration import SidecarRoute
from ...api.placement import GroupList, OneGroup
from ...api.registry import ApiHandler, RequestContext
from ...catalog.catalog import CatalogError
from ...core.streams import records as rec
from ...core.streams.heartbeat_request import StreamsHeartbeat
from ...core.streams.member import Endpoint
from ...core.streams.requests import (
    StreamsGroupDescribe,
    StreamsGroupHeartbeat,
    StreamsGroupHeartbeatResponse,
)
from ...core.streams.tasks import Task
from ...core.streams.topology import InternalTopic, Status
from ..shard import ShardRuntime
from .group_admin import ALL_GROUP_OPERATIONS
from .group_api import group_api, ms

STREAMS_GROUP_HEARTBEAT = 88
STREAMS_GROUP_DESCRIBE = 89

CreateTopic = Callable[[str, int, dict[str, str]], object]
"""(name, partitions, configs): what creates a topic in the embedded catalog (its `create`)."""
FAILURES_NAMED = 3
"""Kafka names at most three failed creations in the status detail, then "and N more"."""

log = logging.getLogger(__name__)


class InternalTopics(Protocol):
    """What creates the internal topics a streams heartbeat asks for: the embedded catalog
    (`CatalogTopics`) or the upstream cluster (`sidecar.internal_topics.UpstreamTopics`)."""

    def create(self, topics: Sequence[InternalTopic], retry_after_ms: int) -> None:
        """Start creating `topics`, never waiting for it: not those being created already, nor
        those whose creation failed less than `retry_after_ms` ago (Kafka's back-off)."""

    def failures(self, names: Iterable[str]) -> dict[str, str]:
        """Topic -> why its creation failed, for those still in their back-off."""


class CatalogTopics:
    """Embedded mode: internal topics created in the catalog at once."""

    def __init__(self, create: CreateTopic) -> None:
        self._create = create

    def create(self, topics: Sequence[InternalTopic], retry_after_ms: int) -> None:
        for topic in topics:
            try:
                self._create(topic.name, topic.partitions, dict(topic.configs))
            except CatalogError as exc:  # another member's heartbeat created it first
                log.debug("internal topic %s not created: %s", topic.name, exc.message)

    def failures(self, names: Iterable[str]) -> dict[str, str]:
        return {}

_HEARTBEAT_DEFAULTS: dict[str, Any] = {
    "member_id": "", "member_epoch": 0, "heartbeat_interval": 0, "task_offset_interval": 0, "status": None,
    "active_tasks": None, "standby_tasks": None, "warmup_tasks": None, "endpoint_information_epoch": 0,
    "partitions_by_user_endpoint": None,
}


def _tasks(items: Iterable[Any] | None) -> frozenset[Task] | None:
    if items is None:
        return None
    return frozenset((t.subtopology_id, int(p)) for t in items for p in t.partitions)


def _offsets(items: Iterable[Any] | None) -> tuple[tuple[str, int, int], ...] | None:
    if items is None:
        return None
    return tuple((o.subtopology_id, int(o.partition), int(o.offset)) for o in items)


def _topic_info(t: Any) -> rec.TopicInfo:
    return rec.TopicInfo(t.name, int(t.partitions), int(t.replication_factor),
                         tuple(rec.TopicConfig(c.key, c.value) for c in t.topic_configs))


def topology_record(topology: Any) -> rec.StreamsGroupTopologyValue:
    """The wire topology as the record stores it (Kafka's ``convertToStreamsGroupTopologyRecord``)."""
    return rec.StreamsGroupTopologyValue(int(topology.epoch), tuple(
        rec.Subtopology(
            s.subtopology_id, tuple(s.source_topics), tuple(s.source_topic_regex),
            tuple(_topic_info(t) for t in s.state_changelog_topics), tuple(s.repartition_sink_topics),
            tuple(_topic_info(t) for t in s.repartition_source_topics),
            tuple(rec.CopartitionGroup(tuple(c.source_topics), tuple(c.source_topic_regex),
                                       tuple(c.repartition_source_topics)) for c in s.copartition_groups))
        for s in topology.subtopologies))


def streams_group_heartbeat(shard: Callable[[], ShardRuntime | None],
                            internal_topics: InternalTopics | None = None) -> ApiHandler:
    def to_core(ctx: RequestContext, r: Any, ref: int) -> StreamsGroupHeartbeat:
        endpoint = r.user_endpoint
        request = StreamsHeartbeat(
            group_id=r.group_id, member_id=r.member_id, member_epoch=r.member_epoch,
            endpoint_information_epoch=r.endpoint_information_epoch, instance_id=r.instance_id,
            rack_id=r.rack_id, rebalance_timeout_ms=ms(r.rebalance_timeout),
            topology=topology_record(r.topology) if r.topology is not None else None,
            active_tasks=_tasks(r.active_tasks), standby_tasks=_tasks(r.standby_tasks),
            warmup_tasks=_tasks(r.warmup_tasks), process_id=r.process_id,
            user_endpoint=Endpoint(endpoint.host, int(endpoint.port)) if endpoint is not None else None,
            client_tags=None if r.client_tags is None else tuple((kv.key, kv.value) for kv in r.client_tags),
            task_offsets=_offsets(r.task_offsets), task_end_offsets=_offsets(r.task_end_offsets),
            shutdown_application=bool(r.shutdown_application), api_version=ctx.api_version)
        return StreamsGroupHeartbeat(ref, request, ctx.client_id, f"/{ctx.client_host}")

    def to_wire(ctx: RequestContext, r: Any, resp: StreamsGroupHeartbeatResponse) -> dict[str, Any]:
        wire = {**_HEARTBEAT_DEFAULTS, **resp.body, "throttle_time": 0, "error_code": resp.error_code,
                "error_message": resp.error_message}
        if resp.internal_topics and internal_topics is not None:
            _create_internal_topics(ctx, wire, resp.internal_topics, internal_topics)
        if ctx.api_version == 0:
            wire["acceptable_recovery_lag"] = 0  # v0's int32 field: never set by Kafka
        return wire

    def on_error(ctx: RequestContext, r: Any, code: int) -> dict[str, Any]:
        wire = {**_HEARTBEAT_DEFAULTS, "error_code": code}
        if ctx.api_version == 0:
            wire["acceptable_recovery_lag"] = 0
        return wire

    return group_api(shard, STREAMS_GROUP_HEARTBEAT, 0, 1, to_core, to_wire, on_error,
                     authorization=JoinWithTopology(), placement=OneGroup(),
                     sidecar=SidecarRoute.SERVED_AFTER_IMPORT)


def _create_internal_topics(ctx: RequestContext, wire: dict[str, Any], topics: Sequence[InternalTopic],
                            creator: InternalTopics) -> None:
    """Kafka's KafkaApis after the coordinator answered: CREATE asked, creation started, and what
    stops it told in the MISSING_INTERNAL_TOPICS status (`wire` is changed in place)."""
    names = [t.name for t in topics]
    if not allowed(ctx, CREATE, CLUSTER, CLUSTER_NAME):
        unauthorized = [n for n in names if not allowed(ctx, CREATE, TOPIC, n)]
        if unauthorized:
            _tell_missing(wire, f"Unauthorized to CREATE on topics {', '.join(unauthorized)}.", add=True)
            return
    creator.create(topics, 2 * int(wire.get("heartbeat_interval") or 0))
    failed = sorted(creator.failures(names).items())
    if failed:
        listed = ", ".join(f"{name} ({why})" for name, why in failed[:FAILURES_NAMED])
        if len(failed) > FAILURES_NAMED:
            listed += f" and {len(failed) - FAILURES_NAMED} more"
        _tell_missing(wire, f"Creation failed: {listed}.", add=False)


def _tell_missing(wire: dict[str, Any], detail: str, add: bool) -> None:
    """Append `detail` to the MISSING_INTERNAL_TOPICS status ("; " between); without one, a new
    status with `detail` when `add` (Kafka does so for the unauthorized topics only)."""
    statuses = [dict(s) for s in wire.get("status") or ()]
    for status in statuses:
        if status["status_code"] == Status.MISSING_INTERNAL_TOPICS:
            status["status_detail"] = f"{status['status_detail'] or ''}; {detail}"
            break
    else:
        if not add:
            return
        statuses.append({"status_code": int(Status.MISSING_INTERNAL_TOPICS), "status_detail": detail})
    wire["status"] = statuses


def streams_group_describe(shard: Callable[[], ShardRuntime | None]) -> ApiHandler:
    def to_core(ctx: RequestContext, r: Any, ref: int) -> StreamsGroupDescribe:
        return StreamsGroupDescribe(ref, tuple(r.group_ids))

    def to_wire(ctx: RequestContext, r: Any, resp: Any) -> dict[str, Any]:
        groups = []
        for g in resp.groups:
            operations = NOT_REQUESTED
            if r.include_authorized_operations and not g["error_code"]:
                operations = ALL_GROUP_OPERATIONS
            groups.append({**g, "authorized_operations": operations})
        return {"throttle_time": 0, "groups": groups}

    def on_error(ctx: RequestContext, r: Any, code: int) -> dict[str, Any]:
        return {"groups": [_refused_group(g, code) for g in r.group_ids]}

    return group_api(shard, STREAMS_GROUP_DESCRIBE, 0, 0, to_core, to_wire, on_error,
                     authorization=DescribeEachGroup("group_ids", _refused_group),
                     placement=GroupList("group_ids", "groups", _refused_group), sidecar=SidecarRoute.SERVED)


def _refused_group(group_id: str, code: int) -> dict[str, Any]:
    """A StreamsGroupDescribe entry refused whole (not authorized, another node's)."""
    return {"error_code": code, "error_message": None, "group_id": group_id, "group_state": "", "group_epoch": -1,
            "assignment_epoch": -1, "topology": None, "members": [], "authorized_operations": NOT_REQUESTED}
