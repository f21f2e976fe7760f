"""Settings of the embedded data plane.

Kafka's broker keys and defaults where Kafka has one; two keys of our own (`dataplane.*`) bound the
memory the partition logs' cache may hold (the batches themselves are on disk). Per-topic overrides
use Kafka's topic config keys (`retention.bytes`, `retention.ms`, `max.message.bytes`,
`message.timestamp.type`, `segment.bytes`) and are read from
`Topic.configs` on every append, so an altered topic takes effect at once.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..settings import at_least, one_of, setting

MiB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class DataPlaneConfig:
    """Each configurable field declares its key (see `coordinator.settings`); the topic key that
    overrides it per topic is named in the comment."""

    message_max_bytes: int = setting(  # topic max.message.bytes
        "message.max.bytes", 1048588, "Largest record batch a Produce may carry.", check=at_least(0))
    log_retention_ms: int = setting(  # topic retention.ms (by batch max timestamp)
        "log.retention.ms", 604800000,
        "Embedded data plane: age after which batches are dropped (-1: never).", check=at_least(-1))
    log_retention_bytes: int = setting(  # topic retention.bytes (per partition)
        "log.retention.bytes", -1,
        "Embedded data plane: per-partition size above which oldest batches are dropped (-1: no limit).",
        check=at_least(-1))
    log_retention_check_interval_ms: int = setting(
        "log.retention.check.interval.ms", 300000,
        "Embedded data plane: how often retention is enforced on idle partitions.", check=at_least(1))
    log_message_timestamp_type: str = setting(  # topic message.timestamp.type
        "log.message.timestamp.type", "CreateTime", "Embedded data plane: CreateTime or LogAppendTime.",
        check=one_of("CreateTime", "LogAppendTime"))
    fetch_max_bytes: int = setting(
        "fetch.max.bytes", 57671680, "Embedded data plane: the cap on a Fetch response's size.",
        check=at_least(1024))
    partition_max_bytes: int = setting(
        "dataplane.max.bytes", 256 * MiB,
        "Embedded data plane: cap on the bytes of one partition cached in memory; older batches are read "
        "back from disk (ours).", check=at_least(1024))
    total_max_bytes: int = setting(  # beyond it the globally oldest cached batches are evicted first
        "dataplane.total.max.bytes", 1024 * MiB,
        "Embedded data plane: cap on the bytes of all partitions cached in memory (ours).", check=at_least(1024))
    max_incremental_fetch_session_cache_slots: int = setting(
        "max.incremental.fetch.session.cache.slots", 1000, "Most incremental fetch sessions (KIP-227) cached.",
        check=at_least(0))
    fetch_session_eviction_ms: int = 120000
    """Kafka's fixed minimum idle time (and minimum age) before a session may be evicted."""
    segment_bytes: int = 64 * MiB
    """Segment file size of partition data (topic key `segment.bytes`; the broker key
    `log.segment.bytes` is the group log's); retention deletes whole segments from disk."""

    def __post_init__(self) -> None:
        if self.message_max_bytes < 0:
            raise ValueError("message.max.bytes must be >= 0")
        if self.max_incremental_fetch_session_cache_slots < 0:
            raise ValueError("max.incremental.fetch.session.cache.slots must be >= 0")
        if self.partition_max_bytes <= 0 or self.total_max_bytes <= 0:
            raise ValueError("dataplane.max.bytes and dataplane.total.max.bytes must be > 0")
        if self.log_message_timestamp_type not in ("CreateTime", "LogAppendTime"):
            raise ValueError("log.message.timestamp.type must be CreateTime or LogAppendTime")
