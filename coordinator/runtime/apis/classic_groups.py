"""Classic group membership APIs: JoinGroup (11) v0–9, SyncGroup (14) v0–5, Heartbeat (12) v0–4,
LeaveGroup (13) v0–5.

Version notes:
- JoinGroup v0 has no RebalanceTimeoutMs: the session timeout stands in (as Kafka's request does).
  v4+: a new dynamic member first gets MEMBER_ID_REQUIRED (KIP-394). v5+: GroupInstanceId
  (KIP-345). v7+: ProtocolType/ProtocolName in the response; ProtocolName is nullable only from v7,
  so "" is sent before. v8+: Reason. v9: SkipAssignment (KIP-814).
- SyncGroup v3+: GroupInstanceId. v5+: ProtocolType/ProtocolName are mandatory (null:
  ErrorCode.INCONSISTENT_GROUP_PROTOCOL before the group is consulted) and checked against the group's.
- Heartbeat v3+: GroupInstanceId.
- LeaveGroup v0–2: one MemberId at top level, and the response carries only the top-level error
  (a member error is lifted to it); v3+: a batch of members (KIP-345) with per-member errors.
- New member ids are made here (client id + "-" + uuid4, as Kafka) so the core stays pure.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from protocol.errors import ErrorCode

from ...api.authorization import READ, GroupMember
from ...api.declaration import SidecarRoute
from ...api.placement import OneGroup
from ...api.registry import ApiHandler, RequestContext
from ...core import requests as core
from ..shard import ShardRuntime
from .group_api import group_api, ms


def _new_member_id(ctx: RequestContext, request: Any) -> str:
    prefix = getattr(request, "group_instance_id", None) or ctx.client_id
    return f"{prefix}-{uuid.uuid4()}"


def join_group(shard: Callable[[], ShardRuntime | None]) -> ApiHandler:
    def to_core(ctx: RequestContext, r: Any, ref: int) -> core.JoinGroup:
        session = ms(r.session_timeout)
        return core.JoinGroup(
            ref=ref, group_id=r.group_id, member_id=r.member_id,
            group_instance_id=getattr(r, "group_instance_id", None),
            protocol_type=r.protocol_type,
            protocols=tuple((p.name, p.metadata) for p in r.protocols),
            session_timeout_ms=session,
            rebalance_timeout_ms=ms(r.rebalance_timeout) if ctx.api_version >= 1 else session,
            client_id=ctx.client_id, client_host=f"/{ctx.client_host}",
            reason=getattr(r, "reason", None),
            require_known_member_id=ctx.api_version >= 4,
            supports_skip_assignment=ctx.api_version >= 9,
            new_member_id=_new_member_id(ctx, r),
        )

    def to_wire(ctx: RequestContext, r: Any, resp: Any) -> dict[str, Any]:
        protocol_name = resp.protocol_name
        if protocol_name is None and ctx.api_version < 7:
            protocol_name = ""
        return {
            "throttle_time": 0, "error_code": resp.error_code, "generation_id": resp.generation_id,
            "protocol_type": resp.protocol_type, "protocol_name": protocol_name, "leader": resp.leader,
            "skip_assignment": resp.skip_assignment, "member_id": resp.member_id,
            "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                         "metadata": m.metadata} for m in resp.members],
        }

    def on_error(ctx: RequestContext, r: Any, code: int) -> dict[str, Any]:
        return {"error_code": code, "generation_id": -1, "protocol_name": None if ctx.api_version >= 7 else "",
                "member_id": r.member_id, "leader": "", "members": []}

    return group_api(shard, 11, 0, 9, to_core, to_wire, on_error, authorization=GroupMember(READ),
                     placement=OneGroup(), sidecar=SidecarRoute.SERVED_AFTER_IMPORT)


def sync_group(shard: Callable[[], ShardRuntime | None]) -> ApiHandler:
    def to_core(ctx: RequestContext, r: Any, ref: int) -> core.SyncGroup:
        return core.SyncGroup(
            ref=ref, group_id=r.group_id, generation_id=r.generation_id, member_id=r.member_id,
            group_instance_id=getattr(r, "group_instance_id", None),
            protocol_type=getattr(r, "protocol_type", None), protocol_name=getattr(r, "protocol_name", None),
            assignments=tuple((a.member_id, a.assignment) for a in r.assignments),
        )

    def to_wire(ctx: RequestContext, r: Any, resp: Any) -> dict[str, Any]:
        return {"throttle_time": 0, "error_code": resp.error_code, "protocol_type": resp.protocol_type,
                "protocol_name": resp.protocol_name, "assignment": resp.assignment}

    def on_error(ctx: RequestContext, r: Any, code: int) -> dict[str, Any]:
        return {"error_code": code, "protocol_type": None, "protocol_name": None, "assignment": b""}

    def precheck(ctx: RequestContext, r: Any) -> int | None:
        # v5+ must name the protocol (SyncGroupRequest.areMandatoryProtocolTypeAndNamePresent).
        if ctx.api_version >= 5 and (r.protocol_type is None or r.protocol_name is None):
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        return None

    return group_api(shard, 14, 0, 5, to_core, to_wire, on_error, precheck, authorization=GroupMember(READ),
                     placement=OneGroup(), sidecar=SidecarRoute.SERVED)


def heartbeat(shard: Callable[[], ShardRuntime | None]) -> ApiHandler:
    def to_core(ctx: RequestContext, r: Any, ref: int) -> core.Heartbeat:
        return core.Heartbeat(ref=ref, group_id=r.group_id, generation_id=r.generation_id, member_id=r.member_id,
                              group_instance_id=getattr(r, "group_instance_id", None))

    def to_wire(ctx: RequestContext, r: Any, resp: Any) -> dict[str, Any]:
        return {"throttle_time": 0, "error_code": resp.error_code}

    def on_error(ctx: RequestContext, r: Any, code: int) -> dict[str, Any]:
        # While the group's log is loading Kafka answers a heartbeat NONE blindly (the session goes
        # on; the member hears of a rebalance on its first heartbeat after the load): clients treat
        # COORDINATOR_LOAD_IN_PROGRESS here as unexpected (aiokafka's heartbeat task dies of it).
        return {"error_code": ErrorCode.NONE if code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS else code}

    return group_api(shard, 12, 0, 4, to_core, to_wire, on_error, authorization=GroupMember(READ),
                     placement=OneGroup(), sidecar=SidecarRoute.SERVED)


def leave_group(shard: Callable[[], ShardRuntime | None]) -> ApiHandler:
    def to_core(ctx: RequestContext, r: Any, ref: int) -> core.LeaveGroup:
        if ctx.api_version < 3:
            members: tuple[core.LeavingMember, ...] = (core.LeavingMember(r.member_id, None, None),)
        else:
            members = tuple(core.LeavingMember(m.member_id, m.group_instance_id, getattr(m, "reason", None))
                            for m in r.members)
        return core.LeaveGroup(ref=ref, group_id=r.group_id, members=members, single_member_mode=ctx.api_version < 3)

    def to_wire(ctx: RequestContext, r: Any, resp: Any) -> dict[str, Any]:
        if ctx.api_version < 3:
            code = resp.error_code or (resp.members[0].error_code if resp.members else 0)
            return {"throttle_time": 0, "error_code": code}
        return {"throttle_time": 0, "error_code": resp.error_code,
                "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                             "error_code": m.error_code} for m in resp.members]}

    def on_error(ctx: RequestContext, r: Any, code: int) -> dict[str, Any]:
        return {"error_code": code, "members": []}

    return group_api(shard, 13, 0, 5, to_core, to_wire, on_error, authorization=GroupMember(READ),
                     placement=OneGroup(), sidecar=SidecarRoute.SERVED)
