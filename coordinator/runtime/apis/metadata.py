"""Metadata (key 3), versions 0–13 (flexible from 9).

- Brokers: every node of the cluster (one per shard, `NodeView.cluster`), as advertised on the
  listener the request came in on; ControllerId is shard 0's node; ClusterId from `cluster.id`
  (v2+). With one shard the cluster is this node.
- Topics: v0 empty list = all topics; v1+ null = all, empty = none. v10+ may name topics by id
  (name null): librdkafka resolves KIP-848 assignments that way; an unknown id is ErrorCode.UNKNOWN_TOPIC_ID.
- Unknown names are created when `auto.create.topics.enable` and the request allows it
  (AllowAutoTopicCreation, v4+; always allowed before v4), with `num.partitions` partitions;
  otherwise ErrorCode.UNKNOWN_TOPIC_OR_PARTITION with the all-zero topic id. Illegal names get
  ErrorCode.INVALID_TOPIC_EXCEPTION and are never created.
- Every partition is led by shard 0's node (the embedded data plane lives there; this node with one
  shard) with leader epoch 0 (the data plane answers with the same).
- v13: top-level ErrorCode (KIP-1102) is always NONE.
- v10–11 carry a topic id field but cannot answer by id (the response name is not nullable before
  v12): a null name or a topic id there is an invalid request and closes the connection, as Kafka's
  InvalidRequestException ("Topic IDs are not supported in requests for version N").
- Authorized operations (KIP-430, `security/operations.py`): IncludeTopicAuthorizedOperations (v8+)
  fills TopicAuthorizedOperations of every topic described (not of refused ones);
  IncludeClusterAuthorizedOperations (v8–10) fills ClusterAuthorizedOperations (0 without DESCRIBE on
  the cluster). Not asked: -2147483648. Without an authorizer every supported operation.
- With an authorizer (Kafka's rules): all topics = the topics the principal may DESCRIBE; a named
  topic it may not describe is ErrorCode.TOPIC_AUTHORIZATION_FAILED (also by id); auto-creation also needs
  CREATE on the cluster or the topic, else ErrorCode.TOPIC_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import uuid
from typing import Any

from protocol.errors import ErrorCode, MalformedRequest

from ...api.authorization import (
    CLUSTER,
    CLUSTER_NAME,
    CREATE,
    DESCRIBE,
    NOT_REQUESTED,
    TOPIC,
    InHandler,
    allowed,
    authorized_operations,
    cluster_operations,
)
from ...api.declaration import SidecarRoute
from ...api.placement import NoGroup
from ...api.registry import ApiHandler, RequestContext
from ...api.respond import respond
from ...catalog import CatalogError, Topic
from ...logging import get_logger
from .view import NodeView

log = get_logger("coordinator.metadata")

METADATA_KEY = 3
LEADER_EPOCH = 0
_ZERO_UUID = uuid.UUID(int=0)


def topic_description(topic: Topic, node_id: int) -> dict[str, Any]:
    return {
        "error_code": 0,
        "name": topic.name,
        "topic_id": topic.topic_id,
        "is_internal": topic.is_internal,
        "partitions": [
            {
                "error_code": 0,
                "partition_index": index,
                "leader_id": node_id,
                "leader_epoch": LEADER_EPOCH,
                "replica_nodes": (node_id,),
                "isr_nodes": (node_id,),
                "offline_replicas": (),
            }
            for index in range(topic.num_partitions)
        ],
    }


def metadata(view: NodeView) -> ApiHandler:
    def handle(ctx: RequestContext, request: Any) -> Any:
        leader = view.data_node(ctx.listener).node_id
        catalog = view.catalog
        requested = request.topics
        if requested is None or (ctx.api_version == 0 and not requested):
            topics = [topic_description(t, leader) for t in catalog if allowed(ctx, DESCRIBE, TOPIC, t.name)]
        else:
            if 10 <= ctx.api_version < 12:
                _only_names(requested, ctx.api_version)
            allow_create = view.topic_defaults.auto_create and (
                ctx.api_version < 4 or request.allow_auto_topic_creation
            )
            topics = [_one_topic(view, entry, allow_create, ctx, leader) for entry in requested]
        if getattr(request, "include_topic_authorized_operations", False):
            for topic in topics:
                if topic["error_code"] != ErrorCode.TOPIC_AUTHORIZATION_FAILED and topic["name"] is not None:
                    topic["topic_authorized_operations"] = authorized_operations(ctx, TOPIC, topic["name"])
        return respond(ctx, {
            "throttle_time": 0,
            "brokers": [{"node_id": node.node_id, "host": node.host, "port": node.port, "rack": None}
                        for node in view.cluster(ctx.listener)],
            "cluster_id": view.cluster_id,
            "controller_id": leader,
            "topics": topics,
            "error_code": 0,
            "cluster_authorized_operations": cluster_operations(ctx)
            if getattr(request, "include_cluster_authorized_operations", False) else NOT_REQUESTED,
        })

    return ApiHandler(METADATA_KEY, 0, 13, handle,
                      authorization=InHandler("DESCRIBE each topic; CREATE cluster or topic to auto-create one"),
                      placement=NoGroup(), sidecar=SidecarRoute.FORWARDED)


def _only_names(requested: Any, version: int) -> None:
    for entry in requested:
        if entry.name is None:
            raise MalformedRequest(f"Topic name can not be null for version {version}")
        if entry.topic_id is not None and entry.topic_id != _ZERO_UUID:
            raise MalformedRequest(f"Topic IDs are not supported in requests for version {version}")


def _one_topic(view: NodeView, entry: Any, allow_create: bool, ctx: RequestContext, leader: int) -> dict[str, Any]:
    catalog = view.catalog
    name = entry.name
    topic_id = getattr(entry, "topic_id", None)
    if name is None:
        topic = catalog.by_id(topic_id) if topic_id is not None else None
        if topic is None:
            return {"error_code": ErrorCode.UNKNOWN_TOPIC_ID, "name": None, "topic_id": topic_id or _ZERO_UUID, "partitions": []}
        if not allowed(ctx, DESCRIBE, TOPIC, topic.name):
            return {"error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED, "name": None, "topic_id": topic_id, "partitions": []}
        return topic_description(topic, leader)
    if not allowed(ctx, DESCRIBE, TOPIC, name):
        return {"error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED, "name": name, "topic_id": _ZERO_UUID, "partitions": []}
    topic = catalog.get(name)
    if topic is None and allow_create and not (allowed(ctx, CREATE, CLUSTER, CLUSTER_NAME) or allowed(ctx, CREATE, TOPIC, name)):
        return {"error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED, "name": name, "topic_id": _ZERO_UUID, "partitions": []}
    if topic is None and allow_create:
        try:
            topic = catalog.create(name, view.topic_defaults.num_partitions)
            log.info("topic_auto_created", topic=name, partitions=topic.num_partitions, client_id=ctx.client_id)
        except CatalogError as exc:
            code = exc.code if exc.code == ErrorCode.INVALID_TOPIC_EXCEPTION else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            return {"error_code": code, "name": name, "topic_id": _ZERO_UUID, "partitions": []}
    if topic is None:
        return {"error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "name": name, "topic_id": _ZERO_UUID, "partitions": []}
    return topic_description(topic, leader)
