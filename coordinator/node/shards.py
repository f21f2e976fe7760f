"""Shards installed into a node (`coordinator.shards` above 1; with one shard every step leaves the
node as it is): the layout and this process's place in it (`layout`), its listeners shifted by its
index (`listeners`), every shard's node (`cluster`) and the groups this shard owns (`owns`), all at
construction; and the shards' part of security (`install`): SCRAM credentials and ACLs are records
of shard 0's log alone, so shard k >= 1 builds a copy of them and a forwarder for its writes,
reads the copy while it loads (`mirror_started`), and shard 0 once loaded opens the channel the
other shards' writes come through (`channel_opened`); in embedded mode, how the shards reach one
another for share groups (`share_forwarding`). The feature itself is `coordinator/shards`."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..api.placement import Owns
from ..config import Config
from ..logging import get_logger
from ..runtime.apis import Node
from ..runtime.apis.view import cluster_nodes
from ..runtime.startup_checks import StartupError
from ..security.gate import SecurityConfigError
from ..security.listeners import Listener
from ..security.peers import peer_link
from ..security.settings import InterBrokerConfig, ListenerSecurityConfig
from ..shards.ownership import owner
from ..shards.placement import LayoutError, ShardLayout, shard_data_dir
from ..shards.security_channel import SecurityChannel, SecurityForwarder
from ..shards.security_mirror import SecurityMirror
from ..share.forward import Holders

if TYPE_CHECKING:
    from .server import CoordinatorServer

log = get_logger("coordinator.node.shards")


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


def share_forwarding(server: CoordinatorServer) -> tuple[Holders, Callable[[], Node]] | None:
    """An embedded shard of several: where share groups are held (each on its shard, named by its
    node on the forwarding listener, `inter.broker.listener.name`, reached with that listener's TLS
    and the node's own SASL credentials, `security/peers.py`; a setting that cannot work raises
    `StartupError`) and shard 0's node there (shard k >= 1 reads the data plane from it). None with
    one shard, or when no listener can be the forwarding one: then shard k >= 1 refuses its share
    groups (`share/unserved.py`), said once at start-up."""
    if server.layout.shards == 1 or server.sidecar is not None:
        return None
    config = server.config
    try:
        link = peer_link(server.listeners, config.build(InterBrokerConfig),
                         lambda listener: config.for_listener(ListenerSecurityConfig, listener), config.jaas_config)
    except SecurityConfigError as exc:
        raise StartupError(str(exc)) from exc
    if link is None:
        log.warning("share_forwarding_unavailable", reason="no PLAINTEXT listener and no inter.broker.listener.name "
                    "for shard 0 to forward ShareFetch and ShareAcknowledge to the shard holding the group: share "
                    "groups placed on shards k >= 1 are refused")
        return None
    view, layout, index = server.view, server.layout, server.shard_index
    shard_zero = functools.partial(view.data_node, link.listener)

    def endpoint(node_id: int) -> tuple[str, int]:
        node = shard_zero()  # every embedded partition's leader (ctx.node_id is never set in embedded mode)
        return node.host, node.port

    holders = Holders(lambda group_id: layout.shard_of_group(group_id) == index,
                      functools.partial(view.node_of_group, listener=link.listener),
                      lambda: view.node.node_id, endpoint, link.security, leader=view.data_node)
    return holders, shard_zero


def _shifted(listener: Listener, shard: int) -> Listener:
    """Shard k's copy of a listener: the same host, port + k (bound and advertised)."""
    if not shard:
        return listener
    return dataclasses.replace(listener, port=listener.port + shard,
                               advertised_port=listener.advertised_port + shard)
