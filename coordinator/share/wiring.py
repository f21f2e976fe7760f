"""Share groups assembled once for the node, one call per mode, each returning their APIs.

The node builds the share data path here and nowhere else: the record source (embedded mode: the
data plane's logs, or on an embedded shard k >= 1 of several shard 0's data plane over the wire,
``shard_zero``; sidecar mode: the upstream's partition leaders), the byte-bounded batch cache
in front of it (``group.share.fetch.cache.max.bytes``), the start offsets of new share partitions
(``share.auto.offset.reset``) and the wait for an append (``MaxWaitMs``).

In sidecar mode all four APIs are answered here, never forwarded (the upstream needs no share
groups of its own): ShareGroupHeartbeat and ShareGroupDescribe where clients find the group's
coordinator, ShareFetch and ShareAcknowledge on the per-broker listeners, where a client sends them
to the leader its (rewritten) Metadata names; every listener serves the APIs answered here. Where
several processes open those listeners (shards, or instances sharing the log upstream), a ShareFetch
or ShareAcknowledge for a group held by another process is forwarded to it (``forward``). Embedded
mode with several shards does the same from shard 0, the leader clients send them to, to the shard
holding the group.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from functools import partial

from ..api.declaration import ApiDeclaration, SidecarRoute
from ..catalog import TopicSource
from ..core.share.config import AutoOffsetReset
from ..dataplane.log import PartitionStore
from ..runtime.apis.view import Node, NodeView
from ..runtime.shard import ShardRuntime
from ..sidecar.cluster import UpstreamCluster
from .apis import share_handlers
from .cache import BatchCache
from .embedded import DataPlaneSource, wait_for_append
from .ends import EmbeddedEndOffsets, UpstreamEndOffsets
from .fetch_apis import OnClose, ShareDataPath, share_fetch_handlers
from .forward import Holders, ShareForwarding
from .settings import ShareFetchConfig
from .shard_zero import ShardZeroCluster
from .starts import EmbeddedStartOffsets, UpstreamStartOffsets
from .upstream import UpstreamSource


def embedded_share_apis(shard: Callable[[], ShardRuntime | None], view: NodeView, catalog: TopicSource,
                        store: PartitionStore, reset: AutoOffsetReset, settings: ShareFetchConfig,
                        on_close: OnClose | None = None, holders: Holders | None = None) -> list[ApiDeclaration]:
    """ShareGroupHeartbeat, ShareGroupDescribe, the share offsets APIs, ShareFetch and
    ShareAcknowledge over the data plane; ``on_close`` registers the share sessions' listener for
    closing connections. With ``holders`` (shard 0 of several), ShareFetch and ShareAcknowledge of
    a group placed on another shard are forwarded to it."""
    cache = BatchCache(DataPlaneSource(catalog, store), settings.share_fetch_cache_max_bytes)
    path = ShareDataPath(catalog, cache, partial(wait_for_append, catalog, store))
    declared = [*share_handlers(shard, EmbeddedStartOffsets(catalog, store, reset), EmbeddedEndOffsets(catalog, store)),
                *share_fetch_handlers(shard, view, path, on_close)]
    return ShareForwarding(holders, catalog, on_close).wrap(declared) if holders is not None else declared


def shard_share_apis(shard: Callable[[], ShardRuntime | None], view: NodeView, catalog: TopicSource,
                     holders: Holders, shard_zero: Callable[[], Node], reset: AutoOffsetReset,
                     settings: ShareFetchConfig, on_close: OnClose | None = None) -> list[ApiDeclaration]:
    """An embedded shard k >= 1: the same APIs for the share groups placed on it, reading shard 0's
    data plane over the wire (``shard_zero``: its node on the forwarding listener, reached with
    ``holders.security``);
    shard 0 forwards their ShareFetch and ShareAcknowledge here (ShareForward, served here), and
    answers name shard 0 as every partition's leader."""
    source = UpstreamSource(ShardZeroCluster(catalog, shard_zero, holders.security))
    path = ShareDataPath(catalog, BatchCache(source, settings.share_fetch_cache_max_bytes), source.wait_for_append,
                         leader=view.data_node)
    declared = [*share_handlers(shard, UpstreamStartOffsets(catalog, source, reset),
                                UpstreamEndOffsets(catalog, source)),
                *share_fetch_handlers(shard, view, path, on_close)]
    return ShareForwarding(holders, catalog, on_close).wrap(declared)


def sidecar_share_apis(shard: Callable[[], ShardRuntime | None], view: NodeView, cluster: UpstreamCluster,
                       broker_endpoint: Callable[[int], tuple[str, int]], reset: AutoOffsetReset,
                       settings: ShareFetchConfig, on_close: OnClose | None = None,
                       holders: Holders | None = None) -> list[ApiDeclaration]:
    """The same APIs over the upstream cluster the sidecar fronts, declared served here;
    ``broker_endpoint`` is the address of the listener standing for an upstream broker. With
    ``holders`` (this process is one of several that clients reach as the same brokers), ShareFetch
    and ShareAcknowledge of a group held elsewhere are forwarded to its holder, and ShareForward is
    served for the others."""
    source = UpstreamSource(cluster)
    path = ShareDataPath(cluster.catalog, BatchCache(source, settings.share_fetch_cache_max_bytes),
                         source.wait_for_append, broker_endpoint)
    declared = [*share_handlers(shard, UpstreamStartOffsets(cluster.catalog, source, reset),
                                UpstreamEndOffsets(cluster.catalog, source)),
                *share_fetch_handlers(shard, view, path, on_close)]
    declared = [dataclasses.replace(d, sidecar=SidecarRoute.SERVED) for d in declared]
    return ShareForwarding(holders, cluster.catalog, on_close).wrap(declared) if holders is not None else declared
