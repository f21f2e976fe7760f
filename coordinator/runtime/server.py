"""Server lifecycle: build the services, open the listeners, serve, drain and stop.

Start-up order: data directory and catalog, state load, the Kafka listener, the metrics listener;
`ready` turns true once the listener is open and state is loaded. `stop()` stops accepting, lets the
request in flight on every connection finish (bounded by `shutdown.timeout.ms`), then closes.
"""

from __future__ import annotations

import asyncio
import itertools
import signal
import time
from dataclasses import dataclass

from protocol.codec import RequestCodec

from .. import metrics
from ..catalog import TopicCatalog
from ..config import Config
from ..core.config import GroupConfig
from ..core.shard import CoordinatorShard
from ..dataplane.config import DataPlaneConfig
from ..dataplane.handlers import dataplane_handlers
from ..dataplane.log import PartitionStore
from ..logging import get_logger
from . import group_metrics
from .apis import bootstrap_handlers, consumer_groups, group_handlers
from .connection import KafkaConnection
from .registry import ApiRegistry
from .shard import MemorySink, ShardRuntime

log = get_logger("coordinator.server")


@dataclass(frozen=True, slots=True)
class Node:
    node_id: int
    host: str
    port: int


class CoordinatorServer:
    def __init__(self, config: Config) -> None:
        self.config = config
        host, port = config.advertised
        self.node = Node(config["node.id"], host, port)
        self.catalog = TopicCatalog(config.data_dir / "topics.json")
        self.store = PartitionStore(self.catalog, dataplane_config(config),
                                    retention_check_interval_ms=config["log.retention.check.interval.ms"])
        self.shard: ShardRuntime | None = None
        self.registry = ApiRegistry([
            *bootstrap_handlers(self),
            *group_handlers(lambda: self.shard),
            *dataplane_handlers(self.catalog, self.store, self.store.config),
        ])
        self.codec = RequestCodec(self.registry.version_ranges())
        self._connections: set[KafkaConnection] = set()
        self._ids = itertools.count(1)
        self._server: asyncio.Server | None = None
        self._metrics_server: metrics.MetricsServer | None = None
        self._loaded = False
        self._stopped = asyncio.Event()
        self._background: list[asyncio.Task[None]] = []

    # -- lifecycle ----------------------------------------------------------------------------
    @property
    def ready(self) -> bool:
        return self._loaded and self._server is not None and self._server.is_serving()

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.sockets[0].getsockname()[1])

    @property
    def metrics_port(self) -> int | None:
        return self._metrics_server.port if self._metrics_server else None

    async def start(self) -> None:
        self.config.data_dir.mkdir(parents=True, exist_ok=True)
        self._declare_topics()
        if self.config.metrics_listen is not None:
            mhost, mport = self.config.metrics_listen
            self._metrics_server = metrics.MetricsServer(mhost, mport, lambda: self.ready)
            await self._metrics_server.start()
        host, port = self.config.listen
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: KafkaConnection(self, next(self._ids)), host, port, reuse_address=True
        )
        if not self.config["advertised.listeners"]:
            # Listening on port 0 (tests) advertises the port actually bound.
            self.node = Node(self.node.node_id, self.node.host, self.port)
        await self._load_shard()
        self._background.append(asyncio.create_task(self._enforce_retention(), name="retention"))
        metrics.READY.set(1)
        log.info(
            "server_started", listen=f"{host}:{self.port}", advertised=f"{self.node.host}:{self.node.port}",
            node_id=self.node.node_id, metrics_port=self.metrics_port, data_dir=str(self.config.data_dir),
            apis=len(list(self.registry)),
        )

    async def _load_shard(self) -> None:
        """Replay the record log into a fresh core shard, then start serving group APIs."""
        shard = ShardRuntime(CoordinatorShard(group_config(self.config), stopwatch=time.perf_counter_ns), MemorySink())
        shard.add_observer(group_metrics.observer(self.config["metrics.group.labels.enable"]))
        group_metrics.register_shard(lambda: self.shard)
        # KIP-848 groups assign from topic metadata: the core gets it as data, a snapshot first,
        # then every catalog change, through the shard's queue.
        shard.post(consumer_groups.topics_snapshot(self.catalog))
        self.catalog.add_listener(lambda change: shard.post(consumer_groups.topic_change(change)))
        shard.start()
        self.shard = shard
        self._loaded = True

    async def _enforce_retention(self) -> None:
        """Appends enforce retention as they go; idle partitions are swept on this interval."""
        interval = self.config["log.retention.check.interval.ms"] / 1000
        while True:
            await asyncio.sleep(interval)
            dropped = self.store.enforce_retention()
            if dropped:
                log.info("retention_enforced", bytes_dropped=dropped)

    def _declare_topics(self) -> None:
        for name, partitions in self.config["topics"]:
            existing = self.catalog.get(name)
            if existing is None:
                self.catalog.create(name, partitions)
            elif existing.num_partitions < partitions:
                self.catalog.grow(name, partitions)

    async def stop(self) -> None:
        if self._stopped.is_set():
            return
        metrics.READY.set(0)
        for task in self._background:
            task.cancel()
        if self._server is not None:
            self._server.close()
        for connection in list(self._connections):
            connection.drain()
        timeout = self.config["shutdown.timeout.ms"] / 1000
        if self.shard is not None:
            # Parked JoinGroup/SyncGroup requests would otherwise hold their connections until the
            # timeout; Kafka answers them NOT_COORDINATOR when a coordinator unloads.
            await asyncio.wait_for(self.shard.unload(), timeout)
        waits = [c.idle.wait() for c in self._connections]
        if waits:
            _, still_busy = await asyncio.wait([asyncio.ensure_future(w) for w in waits], timeout=timeout)
            for waiter in still_busy:
                waiter.cancel()
            if still_busy:
                log.warning("shutdown_timeout", connections_still_busy=len(still_busy))
        for connection in list(self._connections):
            connection.close()
        if self.shard is not None:
            await self.shard.stop()
        if self._server is not None:
            await self._server.wait_closed()
        if self._metrics_server is not None:
            await self._metrics_server.stop()
        self._stopped.set()
        log.info("server_stopped")

    async def wait_stopped(self) -> None:
        await self._stopped.wait()

    # -- connections --------------------------------------------------------------------------
    def admit(self, connection: KafkaConnection) -> bool:
        if len(self._connections) >= self.config["max.connections"]:
            return False
        self._connections.add(connection)
        return True

    def release(self, connection: KafkaConnection) -> bool:
        if connection in self._connections:
            self._connections.remove(connection)
            return True
        return False


async def serve(config: Config) -> int:
    """Run until SIGTERM or SIGINT; returns the process exit code."""
    server = CoordinatorServer(config)
    loop = asyncio.get_running_loop()
    stop_requested = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop_requested.set)
    await server.start()
    await stop_requested.wait()
    log.info("shutdown_requested")
    await server.stop()
    return 0


def group_config(config: Config) -> GroupConfig:
    """Kafka's keys onto the core's millisecond settings."""
    return GroupConfig(
        group_min_session_timeout_ms=config["group.min.session.timeout.ms"],
        group_max_session_timeout_ms=config["group.max.session.timeout.ms"],
        group_initial_rebalance_delay_ms=config["group.initial.rebalance.delay.ms"],
        group_max_size=config["group.max.size"],
        offsets_retention_ms=config["offsets.retention.minutes"] * 60_000,
        offsets_retention_check_interval_ms=config["offsets.retention.check.interval.ms"],
        offset_metadata_max_bytes=config["offset.metadata.max.bytes"],
        consumer_group_session_timeout_ms=config["group.consumer.session.timeout.ms"],
        consumer_group_min_session_timeout_ms=config["group.consumer.min.session.timeout.ms"],
        consumer_group_max_session_timeout_ms=config["group.consumer.max.session.timeout.ms"],
        consumer_group_heartbeat_interval_ms=config["group.consumer.heartbeat.interval.ms"],
        consumer_group_min_heartbeat_interval_ms=config["group.consumer.min.heartbeat.interval.ms"],
        consumer_group_max_heartbeat_interval_ms=config["group.consumer.max.heartbeat.interval.ms"],
        consumer_group_max_size=config["group.consumer.max.size"],
        consumer_group_assignors=tuple(config["group.consumer.assignors"]),
    )


def dataplane_config(config: Config) -> DataPlaneConfig:
    return DataPlaneConfig(
        message_max_bytes=config["message.max.bytes"],
        log_retention_bytes=config["log.retention.bytes"],
        log_retention_ms=config["log.retention.ms"],
        log_message_timestamp_type=config["log.message.timestamp.type"],
        fetch_max_bytes=config["fetch.max.bytes"],
        max_incremental_fetch_session_cache_slots=config["max.incremental.fetch.session.cache.slots"],
        partition_max_bytes=config["dataplane.max.bytes"],
        total_max_bytes=config["dataplane.total.max.bytes"],
    )
