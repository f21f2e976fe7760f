"""Group coordinator configuration as the core sees it: plain ints in milliseconds.

Defaults are Apache Kafka 4.x's (``GroupCoordinatorConfig``). The runtime maps Kafka's config keys onto
these fields (``group.min.session.timeout.ms`` -> ``group_min_session_timeout_ms``;
``offsets.retention.minutes`` -> ``offsets_retention_ms`` = minutes * 60000, because Kafka has no
``offsets.retention.ms`` broker key).
"""

from __future__ import annotations

from dataclasses import dataclass

INT32_MAX = 2**31 - 1


@dataclass(frozen=True, slots=True)
class GroupConfig:
    # --- classic groups -------------------------------------------------------------------------
    group_min_session_timeout_ms: int = 6_000  # group.min.session.timeout.ms
    group_max_session_timeout_ms: int = 1_800_000  # group.max.session.timeout.ms
    group_initial_rebalance_delay_ms: int = 3_000  # group.initial.rebalance.delay.ms
    group_max_size: int = INT32_MAX  # group.max.size
    # Not configurable in Kafka (CLASSIC_GROUP_NEW_MEMBER_JOIN_TIMEOUT_MS): how long a parked JoinGroup
    # of a brand-new member may wait before the member is dropped.
    new_member_join_timeout_ms: int = 300_000

    # --- offsets --------------------------------------------------------------------------------
    offsets_retention_ms: int = 10_080 * 60_000  # offsets.retention.minutes = 10080 (7 days)
    offsets_retention_check_interval_ms: int = 600_000  # offsets.retention.check.interval.ms
    offset_metadata_max_bytes: int = 4_096  # offset.metadata.max.bytes

    # --- consumer groups (KIP-848); not used by the classic protocol ---------------------------
    consumer_group_session_timeout_ms: int = 45_000  # group.consumer.session.timeout.ms
    consumer_group_min_session_timeout_ms: int = 45_000  # group.consumer.min.session.timeout.ms
    consumer_group_max_session_timeout_ms: int = 60_000  # group.consumer.max.session.timeout.ms
    consumer_group_heartbeat_interval_ms: int = 5_000  # group.consumer.heartbeat.interval.ms
    consumer_group_min_heartbeat_interval_ms: int = 5_000  # group.consumer.min.heartbeat.interval.ms
    consumer_group_max_heartbeat_interval_ms: int = 15_000  # group.consumer.max.heartbeat.interval.ms
    consumer_group_max_size: int = INT32_MAX  # group.consumer.max.size
    consumer_group_assignors: tuple[str, ...] = ("uniform", "range")  # group.consumer.assignors
    consumer_group_migration_policy: str = "bidirectional"  # group.consumer.migration.policy
