"""Per-API handlers: each module serves one API (or a tight family) and opens with the versions it
serves and the version notes.

One handler style:
- an API is built by a factory named after it (`metadata`, `join_group`, ...) that returns an
  `ApiHandler` (key, versions, `handle(ctx, request)`);
- a factory takes only what its API needs, never the server: the bootstrap APIs a `NodeView`
  (this node, the cluster id, the catalog and its defaults), ApiVersions the table it advertises,
  the group APIs the shard getter (declared with `group_api`: `to_core`, `to_wire`, `on_error`,
  bound to the features' checks at start-up with `group_api.bind`);
- what a factory returns is the API's whole declaration (`api/declaration.py`): with it, its
  authorization rule, its placement and its sidecar route;
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
    group_configs,
    group_generations,
    metadata,
    offsets,
    streams_groups,
    topics,
)
from .group_api import bind
from .view import Node, NodeView, TopicDefaults

if TYPE_CHECKING:
    from ...catalog.source import TopicSource
    from ..shard import ShardRuntime

__all__ = ["Node", "NodeView", "TopicDefaults", "bind", "bootstrap_handlers", "group_handlers"]


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
                   topics: TopicSource | None = None,
                   internal_topics: streams_groups.InternalTopics | None = None) -> list[ApiHandler]:
    """The group coordinator's APIs, served by the shard, as declared (served once bound,
    `group_api.bind`). The KIP-848 APIs exist only when `group.coordinator.rebalance.protocols`
    names `consumer` (then they are advertised too). `topics`: the node's topic source
    (OffsetCommit refuses partitions it does not know). `internal_topics`: what creates the internal
    topics a streams group asks for (the embedded catalog, or the upstream in sidecar mode)."""
    handlers = [
        classic_groups.join_group(shard),
        classic_groups.sync_group(shard),
        classic_groups.heartbeat(shard),
        classic_groups.leave_group(shard),
        offsets.offset_commit(shard, topics),
        offsets.offset_fetch(shard),
        offsets.offset_delete(shard),
        group_admin.list_groups(shard),
        group_admin.describe_groups(shard),
        group_admin.delete_groups(shard),
        group_generations.describe_group_generations(shard),
        streams_groups.streams_group_heartbeat(shard, internal_topics),
        streams_groups.streams_group_describe(shard),
        group_configs.describe_configs(shard),
        group_configs.incremental_alter_configs(shard),
    ]
    if "consumer" in protocols:
        handlers += [
            consumer_groups.consumer_group_heartbeat(shard),
            consumer_groups.consumer_group_describe(shard),
        ]
    return handlers
