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
    share_group_min_session_timeout_ms: int = setting(
        "group.share.min.session.timeout.ms", 45_000, "Smallest share.session.timeout.ms a share group may be given.",
        check=between(1, INT32_MAX))
    share_group_max_session_timeout_ms: int = setting(
        "group.share.max.session.timeout.ms", 60_000, "Largest share.session.timeout.ms a share group may be given.",
        check=between(1, INT32_MAX))
    share_group_min_heartbeat_interval_ms: int = setting(
        "group.share.min.heartbeat.interval.ms", 5_000,
        "Smallest share.heartbeat.interval.ms a share group may be given.", check=between(1, INT32_MAX))
    share_group_max_heartbeat_interval_ms: int = setting(
        "group.share.max.heartbeat.interval.ms", 15_000,
        "Largest share.heartbeat.interval.ms a share group may be given.", check=between(1, INT32_MAX))
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
    share_min_record_lock_duration_ms: int = setting(
        "group.share.min.record.lock.duration.ms", 15_000,
        "Smallest share.record.lock.duration.ms a share group may be given.", check=between(1_000, 30_000))
    share_max_record_lock_duration_ms: int = setting(
        "group.share.max.record.lock.duration.ms", 60_000,
        "Largest share.record.lock.duration.ms a share group may be given.", check=between(30_000, 3_600_000))
    share_min_delivery_count_limit: int = setting(
        "group.share.min.delivery.count.limit", 2, "Smallest share.delivery.count.limit a share group may be given.",
        check=between(2, 5))
    share_max_delivery_count_limit: int = setting(
        "group.share.max.delivery.count.limit", 10, "Largest share.delivery.count.limit a share group may be given.",
        check=between(5, 25))
    share_partition_max_record_locks: int = setting(
        "group.share.partition.max.record.locks", 2_000,
        "Most records in flight (acquired and not finished) per share partition.", check=between(1, 10_000))
    share_auto_offset_reset: str = setting(
        "share.auto.offset.reset", "latest",
        "Where a share group starts reading a partition it never read: latest, earliest or "
        "by_duration:<ISO-8601 duration> (the default of every share group's share.auto.offset.reset).",
        check=_auto_offset_reset)
