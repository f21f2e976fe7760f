"""Group coordinator configuration as the core sees it: plain ints in milliseconds.

Each configurable field is the declaration of its Kafka setting (`coordinator.settings.setting`):
key, default (Apache Kafka 4.x's, ``GroupCoordinatorConfig``), validation and the line the README and
``coordinator serve --help`` show. `coordinator.config` collects these declarations into the one
registry and builds a ``GroupConfig`` from the resolved values; nothing else lists them.
``offsets.retention.minutes`` feeds ``offsets_retention_ms`` (scale 60000), because Kafka has no
``offsets.retention.ms`` broker key. Fields without `setting` are Kafka constants, not configurable.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from coordinator.core.assignors.registry import consumer_group_assignors
from coordinator.core.share.config import AutoOffsetReset
from coordinator.settings import INT32_MAX, at_least, between, setting


def _assignors(value: Any) -> str | None:
    try:
        consumer_group_assignors(value)
    except ValueError as exc:
        return str(exc)
    return None


def _auto_offset_reset(value: Any) -> str | None:
    try:
        AutoOffsetReset.parse(str(value))
    except ValueError as exc:
        return str(exc)
    return None


class ConsumerGroupMigrationPolicy(enum.Enum):
    """``group.consumer.migration.policy`` (Kafka's ``ConsumerGroupMigrationPolicy``): which online
    conversions of a NON-empty group are allowed. An empty group is always converted (offline)."""

    BIDIRECTIONAL = "bidirectional"
    UPGRADE = "upgrade"  # classic -> consumer, on the first ConsumerGroupHeartbeat
    DOWNGRADE = "downgrade"  # consumer -> classic, when the last consumer-protocol member leaves
    DISABLED = "disabled"  # neither; and no classic member may join a consumer group

    @property
    def upgrade_enabled(self) -> bool:
        return self in (ConsumerGroupMigrationPolicy.BIDIRECTIONAL, ConsumerGroupMigrationPolicy.UPGRADE)

    @property
    def downgrade_enabled(self) -> bool:
        return self in (ConsumerGroupMigrationPolicy.BIDIRECTIONAL, ConsumerGroupMigrationPolicy.DOWNGRADE)

    @classmethod
    def parse(cls, text: str) -> ConsumerGroupMigrationPolicy:
        """Case-insensitive, as Kafka's ``ConsumerGroupMigrationPolicy.parse``."""
        value = text.strip().lower()
        for policy in cls:
            if policy.value == value:
                return policy
        raise ValueError(f"must be one of {', '.join(p.value for p in cls)}")


@dataclass(frozen=True, slots=True)
class GroupConfig:
    # --- classic groups -------------------------------------------------------------------------
    group_initial_rebalance_delay_ms: int = setting(
        "group.initial.rebalance.delay.ms", 3_000,
        "Delay of the first rebalance of an empty classic group, to let more members join.", check=between(0, INT32_MAX))
    group_min_session_timeout_ms: int = setting(
        "group.min.session.timeout.ms", 6_000, "Smallest session timeout a classic member may ask for.",
        check=between(1, INT32_MAX))
    group_max_session_timeout_ms: int = setting(
        "group.max.session.timeout.ms", 1_800_000, "Largest session timeout a classic member may ask for.",
        check=between(1, INT32_MAX))
    group_max_size: int = setting("group.max.size", INT32_MAX, "Most members of a classic group.", check=between(1, INT32_MAX))
    # Not configurable in Kafka (CLASSIC_GROUP_NEW_MEMBER_JOIN_TIMEOUT_MS): how long a parked JoinGroup
    # of a brand-new member may wait before the member is dropped.
    new_member_join_timeout_ms: int = 300_000

    # --- consumer groups (KIP-848); not used by the classic protocol ---------------------------
    consumer_group_session_timeout_ms: int = setting(
        "group.consumer.session.timeout.ms", 45_000, "Session timeout of consumer-group members.", check=between(1, INT32_MAX))
    consumer_group_min_session_timeout_ms: int = setting(
        "group.consumer.min.session.timeout.ms", 45_000, "Smallest configurable consumer session timeout.",
        check=between(1, INT32_MAX))
    consumer_group_max_session_timeout_ms: int = setting(
        "group.consumer.max.session.timeout.ms", 60_000, "Largest configurable consumer session timeout.",
        check=between(1, INT32_MAX))
    consumer_group_heartbeat_interval_ms: int = setting(
        "group.consumer.heartbeat.interval.ms", 5_000, "Heartbeat interval given to consumer-group members.",
        check=between(1, INT32_MAX))
    consumer_group_min_heartbeat_interval_ms: int = setting(
        "group.consumer.min.heartbeat.interval.ms", 5_000, "Smallest configurable consumer heartbeat interval.",
        check=between(1, INT32_MAX))
    consumer_group_max_heartbeat_interval_ms: int = setting(
        "group.consumer.max.heartbeat.interval.ms", 15_000, "Largest configurable consumer heartbeat interval.",
        check=between(1, INT32_MAX))
    consumer_group_max_size: int = setting(
        "group.consumer.max.size", INT32_MAX, "Most members of a consumer group.", check=between(1, INT32_MAX))
    consumer_group_assignors: tuple[str, ...] = setting(
        "group.consumer.assignors", ("uniform", "range"), "Server-side assignors; the first is the default.",
        check=_assignors)
    consumer_group_migration_policy: ConsumerGroupMigrationPolicy = setting(
        "group.consumer.migration.policy", ConsumerGroupMigrationPolicy.BIDIRECTIONAL,
        "Online conversion of non-empty groups between the classic and consumer protocols: bidirectional, "
        "upgrade, downgrade or disabled.", parse=ConsumerGroupMigrationPolicy.parse)

    # --- streams groups (KIP-1071); Kafka's names and defaults (4.4 for the warm-up ones) ----------
    streams_group_session_timeout_ms: int = setting(
        "group.streams.session.timeout.ms", 45_000, "Session timeout of streams-group members.",
        check=between(1, INT32_MAX))
    streams_group_heartbeat_interval_ms: int = setting(
        "group.streams.heartbeat.interval.ms", 5_000, "Heartbeat interval given to streams-group members.",
        check=between(1, INT32_MAX))
    streams_group_max_size: int = setting(
        "group.streams.max.size", INT32_MAX, "Most members of a streams group.", check=between(1, INT32_MAX))
    streams_group_num_standby_replicas: int = setting(
        "group.streams.num.standby.replicas", 0, "Standby replicas of each stateful task in a streams group.",
        check=between(0, 2))
    streams_group_num_warmup_replicas: int = setting(
        "group.streams.num.warmup.replicas", 2,
        "Most warm-up tasks in a streams group at once (members reporting task offsets, v1).", check=between(0, 20))
    streams_group_acceptable_recovery_lag: int = setting(
        "group.streams.acceptable.recovery.lag", 10_000,
        "Largest lag (records) at which a member counts as caught up on a stateful task.", check=at_least(0))
    streams_group_task_offset_interval_ms: int = setting(
        "group.streams.task.offset.interval.ms", 60_000,
        "How often v1 streams members report task offsets (the warm-up re-check).", check=between(1, INT32_MAX))
    # --- share groups (KIP-932); Kafka's ShareGroupConfig names, defaults and bounds -------------
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

    # --- offsets --------------------------------------------------------------------------------
    offsets_retention_ms: int = setting(
        "offsets.retention.minutes", 10_080, "Committed offsets of empty groups expire after this long.",
        check=between(1, INT32_MAX), scale=60_000)
    offsets_retention_check_interval_ms: int = setting(
        "offsets.retention.check.interval.ms", 600_000, "How often expired offsets are looked for.",
        check=at_least(1))  # a LONG in Kafka
    offset_metadata_max_bytes: int = setting(
        "offset.metadata.max.bytes", 4_096, "Largest metadata string of a committed offset.", check=between(0, INT32_MAX))
