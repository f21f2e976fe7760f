"""Which groups this node coordinates: NOT_COORDINATOR for the others, as Kafka answers.

With several shards (`coordinator.shards`) each node coordinates the groups of its shard's
partitions (`coordinator/shards/placement.py`). A group request that reaches another node is
answered here, at the runtime edge, before the core sees it (the core stays unaware of shards):

- a single-group request (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetDelete,
  ConsumerGroupHeartbeat, OffsetFetch v0-7) for a group of another shard is refused whole with
  NOT_COORDINATOR; the client asks FindCoordinator again and goes to the group's node;
- a multi-group request (DescribeGroups, DeleteGroups, OffsetFetch v8+, ConsumerGroupDescribe, the
  private DescribeGroupGenerations)
  answers NOT_COORDINATOR for each group of another shard and serves the rest (Kafka's admin client
  then asks each group's node);
- ListGroups lists this node's groups: the core holds only those.

An empty or null group id is left to the core, which answers INVALID_GROUP_ID as Kafka checks it
before ownership. A check answers as the authorization checks do (`security/checks.py`): None
(all ours), an error code (refused whole), `Filtered(request, merge)` (the core gets our groups,
`merge` adds the refused ones to the wire description), or `Answered(description)` (none ours);
`group_api` applies both. Built only when there are several shards: one shard hashes nothing.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from typing import Any

from protocol.errors import ErrorCode
from protocol.private import DESCRIBE_GROUP_GENERATIONS

from ...api.registry import RequestContext
from ...security.checks import Answered, Decision, Filtered
from ...shards.placement import ShardLayout

NOT_COORDINATOR = ErrorCode.NOT_COORDINATOR
NOT_REQUESTED = -(2**31)
OWNED_CACHE = 1 << 16
"""Group ids whose ownership is remembered (the Java hash in Python costs microseconds; the bound
keeps a client inventing group ids from growing memory)."""

Owns = Callable[[str], bool]
PlacementCheck = Callable[[RequestContext, Any], Decision]
"""An ownership check: the shape of an authorization check, asked before the shard is known."""


def owner(layout: ShardLayout, shard: int) -> Owns:
    """Whether `shard` of `layout` coordinates a group."""
    @functools.lru_cache(maxsize=OWNED_CACHE)
    def owns(group_id: str) -> bool:
        return layout.shard_of_group(group_id) == shard

    return owns


def _single(owns: Owns, group_id: Callable[[Any], str | None]) -> PlacementCheck:
    def check(ctx: RequestContext, r: Any) -> Decision:
        group = group_id(r)
        return None if not group or owns(group) else NOT_COORDINATOR

    return check


def _multi(owns: Owns, ids: Callable[[Any], Sequence[Any]], key: Callable[[Any], str],
           keep: Callable[[Any, tuple[Any, ...]], Any], refused_entry: Callable[[str], dict[str, Any]],
           field: str) -> PlacementCheck:
    """A request naming several groups: ours go to the core, the others are refused in `field`."""

    def check(ctx: RequestContext, r: Any) -> Decision:
        entries = ids(r)
        ours = tuple(e for e in entries if not key(e) or owns(key(e)))
        if len(ours) == len(entries):
            return None
        refused = [refused_entry(g) for g in dict.fromkeys(key(e) for e in entries if e not in ours)]
        if not ours:
            return Answered({"throttle_time": 0, field: refused})
        return Filtered(keep(r, ours), lambda d: {**d, field: [*d[field], *refused]})

    return check


def _offset_fetch(owns: Owns) -> PlacementCheck:
    single = _single(owns, lambda r: r.group_id)
    batched = _multi(owns, lambda r: r.groups, lambda g: g.group_id,
                     lambda r, ours: dataclasses.replace(r, groups=ours),
                     lambda g: {"group_id": g, "error_code": NOT_COORDINATOR, "topics": []}, "groups")

    def check(ctx: RequestContext, r: Any) -> Decision:
        return single(ctx, r) if ctx.api_version < 8 else batched(ctx, r)

    return check


def _names(owns: Owns, field: str, refused_entry: Callable[[str], dict[str, Any]], answer_field: str) -> PlacementCheck:
    """Requests naming groups by a list of ids in `field`."""
    return _multi(owns, lambda r: getattr(r, field), lambda g: g,
                  lambda r, ours: dataclasses.replace(r, **{field: ours}), refused_entry, answer_field)


def ownership_checks(owns: Owns) -> dict[int, PlacementCheck]:
    """api key -> its NOT_COORDINATOR check, for a node that coordinates the groups `owns` accepts."""
    by_group_id = _single(owns, lambda r: r.group_id)
    return {
        11: by_group_id,  # JoinGroup
        14: by_group_id,  # SyncGroup
        12: by_group_id,  # Heartbeat
        13: by_group_id,  # LeaveGroup
        8: by_group_id,  # OffsetCommit
        47: by_group_id,  # OffsetDelete
        68: by_group_id,  # ConsumerGroupHeartbeat
        9: _offset_fetch(owns),
        15: _names(owns, "groups", lambda g: {
            "error_code": NOT_COORDINATOR, "error_message": None, "group_id": g, "group_state": "",
            "protocol_type": "", "protocol_data": "", "members": [], "authorized_operations": NOT_REQUESTED},
            "groups"),
        42: _names(owns, "groups_names", lambda g: {"group_id": g, "error_code": NOT_COORDINATOR}, "results"),
        69: _names(owns, "group_ids", lambda g: {
            "error_code": NOT_COORDINATOR, "error_message": None, "group_id": g, "group_state": "",
            "assignor_name": "", "members": [], "authorized_operations": NOT_REQUESTED}, "groups"),
        DESCRIBE_GROUP_GENERATIONS: _names(owns, "groups", lambda g: {
            "error_code": NOT_COORDINATOR, "group_id": g, "group_state": "", "generation_id": -1, "members": []},
            "groups"),
    }
