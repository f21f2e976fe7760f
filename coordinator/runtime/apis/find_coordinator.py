"""FindCoordinator (key 10), versions 0–6 (flexible from 3).

- v0–3 carry one Key (KeyType from v1); v4+ carry CoordinatorKeys and answer a Coordinators array
  (KIP-699).
- Group keys (type 0) are coordinated by the node of the group's shard (`NodeView.node_of_group`:
  Kafka's partition of the group, then the partition's shard), on the listener the request came in
  on; with one shard that is this node. With the log upstream it is the instance that owns the
  group's log partition now, and COORDINATOR_NOT_AVAILABLE while the partition moves.
- Transaction keys (type 1) are answered with this node, as any Kafka broker would: the
  transactional client then sends InitProducerId with its transactional id, which the data plane
  refuses with UNSUPPORTED_VERSION (`dataplane/init_producer_id.py`), a fatal error for the Java
  client instead of retrying COORDINATOR_NOT_AVAILABLE until its timeout. Share keys (type 2) need
  v6+ (INVALID_REQUEST before) and are not served (COORDINATOR_NOT_AVAILABLE). Any other key type
  is INVALID_REQUEST.
- Errors in v0–3 carry NodeId -1, Host "" and Port -1, as Kafka sends them.
- With an authorizer: a group key needs DESCRIBE on the group (GROUP_AUTHORIZATION_FAILED), a
  transaction key DESCRIBE on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from typing import Any

from protocol.errors import ErrorCode

from ...api.authorization import DESCRIBE, TRANSACTIONAL_ID, InHandler, allowed
from ...api.authorization import GROUP as GROUP_RESOURCE
from ...api.declaration import SidecarRoute
from ...api.placement import NoGroup
from ...api.registry import ApiHandler, RequestContext
from ...api.respond import respond
from .view import NodeView

FIND_COORDINATOR_KEY = 10

GROUP, TRANSACTION, SHARE = 0, 1, 2


def find_coordinator(view: NodeView) -> ApiHandler:
    def locate(ctx: RequestContext, key: str, key_type: int) -> dict[str, Any]:
        version = ctx.api_version
        if ctx.authz is not None and key_type in (GROUP, TRANSACTION):
            denied = _denied(ctx, key, key_type)
            if denied is not None:
                return {"key": key, "node_id": -1, "host": "", "port": -1, "error_code": denied[0],
                        "error_message": denied[1]}
        if key_type in (GROUP, TRANSACTION):
            node = view.node_of_group(key, ctx.listener) if key_type == GROUP else view.node_for(ctx.listener)
            if node is None:  # the group's log partition is between owners (Kafka: no leader yet)
                return {"key": key, "node_id": -1, "host": "", "port": -1,
                        "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE,
                        "error_message": "The coordinator is not available."}
            return {"key": key, "node_id": node.node_id, "host": node.host, "port": node.port,
                    "error_code": 0, "error_message": None}
        if key_type == SHARE and version >= 6:
            code, message = ErrorCode.COORDINATOR_NOT_AVAILABLE, "This server does not coordinate share groups."
        else:
            code, message = ErrorCode.INVALID_REQUEST, f"Invalid coordinator key type {key_type} for version {version}."
        return {"key": key, "node_id": -1, "host": "", "port": -1, "error_code": code, "error_message": message}

    def handle(ctx: RequestContext, request: Any) -> Any:
        key_type = getattr(request, "key_type", GROUP)
        if ctx.api_version >= 4:
            return respond(ctx, {
                "throttle_time": 0,
                "coordinators": [locate(ctx, key, key_type) for key in request.coordinator_keys],
            })
        found = locate(ctx, request.key, key_type)
        return respond(ctx, {"throttle_time": 0, **found})

    return ApiHandler(FIND_COORDINATOR_KEY, 0, 6, handle,
                      authorization=InHandler("DESCRIBE each group or transactional id asked for"),
                      placement=NoGroup(), sidecar=SidecarRoute.SERVED)


def _denied(ctx: RequestContext, key: str, key_type: int) -> tuple[int, str] | None:
    if key_type == GROUP:
        if not allowed(ctx, DESCRIBE, GROUP_RESOURCE, key):
            return ErrorCode.GROUP_AUTHORIZATION_FAILED, "Group authorization failed."
    elif not allowed(ctx, DESCRIBE, TRANSACTIONAL_ID, key):
        return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "Transactional Id authorization failed."
    return None
