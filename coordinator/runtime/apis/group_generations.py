"""DescribeGroupGenerations (this project's private key 32767) v0: the generation of each classic
group and of each of its members, for the admin CLI (`protocol/private.py` has the schema and why
the key is private).

It is DescribeGroups with the one thing Kafka's answer lacks, so it is served exactly as
DescribeGroups is: by the same core request (`core.DescribeGroups`, whose rows carry the
generations), placed by the same ownership table (NOT_COORDINATOR per group of another node) and
authorized by the same check (DESCRIBE on each group, GROUP_AUTHORIZATION_FAILED per group
refused). A group that is not classic, or not known, is GROUP_ID_NOT_FOUND: its members hold
epochs, which ConsumerGroupDescribe answers. ApiVersions never lists it (`api_versions.py`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from protocol.errors import ErrorCode
from protocol.private import DESCRIBE_GROUP_GENERATIONS

from ...api.authorization import DescribeEachGroup
from ...api.declaration import SidecarRoute
from ...api.placement import GroupList
from ...api.registry import ApiHandler, RequestContext
from ...core import requests as core
from ..shard import ShardRuntime
from .group_api import group_api


def describe_group_generations(shard: Callable[[], ShardRuntime | None]) -> ApiHandler:
    def to_core(ctx: RequestContext, r: Any, ref: int) -> core.DescribeGroups:
        return core.DescribeGroups(ref=ref, group_ids=tuple(r.groups))

    def describe(g: Any) -> dict[str, Any]:
        if not g.exists or g.error_code:
            code = g.error_code or ErrorCode.GROUP_ID_NOT_FOUND
            return {"error_code": code, "group_id": g.group_id, "group_state": "Dead" if not g.exists else "",
                    "generation_id": -1, "members": []}
        return {"error_code": ErrorCode.NONE, "group_id": g.group_id, "group_state": g.group_state,
                "generation_id": g.generation_id,
                "members": [{"member_id": m.member_id, "generation_id": m.generation_id} for m in g.members]}

    def to_wire(ctx: RequestContext, r: Any, resp: Any) -> dict[str, Any]:
        return {"groups": [describe(g) for g in resp.groups]}

    def on_error(ctx: RequestContext, r: Any, code: int) -> dict[str, Any]:
        return {"groups": [{"error_code": code, "group_id": g, "group_state": "", "generation_id": -1, "members": []}
                           for g in r.groups]}

    return group_api(shard, DESCRIBE_GROUP_GENERATIONS, 0, 0, to_core, to_wire, on_error,
                     authorization=DescribeEachGroup("groups", _refused_group),
                     placement=GroupList("groups", "groups", _refused_group), sidecar=SidecarRoute.SERVED)


def _refused_group(group_id: str, code: int) -> dict[str, Any]:
    return {"error_code": code, "group_id": group_id, "group_state": "", "generation_id": -1, "members": []}
