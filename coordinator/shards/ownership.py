"""Which groups this node coordinates: NOT_COORDINATOR for the others, as Kafka answers.

With several shards (`coordinator.shards`) each node coordinates the groups of its shard's
partitions (`placement.py`). A group request that reaches another node is answered at the runtime
edge, before the core sees it (the core stays unaware of shards), by a check built here from the
API's declared placement (`api/placement.py`) at start-up (`placement_checks`); the runtime binds it
into the API's handler (`runtime/apis/group_api.bind`):

- `OneGroup` (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetDelete,
  ConsumerGroupHeartbeat, OffsetFetch v0-7): a group of another shard is refused whole with
  NOT_COORDINATOR; the client asks FindCoordinator again and goes to the group's node;
- `GroupList` / `GroupEntries` (DescribeGroups, DeleteGroups, OffsetFetch v8+,
  ConsumerGroupDescribe, the private DescribeGroupGenerations): NOT_COORDINATOR for each group of
  another shard, the rest served (Kafka's admin client then asks each group's node);
- `GroupResources` (DescribeConfigs, IncrementalAlterConfigs): NOT_COORDINATOR for each GROUP
  resource of another shard (its configs live with the group), the other resources served;
- `LocalGroups` (ListGroups) and `NoGroup`: nothing to check (the core holds only this node's groups).

An empty or null group id is left to the core, which answers INVALID_GROUP_ID as Kafka checks it
before ownership. A check answers in the one decision shape (`api/decision.py`). Built only when
there are several shards: one shard hashes nothing.

What a node owns is one function, `Owns` (group id -> bool); `owner` derives it from the static
layout. Anything that answers it (a dynamic owner following the cluster log) fits the same checks.
A group not owned is refused NOT_COORDINATOR unless a `Refusal` (group id -> code) says otherwise:
the cluster log's owner answers COORDINATOR_LOAD_IN_PROGRESS for a group whose partition it has
been given but is still loading, as Kafka answers for a partition in its loading state.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from protocol.errors import ErrorCode

from ..api.decision import Answered, Decision, Filtered, PlacementCheck
from ..api.declaration import ApiDeclaration
from ..api.placement import (
    GROUP_RESOURCE,
    ByVersion,
    GroupEntries,
    GroupList,
    GroupResources,
    LocalGroups,
    NoGroup,
    OneGroup,
    Owns,
    Placement,
)
from ..api.registry import RequestContext
from .placement import ShardLayout

NOT_COORDINATOR = ErrorCode.NOT_COORDINATOR
Refusal = Callable[[str], int]
"""The code a group this node does not serve now is refused with."""


def not_coordinator(group_id: str) -> int:
    return NOT_COORDINATOR

OWNED_CACHE = 1 << 16
"""Group ids whose ownership is remembered (the Java hash in Python costs microseconds; the bound
keeps a client inventing group ids from growing memory)."""


def owner(layout: ShardLayout, shard: int) -> Owns:
    """Whether `shard` of `layout` coordinates a group."""
    @functools.lru_cache(maxsize=OWNED_CACHE)
    def owns(group_id: str) -> bool:
        return layout.shard_of_group(group_id) == shard

    return owns


def placement_checks(declarations: Iterable[ApiDeclaration], owns: Owns,
                     refusal: Refusal = not_coordinator) -> dict[int, PlacementCheck]:
    """api key -> its NOT_COORDINATOR check, for a node that coordinates the groups `owns` accepts
    (an API whose placement names no group of another node has none); `refusal` gives the code of
    a group refused."""
    checks: dict[int, PlacementCheck] = {}
    for declaration in declarations:
        if declaration.placement is not None:
            check = placement_check(declaration.placement, owns, refusal)
            if check is not None:
                checks[declaration.api_key] = check
    return checks


def placement_check(placement: Placement, owns: Owns, refusal: Refusal = not_coordinator) -> PlacementCheck | None:
    if isinstance(placement, (NoGroup, LocalGroups)):
        return None
    if isinstance(placement, OneGroup):
        return _single(owns, placement.field, refusal)
    if isinstance(placement, GroupList):
        field = placement.field
        return _multi(owns, lambda r: getattr(r, field), lambda g: g,
                      lambda r, ours: dataclasses.replace(r, **{field: ours}), placement.refused_entry,
                      placement.answer_field, refusal)
    if isinstance(placement, GroupEntries):
        entries = placement.field
        return _multi(owns, lambda r: getattr(r, entries), lambda e: e.group_id,
                      lambda r, ours: dataclasses.replace(r, **{entries: ours}), placement.refused_entry,
                      placement.answer_field, refusal)
    if isinstance(placement, GroupResources):
        return _multi(owns, lambda r: r.resources,
                      lambda e: e.resource_name if e.resource_type == GROUP_RESOURCE else "",
                      lambda r, ours: dataclasses.replace(r, resources=ours), placement.refused_entry,
                      placement.answer_field, refusal)
    if isinstance(placement, ByVersion):
        return _by_version(placement.from_version, placement_check(placement.before, owns, refusal),
                           placement_check(placement.after, owns, refusal))
    raise TypeError(f"no ownership check for placement {placement!r}")


def _single(owns: Owns, field: str, refusal: Refusal) -> PlacementCheck:
    def check(ctx: RequestContext, r: Any) -> Decision:
        group = getattr(r, field)
        return None if not group or owns(group) else refusal(group)

    return check


def _multi(owns: Owns, ids: Callable[[Any], Sequence[Any]], key: Callable[[Any], str],
           keep: Callable[[Any, tuple[Any, ...]], Any], refused_entry: Callable[[str, int], dict[str, Any]],
           field: str, refusal: Refusal) -> PlacementCheck:
    """A request naming several groups: ours go to the core, the others are refused in `field`."""

    def check(ctx: RequestContext, r: Any) -> Decision:
        entries = ids(r)
        ours = tuple(e for e in entries if not key(e) or owns(key(e)))
        if len(ours) == len(entries):
            return None
        refused = [refused_entry(g, refusal(g)) for g in dict.fromkeys(key(e) for e in entries if e not in ours)]
        if not ours:
            return Answered({"throttle_time": 0, field: refused})
        return Filtered(keep(r, ours), lambda d: {**d, field: [*d[field], *refused]})

    return check


def _by_version(from_version: int, before: PlacementCheck | None, after: PlacementCheck | None) -> PlacementCheck:
    def check(ctx: RequestContext, r: Any) -> Decision:
        chosen = before if ctx.api_version < from_version else after
        return None if chosen is None else chosen(ctx, r)

    return check
