"""The sidecar installed into a node (`upstream.bootstrap.servers` set): the coordinator's own
credentials upstream checked at construction (`upstream_credentials`), the `Sidecar` built before
anything is opened (`build`), its API set laid over the declared one and its local answers
(`apis`, `serve_locally`), its upstream client started (`start`), its per-broker listeners opened
when the node takes the data directory (`activate`), the upstream's topics awaited before the
shard serves (`ready`, also where a shard's node id colliding with an upstream broker's stops
start-up) and the shard handed to it (`attach`), and at stop its listeners closed first
(`stop_accepting`) and the rest last (`stop`). The feature itself is `coordinator/sidecar`
(and, for share groups' APIs over the upstream, `coordinator/share/wiring.sidecar_share_apis`, with
`share_holders` where share requests are forwarded between processes)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..api.declaration import ApiDeclaration
from ..api.placement import Owns
from ..config import Config
from ..core.share.config import AutoOffsetReset
from ..logging import get_logger
from ..runtime.connection import KafkaConnection
from ..runtime.shard import ShardRuntime
from ..runtime.startup_checks import StartupError
from ..security.gate import SecurityConfigError
from ..security.peers import peer_link
from ..security.settings import (
    AuthorizerConfig,
    InterBrokerConfig,
    ListenerSecurityConfig,
    UpstreamSecurityConfig,
)
from ..security.upstream import UpstreamSecurity, upstream_security
from ..share.forward import Holders
from ..share.settings import ShareFetchConfig
from ..share.wiring import sidecar_share_apis
from ..sidecar.forwarder import Route
from ..sidecar.settings import SidecarConfig
from ..sidecar.sidecar import Sidecar
from ..sidecar.topics_changed import TopicsChanged
from .apis import served_by_sidecar
from .startup_checks import check_sidecar_shards

log = get_logger("coordinator.node.sidecar")

if TYPE_CHECKING:
    from .server import CoordinatorServer


def upstream_credentials(config: Config, settings: SidecarConfig, shards: int) -> UpstreamSecurity | None:
    """The coordinator's own credentials upstream, after the checks sidecar mode over shards needs;
    raises `StartupError` (one line) when they cannot be used."""
    if shards > 1:
        check_sidecar_shards(settings, shards)
    try:
        return upstream_security(config.build(UpstreamSecurityConfig))
    except SecurityConfigError as exc:
        raise StartupError(str(exc)) from exc


def build(server: CoordinatorServer, config: Config, settings: SidecarConfig, node_id: int, owns: Owns | None,
          security: UpstreamSecurity | None,
          connection_factory: Callable[[Route | None], KafkaConnection]) -> Sidecar:
    return Sidecar(settings, (config.listen[0], config.advertised[0]), node_id,
                   lambda: coordinator_nodes(server), connection_factory, lambda: server.shard, owns,
                   TopicsChanged(server.root) if server.layout.shards > 1 else None, security,
                   connections=lambda: server.connections,
                   authorizer=config.build(AuthorizerConfig).enabled,
                   shared_listeners=server.upstream_log is not None)


def coordinator_nodes(server: CoordinatorServer) -> list[tuple[int, str, int]]:
    """Every shard's coordinator node as the first listener advertises it (shard 0 first; this
    node alone with one shard), for the rewritten Metadata; with the log upstream, every other
    instance's node after this one."""
    listener = server.listeners[0].name
    nodes = [(n.node_id, n.host, n.port) for n in server.view.cluster(listener)]
    if server.upstream_log is not None:
        own = {node_id for node_id, _, _ in nodes}
        nodes += [n for n in server.upstream_log.instance_nodes(listener) if n[0] not in own]
    return nodes


def apis(server: CoordinatorServer, declared: list[ApiDeclaration]) -> list[ApiDeclaration]:
    """What sidecar mode registers of the declared APIs, the sidecar's own in place of some, and
    share groups' APIs served over the upstream. With several shards or instances sharing the log
    upstream, a per-broker listener's connection may reach a process that does not hold the group:
    its ShareFetch and ShareAcknowledge are forwarded to the one that does (`share/forward.py`)."""
    sidecar = server.sidecar
    assert sidecar is not None
    declared = [*declared, *sidecar_share_apis(
        lambda: server.shard, server.view, sidecar.cluster, sidecar.listeners.address,
        AutoOffsetReset.parse(server.config["share.auto.offset.reset"]), server.config.build(ShareFetchConfig),
        on_close=lambda listener: server.connections.closed.append(listener), holders=share_holders(server))]
    return served_by_sidecar(declared, sidecar.handlers(server.view, lambda: server.registry.version_ranges()))


def share_holders(server: CoordinatorServer) -> Holders | None:
    """Where share groups are held when this process is one of several (None when it holds them all):
    the instance owning the group's log partition, or the group's shard; each named by its coordinator
    node on the forwarding listener (`inter.broker.listener.name`, by default the first PLAINTEXT
    one), where a peer sends it ShareForward with that listener's TLS and the node's own SASL
    credentials (`security/peers.py`; a setting that cannot work raises `StartupError`). Without
    one, a share request reaching a process that does not hold its group is answered
    NOT_LEADER_OR_FOLLOWER (said once, at start-up)."""
    sidecar = server.sidecar
    assert sidecar is not None
    config = server.config
    try:
        link = peer_link(server.listeners, config.build(InterBrokerConfig),
                         lambda listener: config.for_listener(ListenerSecurityConfig, listener), config.jaas_config)
    except SecurityConfigError as exc:
        raise StartupError(str(exc)) from exc
    if link is None and (server.upstream_log is not None or server.layout.shards > 1):
        log.warning("share_forwarding_unavailable", reason="no PLAINTEXT listener and no inter.broker.listener.name "
                    "for the processes to forward ShareFetch and ShareAcknowledge to the one holding the group")
    holder = (functools.partial(server.view.node_of_group, listener=link.listener) if link is not None
              else lambda group_id: None)
    security = link.security if link is not None else None
    own = lambda: server.view.node.node_id  # noqa: E731 - the view's node is current once bound
    if server.upstream_log is not None:
        return Holders(server.upstream_log.owns_group, holder, own, sidecar.listeners.address, security)
    if server.layout.shards > 1:
        layout, index = server.layout, server.shard_index
        return Holders(lambda group_id: layout.shard_of_group(group_id) == index, holder, own,
                       sidecar.listeners.address, security)
    return None


def serve_locally(server: CoordinatorServer, handlers: list[ApiDeclaration]) -> list[ApiDeclaration]:
    """The assembled APIs as the sidecar serves them (unchanged without a sidecar)."""
    return server.sidecar.serve_locally(handlers) if server.sidecar is not None else handlers


def start(server: CoordinatorServer) -> None:
    if server.sidecar is not None:
        server.sidecar.start()


async def activate(server: CoordinatorServer) -> None:
    if server.sidecar is not None:
        await server.sidecar.activate()


async def ready(server: CoordinatorServer) -> None:
    """Before the shard serves: the upstream's topics are the core's first topic snapshot."""
    if server.sidecar is None:
        return
    await server.sidecar.wait_ready()
    if server.layout.shards > 1 and (collisions := server.sidecar.colliding_node_ids()):
        broker, k = next(iter(collisions.items()))
        raise StartupError(
            f"upstream broker {broker} has the node id of coordinator shard {k} (sidecar.node.id "
            f"{broker - k} + {k}): set sidecar.node.id above the upstream's broker ids")


def attach(server: CoordinatorServer, shard: ShardRuntime) -> None:
    if server.sidecar is not None:
        server.sidecar.attach(shard)


def stop_accepting(server: CoordinatorServer) -> None:
    if server.sidecar is not None:
        server.sidecar.listeners.close()


async def stop(server: CoordinatorServer) -> None:
    if server.sidecar is not None:
        await server.sidecar.stop()
