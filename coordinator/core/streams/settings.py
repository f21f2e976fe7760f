"""Streams groups' settings: the type's config struct, registered with the type (`core/shard.py`,
`BUILT_IN_TYPES`). Each field declares its Kafka setting (`coordinator.settings.setting`); the core
reads them through `GroupConfig` (`core/config.py`), which inherits every built-in type's struct."""

from __future__ import annotations

from dataclasses import dataclass

from coordinator.settings import INT32_MAX, at_least, between, setting


# Not slotted: `GroupConfig` inherits several types' structs, and slots are laid out there.
@dataclass(frozen=True)
class StreamsGroupConfig:
    # Kafka's names and defaults (4.4 for the warm-up ones).
    streams_group_session_timeout_ms: int = setting(
        "group.streams.session.timeout.ms", 45_000, "Session timeout of streams-group members.",
        check=between(1, INT32_MAX))
    streams_group_heartbeat_interval_ms: int = setting(
        "group.streams.heartbeat.interval.ms", 5_000, "Heartbeat interval given to streams-group members.",
        check=between(1, INT32_MAX))
    streams_group_min_session_timeout_ms: int = setting(
        "group.streams.min.session.timeout.ms", 45_000,
        "Smallest streams.session.timeout.ms a streams group may be given.", check=between(1, INT32_MAX))
    streams_group_max_session_timeout_ms: int = setting(
        "group.streams.max.session.timeout.ms", 60_000,
        "Largest streams.session.timeout.ms a streams group may be given.", check=between(1, INT32_MAX))
    streams_group_min_heartbeat_interval_ms: int = setting(
        "group.streams.min.heartbeat.interval.ms", 5_000,
        "Smallest streams.heartbeat.interval.ms a streams group may be given.", check=between(1, INT32_MAX))
    streams_group_max_heartbeat_interval_ms: int = setting(
        "group.streams.max.heartbeat.interval.ms", 15_000,
        "Largest streams.heartbeat.interval.ms a streams group may be given.", check=between(1, INT32_MAX))
    streams_group_max_size: int = setting(
        "group.streams.max.size", INT32_MAX, "Most members of a streams group.", check=between(1, INT32_MAX))
    streams_group_num_standby_replicas: int = setting(
        "group.streams.num.standby.replicas", 0, "Standby replicas of each stateful task in a streams group.",
        check=between(0, 2))
    streams_group_max_standby_replicas: int = setting(
        "group.streams.max.standby.replicas", 2, "Largest streams.num.standby.replicas a streams group may be given.",
        check=at_least(0))
    streams_group_num_warmup_replicas: int = setting(
        "group.streams.num.warmup.replicas", 2,
        "Most warm-up tasks in a streams group at once (members reporting task offsets, v1).", check=between(0, 20))
    streams_group_acceptable_recovery_lag: int = setting(
        "group.streams.acceptable.recovery.lag", 10_000,
        "Largest lag (records) at which a member counts as caught up on a stateful task.", check=at_least(0))
    streams_group_task_offset_interval_ms: int = setting(
        "group.streams.task.offset.interval.ms", 60_000,
        "How often v1 streams members report task offsets (the warm-up re-check).", check=between(1, INT32_MAX))
