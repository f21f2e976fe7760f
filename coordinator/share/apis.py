"""The share group APIs served by the shard: ShareGroupHeartbeat (76) v1 and ShareGroupDescribe (77) v1.

Version notes: v1 is the first version Kafka 4.1+ serves (v0 was the early-access layout, refused
by Kafka 4.1 as by us); both are flexible. The heartbeat's ``Assignment`` is a nullable struct
(null: unchanged).

A share partition needs a start offset before it can be assigned, and the start offset is in the
log, which the pure core does not read: the core's first answer names the subscribed partitions
without state (``ShareGroupHeartbeatResponse.to_initialize``), and here, once that answer is on its
way, their start offsets are looked up by ``share.auto.offset.reset`` (:class:`StartOffsets`) and
handed to the core as one ``ShareInitialize``. The member's next heartbeat gets them, as a Kafka
member's first answer in a new group is an empty assignment too.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Any, Protocol
from uuid import UUID

from ..api.authorization import NOT_REQUESTED, DescribeEachGroup, JoinWithSubscription
from ..api.declaration import SidecarRoute
from ..api.placement import GroupList, OneGroup
from ..api.registry import ApiHandler, RequestContext
from ..core.share.config import AutoOffsetReset
from ..core.share.registration import ShareGroupType
from ..core.share.requests import (
    ShareGroupDescribe,
    ShareGroupHeartbeat,
    ShareGroupHeartbeatResponse,
    ShareInitialize,
)
from ..runtime.apis.group_admin import ALL_GROUP_OPERATIONS
from ..runtime.apis.group_api import group_api
from ..runtime.shard import ShardRuntime
from .offsets_apis import EndOffsets, share_offsets_handlers
from .partitions_api import describe_share_partitions

SHARE_GROUP_HEARTBEAT = 76
SHARE_GROUP_DESCRIBE = 77

log = logging.getLogger(__name__)


class StartOffsets(Protocol):
    """Where a share group starts reading a partition it never read (``share.auto.offset.reset``
    over the mode's log); None when the partition cannot be read now (the next heartbeat asks again).
    ``reset``: the group's own ``share.auto.offset.reset`` (its group config), else the broker-wide one.

    ``__call__`` answers without waiting, inside the heartbeat's own step (embedded mode reads its
    log in process); None there defers to :meth:`lookup`, which runs after the answer is sent and
    may wait (sidecar mode asks the upstream's leader)."""

    def __call__(self, topic_id: UUID, partition: int, reset: AutoOffsetReset | None = None) -> int | None: ...

    async def lookup(self, topic_id: UUID, partition: int, reset: AutoOffsetReset | None = None) -> int | None: ...


def share_handlers(shard: Callable[[], ShardRuntime | None], starts: StartOffsets,
                   ends: EndOffsets | None = None) -> list[ApiHandler]:
    """The share group APIs (served once bound, as every group API), the offsets APIs among them
    (``offsets_apis``; ``ends``: the mode's log end offsets for the lag, None: lag -1) and the
    private DescribeSharePartitions (``partitions_api``)."""
    return [share_group_heartbeat(shard, starts), share_group_describe(shard), *share_offsets_handlers(shard, ends),
            describe_share_partitions(shard)]


def share_group_heartbeat(shard: Callable[[], ShardRuntime | None], starts: StartOffsets) -> ApiHandler:
    tasks: set[asyncio.Task[None]] = set()  # strong references until each initialization is done

    def to_core(ctx: RequestContext, r: Any, ref: int) -> ShareGroupHeartbeat:
        names = None if r.subscribed_topic_names is None else tuple(r.subscribed_topic_names)
        return ShareGroupHeartbeat(
            ref=ref, group_id=r.group_id, member_id=r.member_id, member_epoch=r.member_epoch, rack_id=r.rack_id,
            subscribed_topic_names=names, client_id=ctx.client_id, client_host=f"/{ctx.client_host}",
            start_offsets=_start_offsets(shard(), starts, r.group_id, names or ()))

    def to_wire(ctx: RequestContext, r: Any, resp: ShareGroupHeartbeatResponse) -> dict[str, Any]:
        if resp.to_initialize:
            task = asyncio.get_running_loop().create_task(_initialize(shard, starts, r.group_id, resp.to_initialize))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        assignment = None
        if resp.assignment is not None:
            assignment = {"topic_partitions": [{"topic_id": t, "partitions": list(ps)} for t, ps in resp.assignment]}
        return {"throttle_time": 0, "error_code": resp.error_code, "error_message": resp.error_message,
                "member_id": resp.member_id, "member_epoch": resp.member_epoch,
                "heartbeat_interval": resp.heartbeat_interval_ms, "assignment": assignment}

    def on_error(ctx: RequestContext, r: Any, code: int) -> dict[str, Any]:
        return {"error_code": code, "member_id": None, "member_epoch": 0, "heartbeat_interval": 0, "assignment": None}

    return group_api(shard, SHARE_GROUP_HEARTBEAT, 1, 1, to_core, to_wire, on_error,
                     authorization=JoinWithSubscription(), placement=OneGroup(), sidecar=SidecarRoute.FORWARDED)


def _start_offsets(runtime: ShardRuntime | None, starts: StartOffsets, group_id: str,
                   names: tuple[str, ...]) -> tuple[tuple[UUID, int, int], ...]:
    """Where the subscribed partitions without share state would start (read-only look at the
    core's state, as the authorization checks read its topic image; the core decides)."""
    if runtime is None or not names:
        return ()
    share = runtime.core.types.get("share")
    if not isinstance(share, ShareGroupType):
        return ()
    out = []
    reset = _reset_of(runtime, group_id)
    for name in names:
        info = runtime.core.topics.by_name(name)
        if info is None:
            continue
        for index in range(info.num_partitions):
            p = share.partitions.get(group_id, info.topic_id, index)
            if (p is None or not p.initialized) and (start := starts(info.topic_id, index, reset)) is not None:
                out.append((info.topic_id, index, start))
    return tuple(out)


def _reset_of(runtime: ShardRuntime, group_id: str) -> AutoOffsetReset:
    """The group's share.auto.offset.reset (validated when it was set, so it parses)."""
    return AutoOffsetReset.parse(runtime.core.group_configs.of(group_id).share_auto_offset_reset)


async def _initialize(shard: Callable[[], ShardRuntime | None], starts: StartOffsets, group_id: str,
                      partitions: Sequence[tuple[UUID, int]]) -> None:
    runtime = shard()
    if runtime is None:
        return
    reset = _reset_of(runtime, group_id)
    found = [(t, p, start) for t, p in partitions if (start := await starts.lookup(t, p, reset)) is not None]
    if not found:
        return
    try:
        pending = runtime.submit(ShareInitialize(runtime.new_ref(), group_id, tuple(found)))
        if isinstance(pending, asyncio.Future):
            await pending
    except Exception as exc:  # the shard gave up its log (a refused write): the next heartbeat asks again
        log.info("share group %s: partitions not initialized (%s)", group_id, exc)


def share_group_describe(shard: Callable[[], ShardRuntime | None]) -> ApiHandler:
    def to_core(ctx: RequestContext, r: Any, ref: int) -> ShareGroupDescribe:
        return ShareGroupDescribe(ref=ref, group_ids=tuple(r.group_ids))

    def to_wire(ctx: RequestContext, r: Any, resp: Any) -> dict[str, Any]:
        groups = []
        for g in resp.groups:
            ops = ALL_GROUP_OPERATIONS if r.include_authorized_operations and not g["error_code"] else NOT_REQUESTED
            groups.append({**g, "authorized_operations": ops})
        return {"throttle_time": 0, "groups": groups}

    def on_error(ctx: RequestContext, r: Any, code: int) -> dict[str, Any]:
        return {"groups": [_refused_group(g, code) for g in r.group_ids]}

    return group_api(shard, SHARE_GROUP_DESCRIBE, 1, 1, to_core, to_wire, on_error,
                     authorization=DescribeEachGroup("group_ids", _refused_group),
                     placement=GroupList("group_ids", "groups", _refused_group), sidecar=SidecarRoute.FORWARDED)


def _refused_group(group_id: str, code: int) -> dict[str, Any]:
    return {"error_code": code, "error_message": None, "group_id": group_id, "group_state": "", "group_epoch": 0,
            "assignment_epoch": 0, "assignor_name": "", "members": [], "authorized_operations": NOT_REQUESTED}


__all__ = ["SHARE_GROUP_DESCRIBE", "SHARE_GROUP_HEARTBEAT", "StartOffsets", "share_handlers"]
