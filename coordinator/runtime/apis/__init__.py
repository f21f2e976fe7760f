"""Per-API handlers: each module serves one API (or a tight family) and opens with the versions it
serves and the version notes. Handlers describe responses once, version-free, and let
`protocol.build.build` produce the exact version asked for.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ..registry import ApiHandler
from . import (
    api_versions,
    classic_groups,
    consumer_groups,
    describe_cluster,
    find_coordinator,
    group_admin,
    metadata,
    offsets,
    topics,
)

if TYPE_CHECKING:
    from ..server import CoordinatorServer
    from ..shard import ShardRuntime


def bootstrap_handlers(server: CoordinatorServer) -> list[ApiHandler]:
    """The APIs every client needs before it can join a group."""
    return [
        api_versions.handler(server),
        metadata.handler(server),
        find_coordinator.handler(server),
        topics.create_topics_handler(server),
        topics.delete_topics_handler(server),
        describe_cluster.handler(server),
    ]


def group_handlers(shard: Callable[[], ShardRuntime | None],
                   protocols: tuple[str, ...] = ("classic", "consumer")) -> list[ApiHandler]:
    """The group coordinator's APIs, served by the shard. The KIP-848 APIs exist only when
    `group.coordinator.rebalance.protocols` names `consumer` (then they are advertised too)."""
    handlers = [
        classic_groups.join_group(shard),
        classic_groups.sync_group(shard),
        classic_groups.heartbeat(shard),
        classic_groups.leave_group(shard),
        offsets.offset_commit(shard),
        offsets.offset_fetch(shard),
        offsets.offset_delete(shard),
        group_admin.list_groups(shard),
        group_admin.describe_groups(shard),
        group_admin.delete_groups(shard),
    ]
    if "consumer" in protocols:
        handlers += [
            consumer_groups.consumer_group_heartbeat(shard),
            consumer_groups.consumer_group_describe(shard),
        ]
    return handlers
