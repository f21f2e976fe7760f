"""DescribeConfigs and IncrementalAlterConfigs in sidecar mode: GROUP resources answered here, every
other resource (topics, brokers, loggers, client metrics) asked of the upstream cluster, and the
two answers merged into one response.

The group coordinator is this one, so a group's configs are this coordinator's (its log, its
groups read them); the rest is the upstream's business. A request naming only GROUP resources never
leaves; one naming none is sent upstream whole, at the client's version (both APIs are advertised
only within the upstream's range, `apis.UPSTREAM_CAPPED`, so the upstream speaks it). A BROKER or
BROKER_LOGGER resource names its broker, and goes to that broker (Kafka answers a broker's configs
only on that broker); the rest go to any broker. As for every forwarded request, the upstream sees
the sidecar's credentials. An upstream that cannot be reached leaves its resources answered
REQUEST_TIMED_OUT with the reason, the GROUP ones answered as usual.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from protocol.build import build
from protocol.errors import ErrorCode
from protocol.schemas import response_schema

from ..api.registry import ApiHandler, RequestContext, response_of
from ..logging import get_logger
from .cluster import UpstreamCluster
from .wire import ForwardError

log = get_logger("coordinator.sidecar.group_configs")

DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 32, 44
KEYS = frozenset({DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS})
GROUP = 32
BY_BROKER = frozenset({4, 8})  # BROKER, BROKER_LOGGER: the resource name is the broker's id
_ANSWERS = {DESCRIBE_CONFIGS: "results", INCREMENTAL_ALTER_CONFIGS: "responses"}


class ConfigSplit:
    def __init__(self, cluster: UpstreamCluster) -> None:
        self.cluster = cluster

    def wrap(self, handler: ApiHandler) -> ApiHandler:
        """`handler` (the bound local API) serving the GROUP resources of every request."""
        if handler.api_key not in KEYS:
            return handler
        local = handler.handle

        def handle(ctx: RequestContext, request: Any) -> Any:
            if all(r.resource_type == GROUP for r in request.resources):
                return local(ctx, request)  # the common case: no detour
            return self._split(ctx, request, local)

        return dataclasses.replace(handler, handle=handle)

    async def _split(self, ctx: RequestContext, request: Any, local: Any) -> Any:
        ours = tuple(r for r in request.resources if r.resource_type == GROUP)
        theirs = [r for r in request.resources if r.resource_type != GROUP]
        field = _ANSWERS[ctx.api_key]
        answered: list[Any] = []
        template = None
        if ours:
            template = await response_of(local(ctx, dataclasses.replace(request, resources=ours)))
            answered += getattr(template, field)
        by_node: dict[int | None, list[Any]] = {}
        for resource in theirs:
            node = int(resource.resource_name) if resource.resource_type in BY_BROKER and \
                resource.resource_name.isdigit() else None
            by_node.setdefault(node, []).append(resource)
        for node, resources in by_node.items():
            part = dataclasses.replace(request, resources=tuple(resources))
            try:
                if node is None:
                    response, _ = await self.cluster.client.call_any(ctx.api_key, part)
                else:
                    response = await self.cluster.client.call_node(node, ctx.api_key, part)
            except ForwardError as exc:
                log.info("config_request_not_forwarded", api_key=ctx.api_key, reason=str(exc))
                answered += [_unanswered(ctx, r, str(exc)) for r in resources]
                continue
            template = template or response
            answered += getattr(response, field)
        if template is None:  # nothing answered at all: the response is built here
            template = build(response_schema(ctx.api_key, ctx.api_version), {"throttle_time": 0, field: []})
        order = {(r.resource_type, r.resource_name): i for i, r in reversed(list(enumerate(request.resources)))}
        answered.sort(key=lambda a: order.get((a.resource_type, a.resource_name), len(order)))
        return dataclasses.replace(template, **{field: tuple(answered)})


def _unanswered(ctx: RequestContext, resource: Any, reason: str) -> Any:
    """The resource refused REQUEST_TIMED_OUT, in the response's own entity type."""
    cls = response_schema(ctx.api_key, ctx.api_version)
    entry: dict[str, Any] = {"error_code": ErrorCode.REQUEST_TIMED_OUT,
                             "error_message": f"the upstream cluster did not answer: {reason}",
                             "resource_type": resource.resource_type, "resource_name": resource.resource_name}
    if ctx.api_key == DESCRIBE_CONFIGS:
        entry["configs"] = []
    described = build(cls, {"throttle_time": 0, _ANSWERS[ctx.api_key]: [entry]})
    return getattr(described, _ANSWERS[ctx.api_key])[0]
