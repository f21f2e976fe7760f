"""DescribeCluster (key 60), versions 0–2 (flexible in all).

Every node of the cluster (one per shard, `NodeView.cluster`, on the request's listener), never
fenced; ControllerId is shard 0's node (this node with one shard). EndpointType (v1+) 1 = brokers is
the only kind served; asking for controllers (2) gets ErrorCode.UNSUPPORTED_ENDPOINT_TYPE as from a broker.
IncludeClusterAuthorizedOperations: the principal's cluster operations (KIP-430; 0 without DESCRIBE on
the cluster, every supported one without an authorizer), else -2147483648 (Kafka's AuthHelper).
"""

from __future__ import annotations

from typing import Any

from protocol.errors import ErrorCode

from ...api.authorization import NOT_REQUESTED, InHandler, cluster_operations
from ...api.declaration import SidecarRoute
from ...api.placement import NoGroup
from ...api.registry import ApiHandler, RequestContext
from ...api.respond import respond
from .view import NodeView

DESCRIBE_CLUSTER_KEY = 60
BROKERS = 1


def describe_cluster(view: NodeView) -> ApiHandler:
    def handle(ctx: RequestContext, request: Any) -> Any:
        endpoint_type = getattr(request, "endpoint_type", BROKERS)
        if endpoint_type != BROKERS:
            return respond(ctx, {"error_code": ErrorCode.UNSUPPORTED_ENDPOINT_TYPE, "error_message":
                                 "The request was sent to an endpoint of the wrong type.",
                                 "endpoint_type": endpoint_type, "cluster_id": view.cluster_id,
                                 "controller_id": -1, "brokers": []})
        return respond(ctx, {
            "throttle_time": 0,
            "error_code": 0,
            "endpoint_type": BROKERS,
            "cluster_id": view.cluster_id,
            "controller_id": view.data_node(ctx.listener).node_id,
            "brokers": [{"broker_id": node.node_id, "host": node.host, "port": node.port, "rack": None,
                         "is_fenced": False} for node in view.cluster(ctx.listener)],
            "cluster_authorized_operations": cluster_operations(ctx)
            if request.include_cluster_authorized_operations else NOT_REQUESTED,
        })

    return ApiHandler(DESCRIBE_CLUSTER_KEY, 0, 2, handle,
                      authorization=InHandler("DESCRIBE cluster decides the cluster's authorized operations"),
                      placement=NoGroup(), sidecar=SidecarRoute.FORWARDED)
