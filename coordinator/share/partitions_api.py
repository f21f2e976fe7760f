"""DescribeSharePartitions (this project's private key 32766) v0: what is in flight in each share
partition of a share group, by state, for ``coordinator groups describe`` (``protocol/private.py``
has the schema and why the key is private; ApiVersions never lists it).

Served as ShareGroupDescribe is: by the shard (the core reads its share partitions), placed by the
same ownership (NOT_COORDINATOR per group of another node) and authorized the same way (DESCRIBE
on each group, GROUP_AUTHORIZATION_FAILED per group refused).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from protocol.private import DESCRIBE_SHARE_PARTITIONS

from ..api.authorization import DescribeEachGroup
from ..api.declaration import SidecarRoute
from ..api.placement import GroupList
from ..api.registry import ApiHandler, RequestContext
from ..core.share.requests import DescribeSharePartitions, DescribeSharePartitionsResponse
from ..runtime.apis.group_api import group_api
from ..runtime.shard import ShardRuntime


def describe_share_partitions(shard: Callable[[], ShardRuntime | None]) -> ApiHandler:
    def to_core(ctx: RequestContext, r: Any, ref: int) -> DescribeSharePartitions:
        return DescribeSharePartitions(ref, tuple(r.groups))

    def to_wire(ctx: RequestContext, r: Any, resp: DescribeSharePartitionsResponse) -> dict[str, Any]:
        return {"groups": list(resp.groups)}

    def on_error(ctx: RequestContext, r: Any, code: int) -> dict[str, Any]:
        return {"groups": [_refused_group(g, code) for g in r.groups]}

    return group_api(shard, DESCRIBE_SHARE_PARTITIONS, 0, 0, to_core, to_wire, on_error,
                     authorization=DescribeEachGroup("groups", _refused_group),
                     placement=GroupList("groups", "groups", _refused_group), sidecar=SidecarRoute.SERVED)


def _refused_group(group_id: str, code: int) -> dict[str, Any]:
    return {"error_code": code, "group_id": group_id, "partitions": []}
