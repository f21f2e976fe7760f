"""The log upstream installed into a node (`coordinator.log.storage=upstream`, sidecar mode): the
log topic's `UpstreamLog` built at construction (`build`), the instance group joined and the
partitions it gives this instance loaded at start (`start`), replayed again on a reload (`load`),
FindCoordinator answered by the owner of a group's partition (`group_owner`), and the partitions
handed over and the writers closed at stop (`leave`, `close`). The feature itself is
`coordinator/clusterlog`; this module is its seam in the node's lifecycle."""

from __future__ import annotations

import asyncio
import functools
import os
import sys
import time
from typing import TYPE_CHECKING

from ..clusterlog.cluster import LogCluster, LogUnavailable
from ..clusterlog.membership import DuplicateNodeId, LogMembership
from ..clusterlog.owner import MembershipListener, TransactionsUnsupported, UpstreamLog
from ..clusterlog.settings import ClusterLogConfig
from ..clusterlog.sink import UpstreamSink
from ..clusterlog.tail import LogTail
from ..clusterlog.topic import LogTopicError
from ..config import Config
from ..core.shard import CoordinatorShard
from ..logging import get_logger
from ..recordlog import try_lock_data_dir
from ..runtime import durable, kafka_metrics
from ..runtime.apis import Node
from ..runtime.startup_checks import StartupError
from ..security.settings import AuthorizerConfig, ListenerSecurityConfig
from ..security.upstream import UpstreamSecurity
from ..settings import parse_host_port
from ..sidecar.settings import SidecarConfig

if TYPE_CHECKING:
    from .server import CoordinatorServer

log = get_logger("coordinator.server")


def build(config: Config, cluster_log: ClusterLogConfig, sidecar: SidecarConfig, security: UpstreamSecurity | None,
          partitions: int, shards: int, node_id: int) -> UpstreamLog:
    """The log upstream of this node, before anything is opened; raises `StartupError` (one line)
    where the settings cannot keep the log upstream."""
    if shards > 1:
        raise StartupError("coordinator.log.storage=upstream runs one process per instance: "
                           "set coordinator.shards=1 and start more instances instead")
    check_no_security_records(config)
    cluster = LogCluster([parse_host_port(s) for s in sidecar.upstream_bootstrap_servers], security)
    return UpstreamLog(cluster, cluster_log, partitions, node_id)


async def start(server: CoordinatorServer, upstream: UpstreamLog) -> None:
    """coordinator.log.storage=upstream: check the upstream (the log topic's shape,
    transactions), join the instance group, load the partitions it gives this instance from
    the log topic, then serve them. The local data directory holds nothing of the log."""
    server._lock = try_lock_data_dir(server._fs, str(server.data_dir))
    if server._lock is None:
        raise StartupError(f"log.dirs {server.root}: another process uses this directory")
    await server._become_owner()  # listeners open: group APIs answer COORDINATOR_LOAD_IN_PROGRESS
    delay = 0.2
    while True:  # an upstream not reachable yet is waited for, as the sidecar waits for it
        try:
            await upstream.prepare()
            break
        except (LogTopicError, TransactionsUnsupported) as exc:
            raise StartupError(f"coordinator.log.storage=upstream: {exc}") from exc
        except LogUnavailable as exc:
            log.warning("cluster_log_upstream_unreachable", error=str(exc), retry_in_s=delay)
            await asyncio.sleep(delay)
            delay = min(2 * delay, 5.0)
    if server.cluster_log.log_tail_interval_ms > 0:
        upstream.tail = LogTail(upstream.cluster, server.cluster_log.log_topic, server.layout.partitions,
                                server.cluster_log.log_tail_interval_ms / 1000)
        server._background.append(asyncio.create_task(upstream.tail.run(), name="cluster-log-tail"))
    membership = server.membership = LogMembership(
        upstream.cluster, server.cluster_log.log_group_id, server.node.node_id, server.layout.partitions,
        MembershipListener(upstream), session_timeout_ms=server.cluster_log.log_session_timeout_ms,
        heartbeat_interval_ms=max(100, server.cluster_log.log_session_timeout_ms // 10),
        endpoints=tuple((name, node.host, node.port) for name, node in server.view.endpoints.items()))
    upstream.membership = membership
    server.view.group_owner = functools.partial(group_owner, server)
    joined = asyncio.create_task(membership.run(), name="cluster-log-membership")
    server._background.append(joined)
    stable = asyncio.ensure_future(membership.stable.wait())
    await asyncio.wait({joined, stable}, return_when=asyncio.FIRST_COMPLETED)
    if joined.done():
        stable.cancel()
        failure = joined.exception()
        if isinstance(failure, DuplicateNodeId):
            raise StartupError(f"coordinator.log.storage=upstream: {failure}") from failure
        raise StartupError(f"coordinator.log.storage=upstream: the instance group stopped: {failure!r}")
    joined.add_done_callback(instance_group_ended)
    sink = server._sink = UpstreamSink(upstream.writer_of, upstream.partition_of, upstream.fenced,
                                     retry_for_s=server.cluster_log.log_write_timeout_ms / 1000)
    upstream.settled = sink.settled
    sink.start()
    core = server._new_core()
    await load(server, core)
    await server._load_shard(core, sink)
    shard = server.shard
    assert shard is not None
    upstream.on_change = shard.reload_from_log
    if upstream.assigned != upstream.serving:  # the assignment moved while we loaded
        shard.reload_from_log()


def group_owner(server: CoordinatorServer, group_id: str, listener: str) -> Node | None:
    """FindCoordinator with the log upstream: the instance owning the group's partition."""
    assert server.upstream_log is not None
    found = server.upstream_log.owner_endpoint(group_id, listener)
    if found is None:
        return None
    node_id, host, port = found
    return server.view.node_for(listener) if node_id == server.node.node_id else Node(node_id, host, port)


async def load(server: CoordinatorServer, core: CoordinatorShard) -> None:
    """Replay the assigned partitions into `core`, waiting out an upstream that cannot be
    reached (group APIs answer COORDINATOR_LOAD_IN_PROGRESS meanwhile)."""
    assert server.upstream_log is not None
    started = time.monotonic()
    delay = 0.1
    while True:
        try:
            records = await server.upstream_log.load(core)
            break
        except LogUnavailable as exc:
            log.warning("cluster_log_load_failed", error=str(exc), retry_in_s=delay)
            await asyncio.sleep(delay)
            delay = min(2 * delay, 2.0)
    elapsed = time.monotonic() - started
    durable.LOAD_DURATION.set(elapsed)
    durable.LOAD_RECORDS.set(records)
    kafka_metrics.record_partition_load(elapsed)


async def leave(server: CoordinatorServer, timeout: float) -> None:
    """Hand the partitions over on stop: the other instances take them at once."""
    if server.membership is None:
        return
    assert server.upstream_log is not None
    server.upstream_log.on_change = None  # stopping: no core is rebuilt for what is left
    try:
        await asyncio.wait_for(server.membership.leave(), timeout)
    except TimeoutError:
        log.warning("shutdown_timeout", waiting_for="instance_group_leave", timeout_s=timeout)


async def close(server: CoordinatorServer) -> None:
    """After the shard stopped: the writers' last transactions, then the upstream connections."""
    if server._sink is not None:
        await server._sink.close()
    if server.upstream_log is not None:
        server.upstream_log.cluster.close()


def check_no_security_records(config: Config) -> None:
    """SCRAM credentials and ACLs are coordinator-wide records; with the log upstream they would
    live in log partition 0 and be known to its owner alone, so the other instances would
    authenticate and authorize against nothing. Refused until every instance reads them."""
    if config.build(AuthorizerConfig).enabled:
        raise StartupError("coordinator.log.storage=upstream does not support authorizer.class.name yet: ACLs "
                           "would be known to one instance only")
    for listener in config.listeners:
        mechanisms = config.for_listener(ListenerSecurityConfig, listener).sasl_enabled_mechanisms
        if listener.protocol.startswith("SASL") and any(m.upper().startswith("SCRAM") for m in mechanisms):
            raise StartupError(f"coordinator.log.storage=upstream does not support SCRAM on listener {listener.name} "
                               "yet: credentials would be known to one instance only (PLAIN works)")


def instance_group_ended(task: asyncio.Task[None]) -> None:
    """The instance group's task ended while serving: after a LeaveGroup (stopping) that is the
    plan; a node id another instance holds (or anything else) leaves this instance owning nothing,
    so it stops with one line rather than run without partitions."""
    if task.cancelled() or task.exception() is None:
        return
    failure = task.exception()
    log.critical("instance_group_failed", error=str(failure) if isinstance(failure, DuplicateNodeId) else repr(failure))
    sys.stdout.flush()
    os._exit(2)
