"""Group administration: ListGroups (16) v0–5, DescribeGroups (15) v0–6, DeleteGroups (42) v0–2.

Version notes:
- ListGroups v4+: StatesFilter (KIP-518) and GroupState; v5+: TypesFilter and GroupType (KIP-848).
- DescribeGroups v3+: IncludeAuthorizedOperations (answered with every group operation, as a broker
  without an authorizer does: 3400 in Kafka 4; with one, the principal's, `security/checks.py`), for
  every group answered without error (an unknown group's "Dead" entry before v6 too, as Kafka); v4+: member GroupInstanceId; v6 (KIP-1043): an
  unknown group is ErrorCode.GROUP_ID_NOT_FOUND with a message, where v0–5 say "Dead" with no error.
- DeleteGroups: NON_EMPTY_GROUP for live groups, ErrorCode.GROUP_ID_NOT_FOUND for unknown ones.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from protocol.errors import ErrorCode

from ...api.authorization import (
    ALL_OPERATIONS,
    NOT_REQUESTED,
    DeleteEachGroup,
    DescribeEachGroup,
    ListVisibleGroups,
    ResourceType,
)
from ...api.declaration import SidecarRoute
from ...api.placement import GroupList, LocalGroups
from ...api.registry import ApiHandler, RequestContext
from ...core import requests as core
from ..shard import ShardRuntime
from .group_api import group_api

ALL_GROUP_OPERATIONS = ALL_OPERATIONS[ResourceType.GROUP]  # 3400 in Kafka 4



def list_groups(shard: Callable[[], ShardRuntime | None]) -> ApiHandler:
    def to_core(ctx: RequestContext, r: Any, ref: int) -> core.ListGroups:
        return core.ListGroups(ref=ref, states_filter=tuple(getattr(r, "states_filter", ())),
                               types_filter=tuple(getattr(r, "types_filter", ())))

    def to_wire(ctx: RequestContext, r: Any, resp: Any) -> dict[str, Any]:
        return {"throttle_time": 0, "error_code": resp.error_code, "groups": [
            {"group_id": g.group_id, "protocol_type": g.protocol_type, "group_state": g.group_state,
             "group_type": g.group_type} for g in resp.groups]}

    def on_error(ctx: RequestContext, r: Any, code: int) -> dict[str, Any]:
        return {"error_code": code, "groups": []}

    return group_api(shard, 16, 0, 5, to_core, to_wire, on_error, authorization=ListVisibleGroups(),
                     placement=LocalGroups(), sidecar=SidecarRoute.SERVED)


def describe_groups(shard: Callable[[], ShardRuntime | None]) -> ApiHandler:
    def to_core(ctx: RequestContext, r: Any, ref: int) -> core.DescribeGroups:
        return core.DescribeGroups(ref=ref, group_ids=tuple(r.groups))

    def describe(ctx: RequestContext, r: Any, g: Any) -> dict[str, Any]:
        operations = ALL_GROUP_OPERATIONS if getattr(r, "include_authorized_operations", False) else NOT_REQUESTED
        if not g.exists and ctx.api_version >= 6:
            return {"error_code": ErrorCode.GROUP_ID_NOT_FOUND, "error_message": g.not_found_message,
                    "group_id": g.group_id, "group_state": "Dead", "authorized_operations": NOT_REQUESTED}
        return {"error_code": g.error_code, "error_message": None, "group_id": g.group_id,
                "group_state": g.group_state, "protocol_type": g.protocol_type, "protocol_data": g.protocol_data,
                "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                             "client_id": m.client_id, "client_host": m.client_host,
                             "member_metadata": m.member_metadata, "member_assignment": m.member_assignment}
                            for m in g.members],
                "authorized_operations": operations if not g.error_code else NOT_REQUESTED}

    def to_wire(ctx: RequestContext, r: Any, resp: Any) -> dict[str, Any]:
        return {"throttle_time": 0, "groups": [describe(ctx, r, g) for g in resp.groups]}

    def on_error(ctx: RequestContext, r: Any, code: int) -> dict[str, Any]:
        return {"groups": [{"error_code": code, "group_id": g, "group_state": "", "members": [],
                            "authorized_operations": NOT_REQUESTED} for g in r.groups]}

    return group_api(shard, 15, 0, 6, to_core, to_wire, on_error,
                     authorization=DescribeEachGroup("groups", refused_described_group),
                     placement=GroupList("groups", "groups", refused_described_group), sidecar=SidecarRoute.SERVED)


def refused_described_group(group_id: str, code: int) -> dict[str, Any]:
    """A DescribeGroups entry refused whole (not authorized, another node's)."""
    return {"error_code": code, "error_message": None, "group_id": group_id, "group_state": "", "protocol_type": "",
            "protocol_data": "", "members": [], "authorized_operations": NOT_REQUESTED}


def delete_groups(shard: Callable[[], ShardRuntime | None]) -> ApiHandler:
    def to_core(ctx: RequestContext, r: Any, ref: int) -> core.DeleteGroups:
        return core.DeleteGroups(ref=ref, group_ids=tuple(r.groups_names))

    def to_wire(ctx: RequestContext, r: Any, resp: Any) -> dict[str, Any]:
        return {"throttle_time": 0, "results": [{"group_id": g.group_id, "error_code": g.error_code}
                                                for g in resp.results]}

    def on_error(ctx: RequestContext, r: Any, code: int) -> dict[str, Any]:
        return {"results": [{"group_id": g, "error_code": code} for g in dict.fromkeys(r.groups_names)]}

    return group_api(shard, 42, 0, 2, to_core, to_wire, on_error,
                     authorization=DeleteEachGroup("groups_names", "results"),
                     placement=GroupList("groups_names", "results", _refused_deletion),
                     sidecar=SidecarRoute.SERVED_AFTER_IMPORT)


def _refused_deletion(group_id: str, code: int) -> dict[str, Any]:
    return {"group_id": group_id, "error_code": code}
