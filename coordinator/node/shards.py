"""Shards installed into a node (`coordinator.shards` above 1; with one shard every step leaves the
node as it is): the layout and this process's place in it (`layout`), its listeners shifted by its
index (`listeners`), every shard's node (`cluster`) and the groups this shard owns (`owns`), all at
construction; and the shards' part of security (`install`): SCRAM credentials and ACLs are records
of shard 0's log alone, so shard k >= 1 builds a copy of them and a forwarder for its writes,
reads the copy while it loads (`mirror_started`), and shard 0 once loaded opens the channel the
other shards' writes come through (`channel_opened`). The feature itself is `coordinator/shards`."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import TYPE_CHECKING

from ..api.placement import Owns
from ..config import Config
from ..runtime.apis import Node
from ..runtime.apis.view import cluster_nodes
from ..runtime.startup_checks import StartupError
from ..security.listeners import Listener
from ..shards.ownership import owner
from ..shards.placement import LayoutError, ShardLayout, shard_data_dir
from ..shards.security_channel import SecurityChannel, SecurityForwarder
from ..shards.security_mirror import SecurityMirror

if TYPE_CHECKING:
    from .server import CoordinatorServer


def layout(config: Config, shard: int | None) -> tuple[ShardLayout, int]:
    """The layout and this process's index in it; raises `StartupError` (one line) when the
    settings or the index do not fit."""
    try:
        placed = ShardLayout(config["offsets.topic.num.partitions"], config["coordinator.shards"])
    except LayoutError as exc:
        raise StartupError(str(exc)) from exc
    if shard is None and placed.shards > 1:
        raise StartupError("coordinator.shards above 1: each shard is started by `coordinator serve`")
    index = shard or 0
    if not 0 <= index < placed.shards:
        raise StartupError(f"shard {index} is not one of coordinator.shards ({placed.shards})")
    return placed, index


def listeners(config: Config, placed: ShardLayout, index: int) -> tuple[Listener, ...]:
    """This shard's listeners: each configured one at port + index."""
    shifted = tuple(_shifted(listener, index) for listener in config.listeners)
    if placed.shards > 1 and any(listener.port == 0 for listener in config.listeners):
        raise StartupError("coordinator.shards above 1 needs fixed listener ports (shard k listens on port + k)")
    return shifted


def cluster(config: Config, first_node_id: int, placed: ShardLayout, host: str) -> dict[str, tuple[Node, ...]]:
    """Every shard's node on every listener, derived from the configuration alone."""
    return cluster_nodes(config.listeners, first_node_id, placed.shards, host)


def owns(placed: ShardLayout, index: int) -> Owns | None:
    """The groups this shard coordinates (None with one shard: all of them)."""
    return owner(placed, index) if placed.shards > 1 else None


def install(server: CoordinatorServer) -> None:
    """Shard k >= 1 of several: its copy of shard 0's credentials and ACLs, and the forwarder of
    its security writes to shard 0."""
    if server.layout.shards > 1 and server.shard_index > 0:
        server.security_mirror = SecurityMirror(shard_data_dir(server.root, 0) / "log")
        server.security_forwarder = SecurityForwarder(server.root, server.shard_index, server.security_mirror,
                                                    server._security_store)


def mirror_started(server: CoordinatorServer) -> asyncio.Future[None] | None:
    """Shard k >= 1: shard 0's users and ACLs, read while this shard loads (awaited before it is
    loaded), and followed from then on."""
    if server.security_mirror is None:
        return None
    copied = asyncio.ensure_future(server.security_mirror.catch_up())
    server._background.append(asyncio.create_task(server.security_mirror.run(), name="security-mirror"))
    return copied


async def channel_opened(server: CoordinatorServer) -> None:
    """Shard 0 of several, once loaded: the channel the other shards' security writes come through."""
    if server.layout.shards > 1 and server.shard_index == 0:
        committer = server._committer
        assert committer is not None  # several shards never keep the log upstream
        server.security_channel = SecurityChannel(server.root, lambda: server.shard,
                                                  lambda: committer.log.durable_end)
        await server.security_channel.start()


def _shifted(listener: Listener, shard: int) -> Listener:
    """Shard k's copy of a listener: the same host, port + k (bound and advertised)."""
    if not shard:
        return listener
    return dataclasses.replace(listener, port=listener.port + shard,
                               advertised_port=listener.advertised_port + shard)
