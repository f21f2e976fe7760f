"""Sidecar mode: the coordinator in front of an existing Kafka-compatible cluster.

Who talks to whom: clients bootstrap at the coordinator's listener; Metadata (forwarded, rewritten)
hands them one listener of ours per upstream broker; group APIs are served here on every listener;
everything else is forwarded as bytes to the upstream broker the listener stands for. The group
side sees only a topic source (`UpstreamCatalog`) and never learns which mode it runs in.

This object wires the parts together for the server: the upstream view (`cluster`), the listener
set, per-connection routes, the ApiVersions table, the answers made while the upstream is away
(`fallback`), offset import and mirror.

The upstream away (at start, or later): the coordinator's listener opens all the same and answers
at once: ApiVersions (the provisional table until the upstream's ranges are first known), Metadata
and data requests as a broker whose partition leaders are unavailable (`unreachable`), group APIs
COORDINATOR_LOAD_IN_PROGRESS until the first upstream Metadata has been read and the log loaded
(then served as ever: groups live here). /readyz is false while the upstream is unreachable
(`upstream_reachable`).

With several shards (`coordinator.shards`) each shard process has its own `Sidecar`: it reads the
upstream on its own (brokers, topics), coordinates the groups of its partitions (node
`sidecar.node.id + k`: FindCoordinator names it, offsets are imported and mirrored by it), and
forwards data-plane requests like every other shard (the broker listeners are shared, see
`listeners`). A forwarded CreateTopics, DeleteTopics or CreatePartitions also tells the other
shards (`TopicsChanged`), which read the upstream's topics again at once, as the forwarding shard does.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from ..api.registry import ApiHandler, RequestContext
from ..api.respond import respond
from ..logging import get_logger
from ..runtime.apis import api_versions, find_coordinator
from ..runtime.apis.view import NodeView
from ..security.upstream import UpstreamSecurity
from ..settings import parse_host_port
from . import apis
from .cluster import UpstreamCluster
from .forwarder import Route
from .group_configs import ConfigSplit
from .internal_topics import UpstreamTopics
from .listeners import ListenerSet
from .offsets import OffsetBridge
from .settings import SidecarConfig
from .source_topics import AwaitedSources
from .topics_changed import TopicsChanged
from .txn_offsets import TxnOffsetCommits
from .unreachable import Fallback

if TYPE_CHECKING:
    from ..runtime.shard import ShardRuntime

log = get_logger("coordinator.sidecar")

TRANSACTION = 1  # FindCoordinator key type


class ClientConnection(Protocol):
    """What the sidecar needs of a client connection (`runtime.connection.KafkaConnection`)."""

    connection_id: int

    def close(self) -> None: ...


class Sidecar:
    def __init__(self, settings: SidecarConfig, hosts: tuple[str, str], node_id: int,
                 coordinators: Callable[[], Sequence[tuple[int, str, int]]],
                 factory: Callable[[Route | None], asyncio.BaseProtocol],
                 shard: Callable[[], ShardRuntime | None], owns: Callable[[str], bool] | None = None,
                 topics_changed: TopicsChanged | None = None, security: UpstreamSecurity | None = None,
                 connections: Callable[[], Iterable[ClientConnection]] = tuple, *,
                 authorizer: bool = False, shared_listeners: bool = False) -> None:
        """`settings` are sidecar mode's own; `hosts` the host the broker listeners bind and the
        one they advertise (the node's first listener's); `node_id` is this process's coordinator
        node; `coordinators` every shard's (shard 0 first); `owns` says which groups this shard
        coordinates (None: all, one shard); `topics_changed` is shared with the other shards
        (None: one shard); `security` the coordinator's own upstream credentials (None:
        PLAINTEXT); `connections` the client connections open now; `authorizer` whether an
        authorizer is configured; `shared_listeners` whether other instances open the same
        per-broker ports (the log upstream: several instances on one host share them, so a
        client's broker address outlives any one instance)."""
        bootstrap = [parse_host_port(s) for s in settings.upstream_bootstrap_servers]
        self.security = security
        """This sidecar's upstream credentials (TLS, SASL; None: PLAINTEXT): every connection it opens upstream."""
        self.cluster = UpstreamCluster(bootstrap, settings.upstream_metadata_max_age_ms, self._brokers_changed,
                                       security, on_versions=self._versions_known)
        self._connections = connections
        self._provisional: set[int] = set()
        """Connections told the provisional ApiVersions table (closed once the upstream's is known)."""
        self.catalog = self.cluster.catalog
        bind_host, advertised_host = hosts
        advertised_host = settings.sidecar_listener_advertised_host or advertised_host
        self.sharded = topics_changed is not None
        """One of several shards: the broker listeners are shared with the others."""
        self.listeners = ListenerSet(bind_host, advertised_host, settings.sidecar_listener_base_port,
                                     coordinators, lambda node_id: factory(self.route(node_id)),
                                     reuse_port=self.sharded or shared_listeners)
        # Under an authorizer the upstream authorizes what is forwarded: answers made here without
        # it must not describe topics.
        self.fallback = Fallback(self.cluster, self.listeners.address, coordinators,
                                 reveal_topics=not authorizer)
        """The answers to forwarded requests while the upstream cannot be reached."""
        self.offsets = OffsetBridge(self.cluster, shard, settings.upstream_offsets_mirror_interval_ms, owns)
        self.txn_offsets = TxnOffsetCommits(self.cluster, self.offsets, shard, owns)
        self.configs = ConfigSplit(self.cluster)
        self.internal_topics = UpstreamTopics(self.cluster, self.topics_changed)
        """Creates streams groups' internal topics on the upstream (the heartbeat's adapter asks)."""
        self.node_id = node_id
        self._coordinators = coordinators
        self._topics_changed = topics_changed
        self._watching: asyncio.Task[None] | None = None
        self.local_keys: frozenset[int] = frozenset()
        apis.warm()

    # -- wiring -------------------------------------------------------------------------------
    def handlers(self, view: NodeView, ours: Callable[[], Mapping[int, tuple[int, int]]]) -> list[ApiHandler]:
        """The bootstrap APIs served here in sidecar mode (Metadata, DescribeCluster and the topic
        APIs are forwarded): ApiVersions, FindCoordinator (transaction keys asked of the upstream),
        and TxnOffsetCommit (`txn_offsets`). `ours` is the registry's own table.

        ApiVersions is answered at once, as a broker answers it whatever else is going on: with the
        merged table once the upstream's ranges are known (they are kept while it is away), before
        that with the provisional one (`apis.provisional_table`: what is answered here). Each table
        gets its own handler, which caches its encoded answers."""
        provisional = api_versions.api_versions(lambda: apis.provisional_table(ours()))
        merged: dict[int, tuple[Mapping[int, tuple[int, int]], ApiHandler]] = {}
        locate = find_coordinator.find_coordinator(view)

        def handle_versions(ctx: RequestContext, request: Any) -> Any:
            ranges = self.cluster.api_ranges
            if not ranges:
                self._told_provisional(ctx.connection_id)
                return provisional.handle(ctx, request)
            built = merged.get(0)
            if built is None or built[0] is not ranges:  # first, or the upstream came back as another version
                table = apis.api_table(ours(), ranges)
                built = merged[0] = (ranges, api_versions.api_versions(lambda: table))
            return built[1].handle(ctx, request)

        def handle_locate(ctx: RequestContext, request: Any) -> Any:
            if getattr(request, "key_type", 0) == TRANSACTION:
                return self._find_transaction_coordinators(ctx, request)
            return locate.handle(ctx, request)

        return [
            dataclasses.replace(provisional, handle=handle_versions),
            dataclasses.replace(locate, handle=handle_locate),
            self.txn_offsets.handler(*apis.txn_offset_commit_versions()),
        ]

    def serve_locally(self, handlers: list[ApiHandler]) -> list[ApiHandler]:
        """The handlers the registry gets (the APIs declared served here): those declared
        `SidecarRoute.SERVED_AFTER_IMPORT` gated by the offset import, the group APIs watched for
        unknown topics, the config APIs split (`group_configs`: GROUP resources here, the rest
        upstream); the keys they cover are the ones never forwarded."""
        wrapped = [self.configs.wrap(
            self.offsets.gate(self.offsets.watch_deletions(self.txn_offsets.wrap(self._watch_subscriptions(h)))))
            for h in handlers]
        self.local_keys = frozenset(h.api_key for h in wrapped)
        return wrapped

    def route(self, node_id: int | None) -> Route:
        return Route(self, node_id)

    @property
    def upstream_reachable(self) -> bool:
        """The upstream answered the last refresh or probe (/readyz is false while it does not)."""
        return self.cluster.reachable

    async def _find_transaction_coordinators(self, ctx: RequestContext, request: Any) -> Any:
        keys = list(request.coordinator_keys) if ctx.api_version >= 4 else [request.key]
        found = await apis.locate_transaction_coordinators(self, [(key, TRANSACTION) for key in keys])
        if ctx.api_version >= 4:
            return respond(ctx, {"throttle_time": 0, "coordinators": found})
        return respond(ctx, {"throttle_time": 0, **found[0]})

    # -- lifecycle ----------------------------------------------------------------------------
    def start(self) -> None:
        log.info("sidecar_mode", upstream=self.cluster.names, listener_base_port=self.listeners.base_port,
                 coordinator_node_id=self.node_id)
        self.cluster.start()
        if self._topics_changed is not None:
            self._watching = asyncio.create_task(self._topics_changed.watch(self.cluster.request_refresh),
                                                 name="sidecar-topics-changed")

    async def activate(self) -> None:
        """The data directory is ours: open the per-broker listeners (now, or when Metadata comes)."""
        await self.listeners.activate()

    async def wait_ready(self) -> None:
        await self.cluster.ready.wait()
        await self.listeners.settled()

    def attach(self, shard: ShardRuntime) -> None:
        self.offsets.attach(shard)

    def topics_changed(self) -> None:
        """A forwarded request changed the upstream's topics: read them now (and so do the other shards)."""
        self.cluster.request_refresh()
        if self._topics_changed is not None:
            self._topics_changed.announce()

    def colliding_node_ids(self) -> dict[int, int]:
        """Upstream broker id -> the shard whose coordinator node has that id (several shards)."""
        ours = {node_id: k for k, (node_id, _, _) in enumerate(self._coordinators())}
        return {broker: ours[broker] for broker in sorted(self.cluster.brokers) if broker in ours}

    async def stop(self) -> None:
        if self._watching is not None:
            self._watching.cancel()
        self.listeners.close()
        await self.offsets.stop()
        await self.internal_topics.stop()
        await self.listeners.wait_closed()
        await self.cluster.stop()

    def _brokers_changed(self, brokers: dict[int, tuple[str, int]]) -> None:
        if not self.sharded:
            if self.node_id in brokers:
                log.warning("sidecar_node_id_collision", node_id=self.node_id,
                            detail="an upstream broker has sidecar.node.id; its listener serves the groups too")
        else:
            for node_id, k in self.colliding_node_ids().items():
                # Refused at start (the server checks the first Metadata); a broker added later:
                log.error("sidecar_node_id_collision", node_id=node_id, shard=k,
                          detail="an upstream broker has a coordinator shard's node id (sidecar.node.id + shard): "
                                 "clients cannot reach both; move sidecar.node.id clear of the upstream's broker ids")
        self.listeners.update(set(brokers))

    def _told_provisional(self, connection_id: int) -> None:
        told = self._provisional
        told.add(connection_id)
        if len(told) >= 1024 and len(told) & 1023 == 0:  # clients reconnecting all along: forget closed ones
            told &= {connection.connection_id for connection in self._connections()}

    def _versions_known(self) -> None:
        """The upstream's API versions are known: a connection told the provisional table would
        believe for its whole life that the forwarded APIs are not served, so it is closed, as a
        broker restart closes it, and its client negotiates again (the merged table now)."""
        told, self._provisional = self._provisional, set()
        closed = 0
        for connection in self._connections():
            if connection.connection_id in told:
                connection.close()
                closed += 1
        if closed:
            log.info("sidecar_connections_renegotiate", connections=closed,
                     reason="told ApiVersions before the upstream's were known")

    def _watch_subscriptions(self, handler: ApiHandler) -> ApiHandler:
        """A KIP-848 or share group subscription naming a topic we do not know, or a regex, asks for a Metadata
        refresh at once (the group's target follows the catalog change it brings). So does an
        OffsetCommit naming a topic we do not know: it is answered UNKNOWN_TOPIC_OR_PARTITION, a
        retriable error, and the client's retry finds the topic if the upstream has it. So does a
        streams member joining with a topology whose source topics we do not know (the group
        reports MISSING_SOURCE_TOPICS until a read brings them; its later heartbeats ask again, with a
        back-off, while they are missing: `source_topics`)."""
        if handler.api_key == 8:
            return self._watch_commits(handler)
        if handler.api_key == 88:
            return self._watch_topologies(handler)
        if handler.api_key not in (68, 76):  # ConsumerGroupHeartbeat, ShareGroupHeartbeat
            return handler
        inner = handler.handle
        seen_regexes: set[str] = set()

        def handle(ctx: RequestContext, request: Any) -> Any:
            names = request.subscribed_topic_names
            regex = getattr(request, "subscribed_topic_regex", None)
            if names and any(self.catalog.get(n) is None for n in names):
                self.cluster.request_refresh()
            elif regex and regex not in seen_regexes:
                seen_regexes.add(regex)
                self.cluster.request_refresh()
            return inner(ctx, request)

        return dataclasses.replace(handler, handle=handle)

    def _watch_topologies(self, handler: ApiHandler) -> ApiHandler:
        inner = handler.handle
        awaited = AwaitedSources(lambda name: self.catalog.get(name) is not None, self.cluster.request_refresh)

        def handle(ctx: RequestContext, request: Any) -> Any:
            topology = request.topology
            if topology is not None:
                awaited.joined(request.group_id, (t for s in topology.subtopologies for t in s.source_topics))
            else:
                awaited.heartbeat(request.group_id)
            return inner(ctx, request)

        return dataclasses.replace(handler, handle=handle)

    def _watch_commits(self, handler: ApiHandler) -> ApiHandler:
        inner = handler.handle

        def handle(ctx: RequestContext, request: Any) -> Any:
            if ctx.api_version < 10:
                if any(self.catalog.get(t.name) is None for t in request.topics):
                    self.cluster.request_refresh()
            elif any(t.topic_id is None or self.catalog.by_id(t.topic_id) is None for t in request.topics):
                self.cluster.request_refresh()
            return inner(ctx, request)

        return dataclasses.replace(handler, handle=handle)
