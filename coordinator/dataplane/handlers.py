"""The data plane's entries in the API registry: Produce (0), Fetch (1), ListOffsets (2),
InitProducerId (22).

Wiring: one `DataPlaneConfig`, one `PartitionStore(catalog, config)` for the process, then
`ApiRegistry(... + dataplane_handlers(catalog, store, config))`. Produce returns None for acks=0
(send no response); Fetch is a coroutine (long polling); ListOffsets is synchronous.
"""

from __future__ import annotations

from coordinator.api.authorization import InHandler
from coordinator.api.declaration import SidecarRoute
from coordinator.api.placement import NoGroup
from coordinator.api.registry import ApiHandler
from coordinator.catalog.catalog import TopicCatalog

from . import fetch, init_producer_id, list_offsets, produce
from .config import DataPlaneConfig
from .log import PartitionStore
from .session import FetchSessionCache


def dataplane_handlers(
    catalog: TopicCatalog,
    store: PartitionStore,
    config: DataPlaneConfig,
    *,
    sessions: FetchSessionCache | None = None,
) -> list[ApiHandler]:
    return [
        ApiHandler(
            produce.API_KEY,
            produce.MIN_VERSION,
            produce.MAX_VERSION,
            produce.ProduceHandler(catalog, store),
            authorization=InHandler("WRITE each topic"),
            placement=NoGroup(), sidecar=SidecarRoute.FORWARDED,
        ),
        ApiHandler(
            fetch.API_KEY,
            fetch.MIN_VERSION,
            fetch.MAX_VERSION,
            fetch.FetchHandler(catalog, store, config, sessions),
            authorization=InHandler("READ each topic"), placement=NoGroup(), sidecar=SidecarRoute.FORWARDED,
        ),
        ApiHandler(
            list_offsets.API_KEY,
            list_offsets.MIN_VERSION,
            list_offsets.MAX_VERSION,
            list_offsets.ListOffsetsHandler(catalog, store),
            authorization=InHandler("DESCRIBE each topic"), placement=NoGroup(), sidecar=SidecarRoute.FORWARDED,
        ),
        init_producer_id_handler(store),
    ]


def init_producer_id_handler(store: PartitionStore) -> ApiHandler:
    """InitProducerId alone: served by every shard, also those without the data plane (clients
    send it to any broker), from the store's `producer_ids`."""
    return ApiHandler(init_producer_id.API_KEY, init_producer_id.MIN_VERSION, init_producer_id.MAX_VERSION,
                      init_producer_id.InitProducerIdHandler(store),
                      authorization=InHandler("IDEMPOTENT_WRITE on the cluster or WRITE on some topic"),
                      placement=NoGroup(), sidecar=SidecarRoute.FORWARDED)
