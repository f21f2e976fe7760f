"""CreateTopics (key 19), versions 2–7, and DeleteTopics (key 20), versions 1–6, on the embedded
catalog. (Kafka 4 serves CreateTopics 2–7 and DeleteTopics 1–6; kio carries the same ranges.)

CreateTopics, per topic, as Kafka's controller validates it:
- a name listed twice in one request: ErrorCode.INVALID_REQUEST for every copy;
- illegal name: INVALID_TOPIC_EXCEPTION; existing: TOPIC_ALREADY_EXISTS;
- NumPartitions -1 takes `num.partitions`; 0 or below -1: ErrorCode.INVALID_PARTITIONS;
- ReplicationFactor -1 takes 1; 0 or below -1: ErrorCode.INVALID_REPLICATION_FACTOR; above 1:
  ErrorCode.INVALID_REPLICATION_FACTOR (this is a one-node cluster);
- manual Assignments exclude NumPartitions/ReplicationFactor (ErrorCode.INVALID_REQUEST), must name
  partitions 0..n-1 and only the node that hosts partitions (this node; shard 0's with several);
- a request that would create more than 10,000 partitions and topics in all is refused whole with
  ErrorCode.POLICY_VIOLATION, "Unable to perform excessively large batch operation." (Kafka's controller bounds
  one user operation to 10,000 records: a hostile CreateTopics cannot make 2^31 partitions);
- ValidateOnly checks everything and creates nothing. v5+ answers the partition count,
  replication factor and configs; v7 the topic id.
DeleteTopics: by name (all versions) or by topic id (v6); unknown names UNKNOWN_TOPIC_OR_PARTITION,
unknown ids ErrorCode.UNKNOWN_TOPIC_ID.
With an authorizer: CreateTopics needs CREATE on the cluster or the topic, DeleteTopics DELETE on
the topic; otherwise that topic is ErrorCode.TOPIC_AUTHORIZATION_FAILED (checked before anything else, as Kafka).
"""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

from protocol.errors import ErrorCode

from ...api.authorization import CLUSTER, CLUSTER_NAME, CREATE, DELETE, TOPIC, InHandler, allowed
from ...api.declaration import SidecarRoute
from ...api.placement import NoGroup
from ...api.registry import ApiHandler, RequestContext
from ...api.respond import respond
from ...catalog import CatalogError
from ...logging import get_logger
from .view import NodeView

log = get_logger("coordinator.topics")

CREATE_TOPICS_KEY = 19
MAX_RECORDS_PER_USER_OP = 10000  # Kafka's QuorumController.MAX_RECORDS_PER_USER_OP
DELETE_TOPICS_KEY = 20
_ZERO_UUID = uuid.UUID(int=0)


def create_topics(view: NodeView) -> ApiHandler:
    def create_one(topic: Any, duplicated: bool, validate_only: bool) -> dict[str, Any]:
        result: dict[str, Any] = {"name": topic.name, "topic_id": _ZERO_UUID, "error_code": 0,
                                  "error_message": None, "num_partitions": -1, "replication_factor": -1,
                                  "configs": []}

        def fail(code: int, message: str) -> dict[str, Any]:
            return {**result, "error_code": code, "error_message": message}

        if duplicated:
            return fail(ErrorCode.INVALID_REQUEST, "Found multiple entries for this topic in the request.")
        partitions = topic.num_partitions
        replication = topic.replication_factor
        if topic.assignments:
            if partitions != -1 or replication != -1:
                return fail(ErrorCode.INVALID_REQUEST, "Both numPartitions or replicationFactor and replicasAssignments "
                                             "were set. Both cannot be used at the same time.")
            indexes = sorted(a.partition_index for a in topic.assignments)
            if indexes != list(range(len(indexes))):
                return fail(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Partitions should be numbered 0 to n-1 without gaps.")
            brokers = {b for a in topic.assignments for b in a.broker_ids}
            host = view.data_node_id
            if brokers != {host}:
                return fail(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Only broker {host} hosts partitions."
                            if view.layout.shards > 1 else f"Only broker {host} exists.")
            partitions, replication = len(indexes), 1
        if partitions == -1:
            partitions = view.topic_defaults.num_partitions
        if partitions < 1:
            return fail(ErrorCode.INVALID_PARTITIONS, "Number of partitions was set to an invalid non-positive value.")
        if replication == -1:
            replication = 1
        if replication < 1:
            return fail(ErrorCode.INVALID_REPLICATION_FACTOR,
                        "Replication factor must be larger than 0, or -1 to use the default value.")
        if replication > 1:
            return fail(ErrorCode.INVALID_REPLICATION_FACTOR,
                        f"Unable to replicate the partition {replication} time(s): The target replication "
                        f"factor of {replication} cannot be reached because only 1 broker(s) are registered.")
        configs = {c.name: c.value for c in topic.configs if c.value is not None}
        try:
            view.catalog.validate_new(topic.name, partitions)
            if validate_only:
                created_id = _ZERO_UUID
            else:
                created = view.catalog.create(topic.name, partitions, configs)
                created_id = created.topic_id
                log.info("topic_created", topic=topic.name, partitions=partitions, topic_id=str(created_id))
        except CatalogError as exc:
            return fail(exc.code, exc.message)
        return {**result, "topic_id": created_id, "num_partitions": partitions, "replication_factor": replication,
                "configs": [{"name": k, "value": v, "read_only": False, "config_source": 1, "is_sensitive": False}
                            for k, v in sorted(configs.items())]}

    def records(topic: Any) -> int:
        partitions = len(topic.assignments) or topic.num_partitions
        return 1 + (view.topic_defaults.num_partitions if partitions == -1 else max(partitions, 0))

    def handle(ctx: RequestContext, request: Any) -> Any:
        if sum(records(t) for t in request.topics) > MAX_RECORDS_PER_USER_OP:
            return respond(ctx, {"throttle_time": 0, "topics": [
                {"name": name, "topic_id": _ZERO_UUID, "error_code": ErrorCode.POLICY_VIOLATION,
                 "error_message": "Unable to perform excessively large batch operation.", "num_partitions": -1,
                 "replication_factor": -1, "configs": []} for name in dict.fromkeys(t.name for t in request.topics)]})
        counts = Counter(t.name for t in request.topics)
        seen: set[str] = set()
        results = []
        for topic in request.topics:
            if topic.name in seen:
                continue  # one result per name, as Kafka answers
            seen.add(topic.name)
            if ctx.authz is not None and not (allowed(ctx, CREATE, CLUSTER, CLUSTER_NAME)
                                              or allowed(ctx, CREATE, TOPIC, topic.name)):
                results.append({"name": topic.name, "topic_id": _ZERO_UUID, "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                "error_message": "Authorization failed.", "num_partitions": -1,
                                "replication_factor": -1, "configs": []})
                continue
            results.append(create_one(topic, counts[topic.name] > 1, request.validate_only))
        return respond(ctx, {"throttle_time": 0, "topics": results})

    return ApiHandler(CREATE_TOPICS_KEY, 2, 7, handle,
                      authorization=InHandler("CREATE cluster, else CREATE each topic"),
                      placement=NoGroup(), sidecar=SidecarRoute.FORWARDED)


def delete_topics(view: NodeView) -> ApiHandler:
    def by_name(name: str, ctx: RequestContext) -> dict[str, Any]:
        if not allowed(ctx, DELETE, TOPIC, name):
            return {"name": name, "topic_id": _ZERO_UUID, "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                    "error_message": "Authorization failed."}
        try:
            topic = view.catalog.delete(name)
        except CatalogError as exc:
            return {"name": name, "topic_id": _ZERO_UUID, "error_code": exc.code, "error_message": exc.message}
        log.info("topic_deleted", topic=name, topic_id=str(topic.topic_id))
        return {"name": name, "topic_id": topic.topic_id, "error_code": 0, "error_message": None}

    def by_id(topic_id: uuid.UUID, ctx: RequestContext) -> dict[str, Any]:
        topic = view.catalog.by_id(topic_id)
        if topic is None:
            return {"name": None, "topic_id": topic_id, "error_code": ErrorCode.UNKNOWN_TOPIC_ID,
                    "error_message": "This server does not host this topic ID."}
        return by_name(topic.name, ctx)

    def handle(ctx: RequestContext, request: Any) -> Any:
        if ctx.api_version >= 6:
            results = [by_name(t.name, ctx) if t.name is not None else by_id(t.topic_id, ctx) for t in request.topics]
        else:
            results = [by_name(name, ctx) for name in request.topic_names]
        return respond(ctx, {"throttle_time": 0, "responses": results})

    return ApiHandler(DELETE_TOPICS_KEY, 1, 6, handle,
                      authorization=InHandler("DELETE each topic"),
                      placement=NoGroup(), sidecar=SidecarRoute.FORWARDED)
