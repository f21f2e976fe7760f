"""Per-API handlers: each module serves one API (or a tight family) and opens with the versions it
serves and the version notes.

One handler style:
- an API is built by a factory named after it (`metadata`, `join_group`, ...) that returns an
  `ApiHandler` (key, versions, `handle(ctx, request)`);
- a factory takes only what its API needs, never the server: the bootstrap APIs a `NodeView`
  (this node, the cluster id, the catalog and its defaults), ApiVersions the table it advertises,
  the group APIs the shard getter (built with `group_api`: `to_core`, `to_wire`, `on_error`);
- `handle` describes the response once, version-free, and returns `respond(ctx, description)` (or a
  future of it): `protocol.build` / the fast encoders produce the exact version asked for;
- error codes are `protocol.errors.ErrorCode` members, never bare numbers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from ...api.registry import ApiHandler
from . import (
    api_versions,
    classic_groups,
    consumer_groups,
    describe_cluster,
    find_coordinator,
    group_admin,
    group_generations,
    metadata,
    offsets,
    topics,
)
from .group_owner import Owns, owner
from .view import Node, NodeView, TopicDefaults

if TYPE_CHECKING:
    from ...catalog.source import TopicSource
    from ..shard import ShardRuntime

__all__ = ["Node", "NodeView", "Owns", "TopicDefaults", "bootstrap_handlers", "group_handlers", "owner"]


def bootstrap_handlers(view: NodeView, table: Callable[[], Mapping[int, tuple[int, int]]]) -> list[ApiHandler]:
    """The APIs every client needs before it can join a group; `table` is what ApiVersions advertises."""
    return [
        api_versions.api_versions(table),
        metadata.metadata(view),
        find_coordinator.find_coordinator(view),
        topics.create_topics(view),
        topics.delete_topics(view),
        describe_cluster.describe_cluster(view),
    ]


def group_handlers(shard: Callable[[], ShardRuntime | None],
                   protocols: tuple[str, ...] = ("classic", "consumer"),
                   owns: Owns | None = None, topics: TopicSource | None = None) -> list[ApiHandler]:
    """The group coordinator's APIs, served by the shard. The KIP-848 APIs exist only when
    `group.coordinator.rebalance.protocols` names `consumer` (then they are advertised too).
    `owns` (several shards only, `group_owner.owner`): the groups this node coordinates; the
    others are answered NOT_COORDINATOR. `topics`: the node's topic source (OffsetCommit refuses
    partitions it does not know)."""
    handlers = [
        classic_groups.join_group(shard, owns),
        classic_groups.sync_group(shard, owns),
        classic_groups.heartbeat(shard, owns),
        classic_groups.leave_group(shard, owns),
        offsets.offset_commit(shard, owns, topics),
        offsets.offset_fetch(shard, owns),
        offsets.offset_delete(shard, owns),
        group_admin.list_groups(shard, owns),
        group_admin.describe_groups(shard, owns),
        group_admin.delete_groups(shard, owns),
        group_generations.describe_group_generations(shard, owns),
    ]
    if "consumer" in protocols:
        handlers += [
            consumer_groups.consumer_group_heartbeat(shard, owns),
            consumer_groups.consumer_group_describe(shard, owns),
        ]
    return handlers
