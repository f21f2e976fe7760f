"""The embedded data plane installed into a node: the partition store (`build`, at construction;
opened and recovered once the node owns the data directory, `opened`; closed by `close`), and its
APIs (`apis`): with shard 0 of embedded mode, Produce, Fetch, ListOffsets and the rest of the data
plane with share groups' fetch path over the same store; on every other embedded shard
InitProducerId, from that shard's own producer id range, and the share APIs of the share groups
placed on it, read from shard 0's data plane over the wire while shard 0 forwards their fetches
(`node/shards.share_forwarding`; with no forwarding listener, refused: `share/unserved.py`). Sidecar mode has no data plane (the
upstream serves data). The feature itself is `coordinator/dataplane` (and `coordinator/share`)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..api.declaration import ApiDeclaration
from ..catalog import TopicCatalog
from ..config import Config
from ..core.share.config import AutoOffsetReset
from ..dataplane.config import DataPlaneConfig
from ..dataplane.handlers import dataplane_handlers, init_producer_id_handler
from ..dataplane.log import PartitionStore
from ..dataplane.producer_ids import SHARD_ID_BITS, ProducerIdAllocator
from ..logging import get_logger
from ..recordlog import LogConfig, RealFileSystem
from ..share.settings import ShareFetchConfig
from ..share.unserved import unserved_share_apis
from ..share.wiring import embedded_share_apis, shard_share_apis
from . import maintenance, shards

if TYPE_CHECKING:
    from .server import CoordinatorServer

log = get_logger("coordinator.server")


def build(config: Config, catalog: TopicCatalog, on_fatal: Callable[[BaseException], None]) -> PartitionStore:
    """The partition store, not opened yet: its data is recovered once the node owns the directory."""
    dataplane = config.build(DataPlaneConfig)
    record_log = config.build(LogConfig)
    return PartitionStore(
        catalog, dataplane, retention_check_interval_ms=dataplane.log_retention_check_interval_ms,
        fs=RealFileSystem(), directory=str(config.data_dir / "partitions"),
        flush_policy=record_log.flush_policy, flush_interval_ms=record_log.flush_interval_ms,
        on_fatal=on_fatal, remove_dir=_remove_empty_dir)


def apis(server: CoordinatorServer, config: Config) -> list[ApiDeclaration]:
    """The data plane's declarations on an embedded node (never called in sidecar mode)."""
    reset, settings = AutoOffsetReset.parse(config["share.auto.offset.reset"]), config.build(ShareFetchConfig)
    on_close = lambda listener: server.connections.closed.append(listener)  # noqa: E731 - one use per branch
    forwarding = shards.share_forwarding(server)
    if server.serves_data_plane:
        return [*dataplane_handlers(server.catalog, server.store, server.store.config),
                *embedded_share_apis(  # share groups over the data plane (sidecar mode: node/sidecar.py)
                    lambda: server.shard, server.view, server.catalog, server.store, reset, settings,
                    on_close=on_close, holders=forwarding[0] if forwarding is not None else None)]
    # clients send InitProducerId to any node: ids from this shard's own range. Share groups placed
    # here read shard 0's data plane over the wire, shard 0 forwarding their fetches here (or, with
    # no listener to do that on, are refused: share/unserved.py)
    if forwarding is None:
        return [init_producer_id_handler(server.store), *unserved_share_apis(server.view)]
    holders, shard_zero = forwarding
    return [init_producer_id_handler(server.store),
            *shard_share_apis(lambda: server.shard, server.view, server.catalog, holders, shard_zero, reset,
                              settings, on_close=on_close)]


def opened(server: CoordinatorServer) -> None:
    """The data directory is ours: recover the partitions and declare the configured topics (shard
    0), or give this shard its producer ids, in its own directory (an embedded shard k >= 1)."""
    if server.serves_data_plane:
        server.store.open()
        server.store.start()
        maintenance.declare_topics(server)
    elif server.sidecar is None:
        server.store.producer_ids = ProducerIdAllocator(RealFileSystem(), str(server.data_dir),
                                                        first_id=server.shard_index << SHARD_ID_BITS)


async def close(server: CoordinatorServer) -> None:
    if server.serves_data_plane:
        await server.store.close()


def _remove_empty_dir(path: str) -> None:
    """A deleted topic's partition directory, once its segments are gone."""
    try:
        os.rmdir(path)
    except OSError as exc:
        log.warning("partition_dir_not_removed", path=path, error=str(exc))
