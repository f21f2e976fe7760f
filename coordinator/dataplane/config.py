"""Settings of the embedded data plane.

Kafka's broker keys and defaults where Kafka has one; two keys of our own (`dataplane.*`) bound the
memory the in-memory logs may hold. Per-topic overrides use Kafka's topic config keys
(`retention.bytes`, `retention.ms`, `max.message.bytes`, `message.timestamp.type`) and are read from
`Topic.configs` on every append, so an altered topic takes effect at once.
"""

from __future__ import annotations

from dataclasses import dataclass

MiB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class DataPlaneConfig:
    message_max_bytes: int = 1048588
    """`message.max.bytes`: the largest record batch a topic accepts (topic key `max.message.bytes`)."""
    log_retention_bytes: int = -1
    """`log.retention.bytes`: per-partition size retention, -1 = unlimited (topic `retention.bytes`)."""
    log_retention_ms: int = 604800000
    """`log.retention.ms`: time retention by batch max timestamp, -1 = unlimited (topic `retention.ms`)."""
    log_message_timestamp_type: str = "CreateTime"
    """`log.message.timestamp.type`: CreateTime or LogAppendTime (topic `message.timestamp.type`)."""
    fetch_max_bytes: int = 57671680
    """`fetch.max.bytes`: the broker's cap on a Fetch response's `max_bytes`."""
    max_incremental_fetch_session_cache_slots: int = 1000
    """`max.incremental.fetch.session.cache.slots`: how many KIP-227 fetch sessions are cached."""
    fetch_session_eviction_ms: int = 120000
    """Kafka's fixed minimum idle time (and minimum age) before a session may be evicted."""
    partition_max_bytes: int = 256 * MiB
    """`dataplane.max.bytes` (ours): hard cap on the bytes one partition log retains."""
    total_max_bytes: int = 1024 * MiB
    """`dataplane.total.max.bytes` (ours): hard cap on the bytes all partition logs retain together;
    beyond it the globally oldest batches are dropped first."""

    def __post_init__(self) -> None:
        if self.message_max_bytes < 0:
            raise ValueError("message.max.bytes must be >= 0")
        if self.max_incremental_fetch_session_cache_slots < 0:
            raise ValueError("max.incremental.fetch.session.cache.slots must be >= 0")
        if self.partition_max_bytes <= 0 or self.total_max_bytes <= 0:
            raise ValueError("dataplane.max.bytes and dataplane.total.max.bytes must be > 0")
        if self.log_message_timestamp_type not in ("CreateTime", "LogAppendTime"):
            raise ValueError("log.message.timestamp.type must be CreateTime or LogAppendTime")
