"""Sidecar mode: the coordinator in front of an existing Kafka-compatible cluster.

Who talks to whom: clients bootstrap at the coordinator's listener; Metadata (forwarded, rewritten)
hands them one listener of ours per upstream broker; group APIs are served here on every listener;
everything else is forwarded as bytes to the upstream broker the listener stands for. The group
side sees only a topic source (`UpstreamCatalog`) and never learns which mode it runs in.

This object wires the parts together for the server: the upstream view (`cluster`), the listener
set, per-connection routes, the ApiVersions table, offset import and mirror.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ..config import Config, parse_host_port
from ..logging import get_logger
from ..runtime.apis import api_versions, find_coordinator
from ..runtime.apis.common import respond
from ..runtime.apis.view import NodeView
from ..runtime.registry import ApiHandler, RequestContext
from . import apis
from .cluster import UpstreamCluster
from .forwarder import Route
from .listeners import ListenerSet
from .offsets import OffsetBridge
from .settings import SidecarConfig

if TYPE_CHECKING:
    from ..runtime.shard import ShardRuntime

log = get_logger("coordinator.sidecar")

TRANSACTION = 1  # FindCoordinator key type


class Sidecar:
    def __init__(self, config: Config, coordinator: Callable[[], tuple[int, str, int]],
                 factory: Callable[[Route | None], asyncio.BaseProtocol],
                 shard: Callable[[], ShardRuntime | None]) -> None:
        settings = config.build(SidecarConfig)
        bootstrap = [parse_host_port(s) for s in settings.upstream_bootstrap_servers]
        self.cluster = UpstreamCluster(bootstrap, settings.upstream_metadata_max_age_ms, self._brokers_changed)
        self.catalog = self.cluster.catalog
        bind_host, _ = config.listen
        advertised_host, _ = config.advertised
        self.listeners = ListenerSet(bind_host, advertised_host, settings.sidecar_listener_base_port,
                                     coordinator, lambda node_id: factory(self.route(node_id)))
        self.offsets = OffsetBridge(self.cluster, shard, settings.upstream_offsets_mirror_interval_ms)
        self._coordinator = coordinator
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
        result = then()
        return await result if asyncio.isfuture(result) or asyncio.iscoroutine(result) else result

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
                 coordinator_node_id=self._coordinator()[0])
        self.cluster.start()

    async def activate(self) -> None:
        """The data directory is ours: open the per-broker listeners (now, or when Metadata comes)."""
        await self.listeners.activate()

    async def wait_ready(self) -> None:
        await self.cluster.ready.wait()
        await self.listeners.settled()

    def attach(self, shard: ShardRuntime) -> None:
        self.offsets.attach(shard)

    async def stop(self) -> None:
        self.listeners.close()
        await self.offsets.stop()
        await self.listeners.wait_closed()
        await self.cluster.stop()

    def _brokers_changed(self, brokers: dict[int, tuple[str, int]]) -> None:
        node_id = self._coordinator()[0]
        if node_id in brokers:
            log.warning("sidecar_node_id_collision", node_id=node_id,
                        detail="an upstream broker has sidecar.node.id; its listener serves the groups too")
        self.listeners.update(set(brokers))

    def _watch_subscriptions(self, handler: ApiHandler) -> ApiHandler:
        """A KIP-848 subscription naming a topic we do not know, or a regex, asks for a Metadata
        refresh at once (the group's target follows the catalog change it brings)."""
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
