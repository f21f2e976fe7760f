"""Share groups' settings: the type's config struct, registered with the type (`core/shard.py`,
`BUILT_IN_TYPES`): the broker-wide defaults of Kafka's ShareGroupConfig (names, defaults and bounds).
The core reads them through `GroupConfig` (`core/config.py`), which inherits every built-in type's
struct."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from coordinator.core.share.config import AutoOffsetReset
from coordinator.settings import INT32_MAX, between, setting


def _auto_offset_reset(value: Any) -> str | None:
    try:
        AutoOffsetReset.parse(str(value))
    except ValueError as exc:
        return str(exc)
    return None


# Not slotted: `GroupConfig` inherits several types' structs, and slots are laid out there.
@dataclass(frozen=True)
class ShareGroupConfig:
    share_group_session_timeout_ms: int = setting(
        "group.share.session.timeout.ms", 45_000, "Session timeout of share-group members.", check=between(1, INT32_MAX))
    share_group_heartbeat_interval_ms: int = setting(
        "group.share.heartbeat.interval.ms", 5_000, "Heartbeat interval given to share-group members.",
        check=between(1, INT32_MAX))
    share_group_max_size: int = setting(
        "group.share.max.size", 200, "Most members of a share group.", check=between(1, 1_000))
    share_record_lock_duration_ms: int = setting(
        "group.share.record.lock.duration.ms", 30_000,
        "How long a share consumer holds a record it was given before it is delivered again "
        "(the default of every share group's share.record.lock.duration.ms).", check=between(1_000, 3_600_000))
    share_delivery_count_limit: int = setting(
        "group.share.delivery.count.limit", 5,
        "Deliveries of a record to share consumers before it is archived unacknowledged "
        "(the default of every share group's share.delivery.count.limit).", check=between(2, 25))
    share_partition_max_record_locks: int = setting(
        "group.share.partition.max.record.locks", 2_000,
        "Most records in flight (acquired and not finished) per share partition.", check=between(1, 10_000))
    share_auto_offset_reset: str = setting(
        "share.auto.offset.reset", "latest",
        "Where a share group starts reading a partition it never read: latest, earliest or "
        "by_duration:<ISO-8601 duration> (Kafka's group config, applied to every share group here).",
        check=_auto_offset_reset)
