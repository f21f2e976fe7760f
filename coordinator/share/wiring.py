"""Share groups in embedded mode, assembled once for the node: one call returns their APIs.

The node builds the share data path here and nowhere else: the data plane's logs as the record
source, the byte-bounded batch cache in front of it (``group.share.fetch.cache.max.bytes``), the
start offsets of new share partitions (``share.auto.offset.reset``) and the wait for an append
(``MaxWaitMs``).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from ..api.declaration import ApiDeclaration
from ..catalog import TopicSource
from ..core.share.config import AutoOffsetReset
from ..dataplane.log import PartitionStore
from ..runtime.apis.view import NodeView
from ..runtime.shard import ShardRuntime
from .apis import share_handlers
from .cache import BatchCache
from .embedded import DataPlaneSource, wait_for_append
from .ends import EmbeddedEndOffsets
from .fetch_apis import OnClose, ShareDataPath, share_fetch_handlers
from .settings import ShareFetchConfig
from .starts import EmbeddedStartOffsets


def embedded_share_apis(shard: Callable[[], ShardRuntime | None], view: NodeView, catalog: TopicSource,
                        store: PartitionStore, reset: AutoOffsetReset, settings: ShareFetchConfig,
                        on_close: OnClose | None = None) -> list[ApiDeclaration]:
    """ShareGroupHeartbeat, ShareGroupDescribe, the share offsets APIs, ShareFetch and
    ShareAcknowledge over the data plane; ``on_close`` registers the share sessions' listener for
    closing connections."""
    cache = BatchCache(DataPlaneSource(catalog, store), settings.share_fetch_cache_max_bytes)
    path = ShareDataPath(catalog, cache, partial(wait_for_append, catalog, store))
    return [*share_handlers(shard, EmbeddedStartOffsets(catalog, store, reset), EmbeddedEndOffsets(catalog, store)),
            *share_fetch_handlers(shard, view, path, on_close)]
