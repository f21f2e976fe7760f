"""The share data path's settings, declared once (``coordinator.settings``): ``Config.build(ShareFetchConfig)``."""

from __future__ import annotations

from dataclasses import dataclass

from ..settings import at_least, setting

DEFAULT_CACHE_MAX_BYTES = 64 << 20


@dataclass(frozen=True, slots=True)
class ShareFetchConfig:
    share_fetch_cache_max_bytes: int = setting(
        "group.share.fetch.cache.max.bytes", DEFAULT_CACHE_MAX_BYTES,
        "Share groups: the most bytes of fetched record batches held in memory for the consumers of share "
        "partitions, all partitions together; the oldest are evicted and read again when needed (ours).",
        check=at_least(1))
