"""Per-group configs on the wire: DescribeConfigs (32) v1–4 and IncrementalAlterConfigs (44) v0–1 for
GROUP resources (type 32), as Kafka 4.x's KafkaApis / ConfigHelper / ConfigAdminManager answer them.

What each resource gets, in the order the request named them:
- GROUP: DescribeConfigs needs DESCRIBE_CONFIGS on the group, IncrementalAlterConfigs ALTER_CONFIGS,
  else that resource is GROUP_AUTHORIZATION_FAILED (with an authorizer). An empty name is
  INVALID_REQUEST ("Group name must not be empty" / "Default group resources are not allowed.").
  IncrementalAlterConfigs: a config named twice or a SET without a value is INVALID_REQUEST
  (ConfigAdminManager.preprocess), a resource named twice INVALID_REQUEST for both; the rest goes to
  the core (`core/group_configs.py`), which validates as Kafka does (INVALID_CONFIG with Kafka's
  message) and writes the group's overrides as a record before the answer leaves.
- any other resource type (topics, brokers, loggers, client metrics): INVALID_REQUEST, "Unsupported
  resource type": this coordinator keeps no configs of them (in sidecar mode the sidecar asks the
  upstream cluster for them and merges the answers, `sidecar/group_configs.py`).

DescribeConfigs answers every group config (with `configuration_keys`, those named): the override
with source DYNAMIC_GROUP_CONFIG, else the broker-wide value with source DEFAULT_CONFIG (Kafka's
default) or STATIC_BROKER_CONFIG (set in the configuration); synonyms (v1+, when asked) are the
override, then the broker setting; config types from v3; no documentation.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from protocol.errors import ErrorCode

from ...api.authorization import AclOperation, InHandler, ResourceType, allowed
from ...api.declaration import SidecarRoute
from ...api.placement import GroupResources
from ...api.registry import ApiHandler, RequestContext
from ...core import group_configs as core
from ..shard import ShardRuntime
from .group_api import group_api

DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 32, 44
GROUP = 32
"""A config resource's type (Kafka's ``ConfigResource.Type.GROUP``; not the ACL resource type)."""
_TYPE_NAMES = {2: "TOPIC", 4: "BROKER", 8: "BROKER_LOGGER", 16: "CLIENT_METRICS", 32: "GROUP"}
_GROUP_DENIED = (ErrorCode.GROUP_AUTHORIZATION_FAILED, "Group authorization failed.")

Refusal = tuple[int, str] | None


def _other_type(resource: Any) -> Refusal:
    name = _TYPE_NAMES.get(resource.resource_type)
    if name is None:
        return ErrorCode.INVALID_REQUEST, f"Unknown resource type {resource.resource_type}"
    return ErrorCode.INVALID_REQUEST, f"Unsupported resource type: {name}"


def _denied(ctx: RequestContext, operation: int, group_id: str) -> bool:
    return ctx.authz is not None and not allowed(ctx, operation, ResourceType.GROUP, group_id)


# ---- DescribeConfigs -------------------------------------------------------------------------------


def _describe_refusals(ctx: RequestContext, request: Any) -> list[Refusal]:
    refusals: list[Refusal] = []
    for resource in request.resources:
        if resource.resource_type != GROUP:
            refusals.append(_other_type(resource))
        elif _denied(ctx, AclOperation.DESCRIBE_CONFIGS, resource.resource_name):
            refusals.append(_GROUP_DENIED)
        elif not resource.resource_name:
            refusals.append((ErrorCode.INVALID_REQUEST, "Group name must not be empty"))
        else:
            refusals.append(None)
    return refusals


def describe_configs(shard: Callable[[], ShardRuntime | None]) -> ApiHandler:
    def to_core(ctx: RequestContext, r: Any, ref: int) -> core.DescribeGroupConfigs:
        admitted = [res.resource_name for res, refused in zip(r.resources, _describe_refusals(ctx, r), strict=True)
                    if refused is None]
        return core.DescribeGroupConfigs(ref, tuple(dict.fromkeys(admitted)))

    def to_wire(ctx: RequestContext, r: Any, resp: core.GroupConfigsDescribed) -> dict[str, Any]:
        if resp.error_code:
            return on_error(ctx, r, resp.error_code)
        described = dict(resp.groups)
        synonyms = bool(getattr(r, "include_synonyms", False))
        results = []
        for resource, refused in zip(r.resources, _describe_refusals(ctx, r), strict=True):
            if refused is not None:
                results.append(_described(resource, refused[0], refused[1], []))
                continue
            keys = set(resource.configuration_keys or ())
            rows = [_row(row, synonyms) for row in described[resource.resource_name] if not keys or row.name in keys]
            results.append(_described(resource, ErrorCode.NONE, None, rows))
        return {"throttle_time": 0, "results": results}

    def on_error(ctx: RequestContext, r: Any, code: int) -> dict[str, Any]:
        return {"throttle_time": 0, "results": [_described(res, code, None, []) for res in r.resources]}

    return group_api(shard, DESCRIBE_CONFIGS, 1, 4, to_core, to_wire, on_error,
                     authorization=InHandler("DESCRIBE_CONFIGS on each GROUP resource, else "
                                             "GROUP_AUTHORIZATION_FAILED for it (to_core and to_wire)"),
                     placement=GroupResources("results", _refused_description), sidecar=SidecarRoute.SERVED)


def _refused_description(group_id: str, code: int) -> dict[str, Any]:
    """A GROUP resource of another node (several shards): its configs live with the group."""
    return {"error_code": code, "error_message": None, "resource_type": GROUP, "resource_name": group_id,
            "configs": []}


def _described(resource: Any, code: int, message: str | None, configs: list[dict[str, Any]]) -> dict[str, Any]:
    return {"error_code": code, "error_message": message, "resource_type": resource.resource_type,
            "resource_name": resource.resource_name, "configs": configs}


def _row(row: core.DescribedConfig, synonyms: bool) -> dict[str, Any]:
    return {"name": row.name, "value": row.value, "read_only": False, "config_source": row.source,
            "is_default": row.source == core.DEFAULT_CONFIG, "is_sensitive": False,
            "synonyms": [{"name": n, "value": v, "source": s} for n, v, s in row.synonyms] if synonyms else [],
            "config_type": row.config_type, "documentation": None}


# ---- IncrementalAlterConfigs ------------------------------------------------------------------------


def _alter_refusals(ctx: RequestContext, request: Any) -> list[Refusal]:
    counts: dict[tuple[int, str], int] = {}
    for resource in request.resources:
        key = (resource.resource_type, resource.resource_name)
        counts[key] = counts.get(key, 0) + 1
    return [(ErrorCode.INVALID_REQUEST, "Each resource must appear at most once.")  # Kafka refuses every copy
            if counts[(resource.resource_type, resource.resource_name)] > 1 else _alter_refusal(ctx, resource)
            for resource in request.resources]


def _alter_refusal(ctx: RequestContext, resource: Any) -> Refusal:
    # Kafka's order: the broker's preprocessing (duplicates, null values), then the controller's
    # authorization, then its validation.
    if resource.resource_type != GROUP:
        return _other_type(resource)
    names = [config.name for config in resource.configs]
    if len(set(names)) != len(names):
        return ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys"
    for config in resource.configs:
        if config.config_operation not in core.OPERATION_NAMES:
            return ErrorCode.INVALID_REQUEST, f"Unknown operations type {config.config_operation}"
    missing = [config.name for config in resource.configs
               if config.config_operation != core.DELETE and config.value is None]
    if missing:
        return ErrorCode.INVALID_REQUEST, "Null value not supported for : " + ", ".join(missing)
    if _denied(ctx, AclOperation.ALTER_CONFIGS, resource.resource_name):
        return _GROUP_DENIED
    if not resource.resource_name:
        return ErrorCode.INVALID_REQUEST, "Default group resources are not allowed."
    return None


def incremental_alter_configs(shard: Callable[[], ShardRuntime | None]) -> ApiHandler:
    def to_core(ctx: RequestContext, r: Any, ref: int) -> core.AlterGroupConfigs:
        changes = tuple(
            core.GroupConfigChange(res.resource_name, tuple((c.name, int(c.config_operation), c.value) for c in res.configs))
            for res, refused in zip(r.resources, _alter_refusals(ctx, r), strict=True) if refused is None)
        return core.AlterGroupConfigs(ref, changes, bool(r.validate_only))

    def to_wire(ctx: RequestContext, r: Any, resp: core.GroupConfigsAltered) -> dict[str, Any]:
        if resp.error_code:
            return on_error(ctx, r, resp.error_code)
        outcomes = {outcome.group_id: outcome for outcome in resp.results}
        responses = []
        for resource, refused in zip(r.resources, _alter_refusals(ctx, r), strict=True):
            if refused is not None:
                responses.append(_altered(resource, *refused))
            else:
                outcome = outcomes[resource.resource_name]
                responses.append(_altered(resource, outcome.error_code, outcome.error_message))
        return {"throttle_time": 0, "responses": responses}

    def on_error(ctx: RequestContext, r: Any, code: int) -> dict[str, Any]:
        return {"throttle_time": 0, "responses": [_altered(res, code, None) for res in r.resources]}

    return group_api(shard, INCREMENTAL_ALTER_CONFIGS, 0, 1, to_core, to_wire, on_error,
                     authorization=InHandler("ALTER_CONFIGS on each GROUP resource, else "
                                             "GROUP_AUTHORIZATION_FAILED for it (to_core and to_wire)"),
                     placement=GroupResources("responses", _refused_alteration), sidecar=SidecarRoute.SERVED)


def _refused_alteration(group_id: str, code: int) -> dict[str, Any]:
    return {"error_code": code, "error_message": None, "resource_type": GROUP, "resource_name": group_id}


def _altered(resource: Any, code: int, message: str | None) -> dict[str, Any]:
    return {"error_code": code, "error_message": message, "resource_type": resource.resource_type,
            "resource_name": resource.resource_name}
