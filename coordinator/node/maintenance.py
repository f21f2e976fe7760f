"""The node's housekeeping, installed as background tasks once it serves (`install`): the record
log compacted in a worker thread (`compact_periodically`, `compact_now`; not with the log upstream,
whose topic the upstream compacts), embedded mode's idle partitions swept for retention, and with
several shards the shared topic catalog watched for the other shards' changes. Also the topics the
configuration declares (`declare_topics`), made when the node takes the data directory."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from ..logging import get_logger
from ..recordlog import CompactionReport, compact
from ..recordlog.segments import list_segments
from ..runtime import durable

if TYPE_CHECKING:
    from .server import CoordinatorServer

log = get_logger("coordinator.server")


def install(server: CoordinatorServer) -> None:
    """The background tasks of a node that has loaded its state (cancelled by `stop`)."""
    if server.serves_data_plane:
        server._background.append(asyncio.create_task(enforce_retention(server), name="retention"))
    if server.upstream_log is None:  # the upstream compacts the log topic itself
        server._background.append(asyncio.create_task(compact_periodically(server), name="compaction"))
    if server.layout.shards > 1 and server.sidecar is None:  # other shards' catalog changes reach this one's groups
        server._background.append(asyncio.create_task(server.catalog.watch(), name="catalog-watch"))


async def compact_periodically(server: CoordinatorServer) -> None:
    """Compact closed segments in a worker thread every `log.cleaner.backoff.ms` when the log
    has rolled since the last run (the active segment is never touched)."""
    interval = server.config["log.cleaner.backoff.ms"] / 1000
    compacted_bases: list[int] = []
    while True:
        await asyncio.sleep(interval)
        bases = list_segments(server._fs, str(server.log_dir))
        if len(bases) < 2 or bases == compacted_bases:
            continue
        await compact_now(server)
        # Remember what this run saw, not what it left: segments the writer closed while it
        # ran were not compacted, and the changed listing makes the next tick look again.
        compacted_bases = bases


async def compact_now(server: CoordinatorServer) -> CompactionReport | None:
    started = time.monotonic()
    try:
        report = await asyncio.to_thread(
            compact, server._fs, str(server.log_dir), now_ms=int(time.time() * 1000),
            delete_retention_ms=server.config["delete.retention.ms"],
            segment_bytes=server.config["log.segment.bytes"])
    except Exception as exc:  # compaction failing leaves the log as it was; keep serving
        durable.COMPACTIONS.labels("failed").inc()
        log.error("compaction_failed", exc_info=exc)
        return None
    durable.COMPACTIONS.labels("ok").inc()
    durable.COMPACTION_DURATION.observe(time.monotonic() - started)
    log.info("log_compacted", report=str(report))
    return report


async def enforce_retention(server: CoordinatorServer) -> None:
    """Appends enforce retention as they go; idle partitions are swept on this interval."""
    interval = server.store.config.log_retention_check_interval_ms / 1000
    while True:
        await asyncio.sleep(interval)
        dropped = server.store.enforce_retention()
        if dropped:
            log.info("retention_enforced", bytes_dropped=dropped)


def declare_topics(server: CoordinatorServer) -> None:
    for name, partitions in server.config["topics"]:
        existing = server.catalog.get(name)
        if existing is None:
            server.catalog.create(name, partitions)
        elif existing.num_partitions < partitions:
            server.catalog.grow(name, partitions)
