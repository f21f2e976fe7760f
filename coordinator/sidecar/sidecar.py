"""Sidecar mode: the coordinator in front of an existing Kafka-compatible cluster.

Who talks to whom: clients bootstrap at the coordinator's listener; Metadata (forwarded, rewritten)
hands them one listener of ours per upstream broker; group APIs are served here on every listener;
everything else is forwarded as bytes to the upstream broker the listener stands for. The group
side sees only a topic source (`UpstreamCatalog`) and never learns which mode it runs in.

This object wires the parts together for the server: the upstream view (`cluster`), the listener
set, per-connection routes, the ApiVersions table, offset import and mirror.

With several shards (`coordinator.shards`) each shard process has its own `Sidecar`: it reads the
upstream on its own (brokers, topics), coordinates the groups of its partitions (node
`sidecar.node.id + k`: FindCoordinator names it, offsets are imported and mirrored by it), and
forwards data-plane requests like every other shard (the broker listeners are shared, see
`listeners`). A forwarded CreateTopics, DeleteTopics or CreatePartitions also tells the other
shards (`TopicsChanged`), which read the upstream's topics again at once, as the forwarding shard does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..config import Config, parse_host_port
from ..logging import get_logger
from ..runtime.apis import api_versions, find_coordinator
from ..runtime.apis.common import respond
from ..runtime.apis.view import NodeView
from ..runtime.registry import ApiHandler, RequestContext, response_of
from ..security.upstream import UpstreamSecurity
from . import apis
from .cluster import UpstreamCluster
from .forwarder import Route
from .listeners import ListenerSet
from .offsets import OffsetBridge
from .settings import SidecarConfig
from .topics_changed import TopicsChanged

if TYPE_CHECKING:
    from ..runtime.shard import ShardRuntime

log = get_logger("coordinator.sidecar")

TRANSACTION = 1  # FindCoordinator key type


class Sidecar:
    def __init__(self, config: Config, node_id: int, coordinators: Callable[[], Sequence[tuple[int, str, int]]],
                 factory: Callable[[Route | None], asyncio.BaseProtocol],
                 shard: Callable[[], ShardRuntime | None], owns: Callable[[str], bool] | None = None,
                 topics_changed: TopicsChanged | None = None, security: UpstreamSecurity | None = None) -> None:
        """`node_id` is this process's coordinator node; `coordinators` every shard's (shard 0
        first); `owns` says which groups this shard coordinates (None: all, one shard);
        `topics_changed` is shared with the other shards (None: one shard); `security` the
        coordinator's own upstream credentials (None: PLAINTEXT)."""
        settings = config.build(SidecarConfig)
        bootstrap = [parse_host_port(s) for s in settings.upstream_bootstrap_servers]
        self.security = security
        """This sidecar's upstream credentials (TLS, SASL; None: PLAINTEXT): every connection it opens upstream."""
        self.cluster = UpstreamCluster(bootstrap, settings.upstream_metadata_max_age_ms, self._brokers_changed,
                                       security)
        self.catalog = self.cluster.catalog
        bind_host, _ = config.listen
        advertised_host, _ = config.advertised
        self.sharded = topics_changed is not None
        """One of several shards: the broker listeners are shared with the others."""
        self.listeners = ListenerSet(bind_host, advertised_host, settings.sidecar_listener_base_port,
                                     coordinators, lambda node_id: factory(self.route(node_id)),
                                     reuse_port=self.sharded)
        self.offsets = OffsetBridge(self.cluster, shard, settings.upstream_offsets_mirror_interval_ms, owns)
        self.node_id = node_id
        self._coordinators = coordinators
        self._topics_changed = topics_changed
        self._watching: asyncio.Task[None] | None = None
        self.local_keys: frozenset[int] = frozenset()
        apis.warm()
        self._table: tuple[Mapping[int, tuple[int, int]], dict[int, tuple[int, int]]] | None = None

    # -- wiring -------------------------------------------------------------------------------
    def handlers(self, view: NodeView, ours: Callable[[], Mapping[int, tuple[int, int]]]) -> list[ApiHandler]:
        """The bootstrap APIs served here in sidecar mode (Metadata, DescribeCluster and the topic
        APIs are forwarded): ApiVersions with the merged table (answered once the upstream's ranges
        are known), FindCoordinator (transaction keys asked of the upstream), and the
        TxnOffsetCommit refusal. `ours` is the registry's own table."""
        versions = api_versions.api_versions(lambda: self.api_table(ours()) or ours())
        locate = find_coordinator.find_coordinator(view)

        def handle_versions(ctx: RequestContext, request: Any) -> Any:
            if not self.cluster.api_ranges:
                return self.after_ready(lambda: versions.handle(ctx, request))
            return versions.handle(ctx, request)

        def handle_locate(ctx: RequestContext, request: Any) -> Any:
            if getattr(request, "key_type", 0) == TRANSACTION:
                return self._find_transaction_coordinators(ctx, request)
            return locate.handle(ctx, request)

        return [
            ApiHandler(versions.api_key, versions.min_version, versions.max_version, handle_versions),
            ApiHandler(locate.api_key, locate.min_version, locate.max_version, handle_locate),
            apis.txn_offset_commit_refusal(),
        ]

    def serve_locally(self, handlers: list[ApiHandler]) -> list[ApiHandler]:
        """The handlers the registry gets: group APIs gated by the offset import and watched for
        unknown topics; the keys they cover are the ones never forwarded."""
        wrapped = [self.offsets.gate(self.offsets.watch_deletions(self._watch_subscriptions(h))) for h in handlers]
        self.local_keys = frozenset(h.api_key for h in wrapped)
        return wrapped

    def route(self, node_id: int | None) -> Route:
        return Route(self, node_id)

    def api_table(self, ours: Mapping[int, tuple[int, int]]) -> Mapping[int, tuple[int, int]] | None:
        """The ApiVersions table, or None until the upstream's ranges are known."""
        if not self.cluster.api_ranges:
            return None
        if self._table is None or self._table[0] is not self.cluster.api_ranges:
            self._table = (self.cluster.api_ranges, apis.api_table(ours, self.cluster.api_ranges))
        return self._table[1]

    async def after_ready(self, then: Callable[[], Any]) -> Any:
        await self.cluster.ready.wait()
        return await response_of(then())

    async def _find_transaction_coordinators(self, ctx: RequestContext, request: Any) -> Any:
        keys = list(request.coordinator_keys) if ctx.api_version >= 4 else [request.key]
        await self.cluster.ready.wait()
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

    def _watch_subscriptions(self, handler: ApiHandler) -> ApiHandler:
        """A KIP-848 subscription naming a topic we do not know, or a regex, asks for a Metadata
        refresh at once (the group's target follows the catalog change it brings). So does an
        OffsetCommit naming a topic we do not know: it is answered UNKNOWN_TOPIC_OR_PARTITION, a
        retriable error, and the client's retry finds the topic if the upstream has it."""
        if handler.api_key == 8:
            return self._watch_commits(handler)
        if handler.api_key != 68:
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

        return ApiHandler(handler.api_key, handler.min_version, handler.max_version, handle)

    def _watch_commits(self, handler: ApiHandler) -> ApiHandler:
        inner = handler.handle

        def handle(ctx: RequestContext, request: Any) -> Any:
            if ctx.api_version < 10:
                if any(self.catalog.get(t.name) is None for t in request.topics):
                    self.cluster.request_refresh()
            elif any(t.topic_id is None or self.catalog.by_id(t.topic_id) is None for t in request.topics):
                self.cluster.request_refresh()
            return inner(ctx, request)

        return ApiHandler(handler.api_key, handler.min_version, handler.max_version, handle)
