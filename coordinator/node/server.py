"""Server lifecycle: build the services, open the listeners, serve, drain and stop.

Start-up order: the data directory is checked (a directory we can write); the metrics listener; the
data directory's lock (waiting as a standby while another process owns it); the Kafka listener; the
log load; then group APIs. `ready` (and /readyz) turns true once the listener is open and state is
loaded. With several shards, shard k >= 1 also reads its copy of shard 0's SCRAM credentials and
ACLs (`shards/security_mirror.py`) while it loads, and is not loaded before the copy is; shard 0
opens the channel the others forward security writes through (`shards/security_channel.py`) once
it is loaded.

A standby opens its metrics listener at once, so /healthz answers while it waits (/readyz says not
ready) -- unless the address is taken, which with the default settings means the active process on
the same host holds it: then the standby opens it when it takes over. Anything that stops start-up
(a port in use, a data directory that is not a writable directory, a corrupt catalog) raises
`StartupError` (`runtime/startup_checks.py`, with the checks of the data directory; the checks that know the
shards and the sidecar are `node/startup_checks.py`), which the command line
prints as one line and exit code 2.

`stop()` stops accepting, lets the request in flight on every connection finish (bounded by
`shutdown.timeout.ms`), then closes.
"""

from __future__ import annotations

import asyncio
import errno
import itertools
import os
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from protocol.codec import RequestCodec

from .. import metrics
from ..api.declaration import DeclarationError
from ..api.registry import ApiRegistry
from ..catalog import TopicCatalog, TopicSource
from ..clusterlog.membership import LogMembership
from ..clusterlog.owner import UpstreamLog
from ..clusterlog.settings import ClusterLogConfig
from ..clusterlog.sink import UpstreamSink
from ..config import Config
from ..core.config import GroupConfig
from ..core.registry import GroupTypeFactory
from ..core.shard import GROUP_TYPES, CoordinatorShard
from ..history.assignments import CoreAssignments
from ..history.writer import HistoryWriter
from ..logging import get_logger
from ..recordlog import (
    CompactionReport,
    DataDirLock,
    GroupCommitter,
    LogConfig,
    LogTailer,
    try_lock_data_dir,
)
from ..runtime import durable, kafka_metrics, ownership
from ..runtime.apis import (
    Node,
    NodeView,
    TopicDefaults,
    bootstrap_handlers,
    consumer_groups,
    group_handlers,
)
from ..runtime.apis.streams_groups import CatalogTopics
from ..runtime.connection import KafkaConnection
from ..runtime.connection_services import ConnectionServices
from ..runtime.connection_table import ConnectionTable
from ..runtime.durable import DurableSink
from ..runtime.shard import ShardRuntime
from ..runtime.shard_contract import LogSink
from ..runtime.startup_checks import (
    StartupError,
    check_log_dir_kept,
    directory_identity,
    prepare_data_dir,
    reason,
)
from ..security.apis import security_handlers
from ..security.authorizer import Authorizer
from ..security.failures import AuthenticationFailures
from ..security.gate import ListenerGate
from ..security.settings import ConnectionLimits
from ..security.store import SecurityStore, security_of
from ..security.upstream import UpstreamSecurity
from ..shards.placement import shard_data_dir
from ..shards.security_channel import SecurityChannel, SecurityForwarder
from ..shards.security_mirror import SecurityMirror
from ..sidecar.forwarder import Route
from ..sidecar.settings import SidecarConfig
from ..sidecar.sidecar import Sidecar
from . import dataplane, log_upstream, maintenance, observers, plugins, shards, sidecar
from .apis import assemble
from .security import install as security_install
from .startup_checks import check_layout

log = get_logger("coordinator.server")



class CoordinatorServer:
    """One coordinator node. With `coordinator.shards` above 1 it is shard `shard` of the layout
    (`coordinator/shards/placement.py`): node `node.id + shard`, each listener's port `+ shard`,
    its log and lock in its shard directory; the topic catalog is the root's, shared by every
    shard, and the embedded data plane is served by shard 0 alone. In sidecar mode shard k is node
    `sidecar.node.id + k`, and every shard forwards (`coordinator/sidecar`)."""

    def __init__(self, config: Config, shard: int | None = None, *,
                 group_types: Sequence[GroupTypeFactory] = ()) -> None:
        """``group_types``: group types to host besides the built-in ones (``core.shard.GROUP_TYPES``),
        e.g. one defined outside ``coordinator/``; every core this node builds (owner, standby,
        reload) hosts them."""
        self.config = config
        self.plugins = plugins.load(config["coordinator.plugins"])
        self.group_types: tuple[GroupTypeFactory, ...] = (*GROUP_TYPES, *self.plugins.group_types, *group_types)
        # The plug-in types' settings, resolved with the configuration: every core gets the same.
        self.type_settings: dict[type[Any], Any] = {struct: config.build(struct) for struct in self.plugins.settings}
        self.layout, self.shard_index = shards.layout(config, shard)
        self.root = config.data_dir
        self.data_dir = shard_data_dir(self.root, self.shard_index)
        """This shard's own directory: its record log, lock, history (the root for shard 0)."""
        self.listeners = shards.listeners(config, self.layout, self.shard_index)
        host, port = config.advertised
        port = port + self.shard_index if port else port
        # Sidecar mode (upstream.bootstrap.servers set): no embedded catalog or data plane; topics
        # come from the upstream, and what is not a group API is forwarded (coordinator/sidecar).
        self.sidecar: Sidecar | None = None
        sidecar_config = config.build(SidecarConfig)
        # Shard k is node `first + k`: node.id's, or in sidecar mode sidecar.node.id's (the
        # coordinator's own nodes there, beside the upstream's brokers).
        first_node_id = sidecar_config.sidecar_node_id if sidecar_config.upstream_bootstrap_servers else config["node.id"]
        node_id = first_node_id + self.shard_index
        self.catalog = TopicCatalog(None if sidecar_config.upstream_bootstrap_servers else config.data_dir / "topics.json",
                                    shared=self.layout.shards > 1)
        self.view = NodeView(Node(node_id, host, port), config["cluster.id"], self.catalog,
                             TopicDefaults(config["num.partitions"], config["auto.create.topics.enable"]),
                             {listener.name: Node(node_id, listener.advertised_host or host, listener.advertised_port)
                              for listener in self.listeners}, self.layout, self.shard_index,
                             shards.cluster(config, first_node_id, self.layout, host))
        owns = shards.owns(self.layout, self.shard_index)
        # coordinator.log.storage=upstream: the record log is the upstream's log topic, and the
        # groups served are those of the log partitions the instance group gave this instance.
        self.cluster_log = config.build(ClusterLogConfig)
        self.upstream_log: UpstreamLog | None = None
        self.membership: LogMembership | None = None
        self._sink: UpstreamSink | None = None
        security: UpstreamSecurity | None = None
        if sidecar_config.upstream_bootstrap_servers:
            security = sidecar.upstream_credentials(config, sidecar_config, self.layout.shards)
            if self.cluster_log.upstream:
                self.upstream_log = log_upstream.build(config, self.cluster_log, sidecar_config, security,
                                                       self.layout.partitions, self.layout.shards, node_id)
                owns = self.upstream_log.owns_group
            self.sidecar = sidecar.build(self, config, sidecar_config, node_id, owns, security,
                                         self._connection_factory)
        self.topics: TopicSource = self.sidecar.catalog if self.sidecar else self.catalog
        self.gates: dict[str, ListenerGate] = {}
        self.limits: ConnectionLimits
        self.auth_failures: AuthenticationFailures
        self.authorizer: Authorizer | None = None
        """Set when `authorizer.class.name` is (connections hand it to handlers as `ctx.authz`)."""
        self.security_channel: SecurityChannel | None = None
        self.security_mirror: SecurityMirror | None = None
        self.security_forwarder: SecurityForwarder | None = None
        security_install(self, config)
        shards.install(self)
        # Partition data: opened (recovered) once this process owns the data directory.
        self.store = dataplane.build(config, self.catalog, _fail_stop)
        self.shard: ShardRuntime | None = None
        self.history: HistoryWriter | None = None
        declared = [*bootstrap_handlers(self.view, lambda: self.registry.version_ranges()),
                    *group_handlers(lambda: self.shard, tuple(config["group.coordinator.rebalance.protocols"]),
                                    self.topics, self.sidecar.internal_topics if self.sidecar is not None
                                    else CatalogTopics(self.catalog.create)),
                    *security_handlers(lambda: self.shard, self.security_forwarder),
                    *self.plugins.apis(lambda: self.shard)]
        if self.sidecar is not None:
            declared = sidecar.apis(self, declared)
        else:
            declared += dataplane.apis(self, config)
        try:
            handlers = assemble(declared, owns, self.upstream_log.refusal if self.upstream_log is not None else None)
            handlers = sidecar.serve_locally(self, handlers)
            self.registry = ApiRegistry(handlers)
        except DeclarationError as exc:
            raise StartupError(str(exc)) from exc
        self.codec = RequestCodec(self.registry.version_ranges())
        self.connections = ConnectionTable(config["max.connections"], self.limits, config["queued.max.request.bytes"])
        self.connection_services = ConnectionServices(
            config["socket.request.max.bytes"], self.connections, self.codec, self.registry, self.authorizer,
            self.auth_failures, self.wait_loaded)
        """What each connection is given of this node (never the server itself)."""
        self._ids = itertools.count(1)
        self._servers: dict[str, asyncio.Server] = {}
        self._loaded_event = asyncio.Event()
        self._metrics_server: metrics.MetricsServer | None = None
        self._metrics_deferred = False
        self._loaded = False
        self._stopped = asyncio.Event()
        self._started = False  # server_started was logged: only then does stopping log server_stopped
        self._background: list[asyncio.Task[None]] = []
        self._fs = durable.TimedFileSystem()
        self._lock: DataDirLock | None = None
        self._committer: GroupCommitter | None = None
        self._assignments: CoreAssignments | None = None
        durable.LOG_BYTES.set_function(lambda: durable.log_size(str(self.log_dir))[0])
        durable.LOG_SEGMENTS.set_function(lambda: durable.log_size(str(self.log_dir))[1])

    @property
    def serves_data_plane(self) -> bool:
        """Embedded mode's partitions are served by shard 0 alone: one process owns every data
        file, so the data plane's crash guarantees stay those of a single process."""
        return self.sidecar is None and self.shard_index == 0

    @property
    def node(self) -> Node:
        """This node as clients are told of it (the API handlers read it from `view`)."""
        return self.view.node

    @node.setter
    def node(self, node: Node) -> None:
        self.view.node = node

    # -- lifecycle ----------------------------------------------------------------------------
    @property
    def ready(self) -> bool:
        """Listeners open, state loaded, and in sidecar mode the upstream answering (a sidecar
        that cannot reach its upstream cannot serve data: load balancers should look elsewhere)."""
        return (self._loaded and bool(self._servers) and all(s.is_serving() for s in self._servers.values())
                and (self.sidecar is None or self.sidecar.upstream_reachable))

    @property
    def port(self) -> int:
        """The bound port of the first listener."""
        return self.ports[self.listeners[0].name]

    @property
    def ports(self) -> dict[str, int]:
        """Bound port of each listener, by name."""
        return {name: int(server.sockets[0].getsockname()[1]) for name, server in self._servers.items()}

    async def wait_loaded(self) -> None:
        await self._loaded_event.wait()

    def _security_store(self) -> SecurityStore | None:
        """SCRAM credentials and ACLs, once the log is loaded (None before): the shard's own, or
        on shard k >= 1 of several its copy of shard 0's (read before `_loaded` is set)."""
        if not self._loaded or self.shard is None:
            return None
        return self.security_mirror.store if self.security_mirror is not None else security_of(self.shard.core)

    @property
    def metrics_port(self) -> int | None:
        return self._metrics_server.port if self._metrics_server else None

    async def start(self) -> None:
        """Check the data directory, open the metrics listener, take the data directory (as a
        standby first if another process owns it), open the Kafka listener, load the log, then
        serve group APIs. Raises `StartupError` when the configuration cannot be served."""
        prepare_data_dir(self.root)
        prepare_data_dir(self.data_dir)
        check_layout(self.root, self.layout)
        await self._open_metrics(may_defer=True)
        # Owner (listener open) but not loaded yet = Kafka's "loading" partition state.
        kafka_metrics.register(lambda: self.shard if self._loaded else None,
                               lambda: bool(self._servers) and not self._loaded)
        sidecar.start(self)
        copied = shards.mirror_started(self)
        writer_epoch: int | None = None
        if self.upstream_log is not None:
            await log_upstream.start(self, self.upstream_log)
        else:
            log_dir_before = directory_identity(self.log_dir)
            self._lock, record_log, loaded = await ownership.acquire(
                self._fs, self.data_dir, self.log_dir, self.config.build(LogConfig), self._new_core,
                self._become_owner)
            core = loaded.core
            # A standby may have waited through a move of the partitions: its tailed state is of the
            # old logs. A move to another shard count shows in the layout; one that came back to this
            # count (1 -> 2 -> 1) only in the log directory, which every move replaces.
            check_layout(self.root, self.layout)
            check_log_dir_kept(self.log_dir, log_dir_before)
            self._committer = GroupCommitter(record_log, on_fatal=_fail_stop)
            self._committer.start()
            writer_epoch = record_log.writer_epoch
            await self._load_shard(core, DurableSink(self._committer), copied)
        await shards.channel_opened(self)
        maintenance.install(self)
        metrics.READY.set(1)
        ports = self.ports
        named = len(self.listeners) > 1  # one listener is logged as host:port, as before listener names

        def address(name: str, host: str, port: int) -> str:
            return f"{name}://{host}:{port}" if named else f"{host}:{port}"

        log.info(
            "server_started",
            listen=",".join(address(listener.name, listener.host, ports[listener.name]) for listener in self.listeners),
            advertised=",".join(address(name, node.host, node.port) for name, node in self.view.endpoints.items()),
            node_id=self.node.node_id, metrics_port=self.metrics_port, data_dir=str(self.data_dir),
            shard=self.shard_index,
            apis=len(list(self.registry)), writer_epoch=writer_epoch,
            log_storage=self.cluster_log.log_storage,
        )
        self._started = True

    @property
    def log_dir(self) -> Path:
        return self.data_dir / "log"

    async def _become_owner(self) -> None:
        """The data directory is ours: take the catalog as the previous owner left it, declare
        configured topics, and open the Kafka listener (group APIs answer
        COORDINATOR_LOAD_IN_PROGRESS until the log is loaded)."""
        if self.sidecar is None:
            self.catalog.reload()
        dataplane.opened(self)
        if self._metrics_deferred:
            self._metrics_deferred = False
            await self._open_metrics(may_defer=False)
        loop = asyncio.get_running_loop()
        # A TLS handshake that does not finish is an idle connection too.
        handshake_timeout = self.limits.connections_max_idle_ms / 1000
        for listener in self.listeners:
            gate = self.gates[listener.name]
            try:
                self._servers[listener.name] = await loop.create_server(
                    lambda gate=gate: self._connection_factory(None, gate),
                    listener.host or None, listener.port, reuse_address=True, ssl=gate.ssl_context,
                    ssl_handshake_timeout=handshake_timeout if gate.ssl_context is not None else None)
            except OSError as exc:
                raise StartupError(f"listeners {listener.name}://{listener.host}:{listener.port}: "
                                   f"{reason(exc)}") from exc
            if listener.advertised_port == 0:
                # Listening on port 0 (tests) advertises the port actually bound.
                told = self.view.endpoints[listener.name]
                self.view.endpoints[listener.name] = Node(told.node_id, told.host, self.ports[listener.name])
        self.node = self.view.endpoints[self.listeners[0].name]
        self._background.append(asyncio.create_task(self.connections.close_idle(), name="idle-connections"))
        await sidecar.activate(self)

    def _connection_factory(self, route: Route | None, gate: ListenerGate | None = None) -> KafkaConnection:
        if route is None and self.sidecar is not None:
            route = self.sidecar.route(None)  # the coordinator's own listener forwards to any broker
        # The sidecar's per-broker listeners serve as the first listener does.
        return KafkaConnection(self.connection_services, next(self._ids), route,
                               gate or self.gates[self.listeners[0].name])

    def _data_dir_free(self) -> bool:
        """Whether no other process owns the data directory now (we would not be a standby)."""
        lock = try_lock_data_dir(self._fs, str(self.data_dir))
        if lock is None:
            return False
        lock.release()
        return True

    async def _open_metrics(self, *, may_defer: bool) -> None:
        if self.config.metrics_listen is None:
            return
        host, port = self.config.metrics_listen
        server = metrics.MetricsServer(host or None, port, lambda: self.ready)
        try:
            await server.start()
        except OSError as exc:
            if may_defer and exc.errno == errno.EADDRINUSE and not self._data_dir_free():
                # We are a standby and the active process on this host has the address (default
                # settings): take it over with the Kafka listener, when this standby becomes the
                # owner. (Asked after the bind failed, so an owner that just started is seen.)
                log.warning("metrics_listener_deferred", listen=self.config["metrics.listen"],
                            reason="address in use while standby; opened at takeover")
                self._metrics_deferred = True
                return
            raise StartupError(f"metrics.listen {self.config['metrics.listen']}: {reason(exc)}") from exc
        self._metrics_server = server
        if self.layout.shards > 1:  # the supervisor scrapes each shard's endpoint
            _write_atomically(self.data_dir / metrics.METRICS_PORT_FILE, str(server.port))

    async def _load_shard(self, core: CoordinatorShard, sink: LogSink,
                          copied: asyncio.Future[None] | None = None) -> None:
        """Start serving the loaded core: the new owner's CoordinatorEpoch is made durable first,
        and (shard k >= 1 of several) the copy of shard 0's security state read (`copied`)."""
        shard = ShardRuntime(core, sink, reload=self._reload_core, on_fatal=_fail_stop)
        observers.install(self, shard, core)
        # KIP-848 groups assign from topic metadata: the core gets it as data, a snapshot first,
        # then every catalog change, through the shard's queue.
        await sidecar.ready(self)  # the upstream's topics are the snapshot
        shard.post(consumer_groups.topics_snapshot(self.topics))
        self.topics.add_listener(lambda change: shard.post(consumer_groups.topic_change(change)))
        # The local log's owner marks its takeover with a CoordinatorEpoch; upstream, each log
        # partition's transactional id fences instead, and a node-wide record would belong to no
        # partition this instance is sure to own.
        await shard.start(writer_id=None if self.upstream_log is not None else f"node-{self.node.node_id}-{uuid.uuid4()}")
        self.shard = shard
        sidecar.attach(self, shard)
        if copied is not None:
            await copied
        self._loaded = True
        self._loaded_event.set()

    def _new_core(self) -> CoordinatorShard:
        return CoordinatorShard(self.config.build(GroupConfig), stopwatch=time.perf_counter_ns,
                                services=(SecurityStore(),), group_types=self.group_types,
                                type_settings=self.type_settings)

    async def _reload_core(self) -> tuple[CoordinatorShard, list[Any]]:
        """A core loaded from the log as it is on disk now, and the topic snapshot to hand it
        first: the shard's state again after the disk refused a write (`ShardRuntime`)."""
        core = self._new_core()
        if self.upstream_log is not None:
            await log_upstream.load(self, core)
        else:
            replayer = ownership.Replayer(core)
            await asyncio.to_thread(LogTailer(self._fs, str(self.log_dir)).load, replayer)
        if self._assignments is not None:
            self._assignments.core = core
        return core, [consumer_groups.topics_snapshot(self.topics)]

    async def stop(self) -> None:
        if self._stopped.is_set():
            return
        metrics.READY.set(0)
        for task in self._background:
            task.cancel()
        for listening in self._servers.values():
            listening.close()
        sidecar.stop_accepting(self)
        for connection in self.connections:
            connection.drain()
        if self.security_channel is not None:
            await self.security_channel.stop()
        timeout = self.config["shutdown.timeout.ms"] / 1000
        if self.shard is not None and self._loaded:
            # Parked JoinGroup/SyncGroup requests would otherwise hold their connections until the
            # timeout; Kafka answers them NOT_COORDINATOR when a coordinator unloads.
            try:
                await asyncio.wait_for(self.shard.unload(), timeout)
            except TimeoutError:  # a shard still busy (a flood of requests): stop anyway, no traceback
                log.warning("shutdown_timeout", waiting_for="shard_unload", timeout_s=timeout)
        waits = [c.idle.wait() for c in self.connections]
        if waits:
            _, still_busy = await asyncio.wait([asyncio.ensure_future(w) for w in waits], timeout=timeout)
            for waiter in still_busy:
                waiter.cancel()
            if still_busy:
                log.warning("shutdown_timeout", connections_still_busy=len(still_busy))
        for connection in self.connections:
            connection.close()
        self.auth_failures.close()
        await log_upstream.leave(self, timeout)
        await sidecar.stop(self)
        if self.shard is not None:
            await self.shard.stop()
        await log_upstream.close(self)
        if self.history is not None:
            await self.history.close()
        if self._committer is not None:
            await self._committer.close()
        await dataplane.close(self)
        if self._lock is not None:
            self._lock.release()
        for listening in self._servers.values():
            await listening.wait_closed()
        if self._metrics_server is not None:
            await self._metrics_server.stop()
        self._stopped.set()
        if self._started:  # after a failed start-up the one line on stderr says it all
            log.info("server_stopped")

    async def compact_now(self) -> CompactionReport | None:
        """Compact the closed segments of the record log now (`maintenance.compact_now`)."""
        return await maintenance.compact_now(self)

    async def wait_stopped(self) -> None:
        await self._stopped.wait()


def _write_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _fail_stop(exc: BaseException) -> None:
    """A record-log or partition fsync failed (or a refused write could not be cut back): nothing
    may be acknowledged any more, and in-memory state may be ahead of the disk. Stop; a restart
    replays the log (fail-stop, no undo). A write the disk merely refused does not come here."""
    log.critical("record_log_failed_exiting", error=repr(exc))
    sys.stdout.flush()
    os._exit(1)

