"""Classic groups' settings: the type's config struct, registered with the type
(`core/shard.py`, `BUILT_IN_TYPES`). Each configurable field declares its Kafka setting
(`coordinator.settings.setting`: key, Apache Kafka 4.x's default, validation, the README line);
the core reads them through `GroupConfig` (`core/config.py`), which inherits every built-in type's
struct. Fields without `setting` are Kafka constants."""

from __future__ import annotations

from dataclasses import dataclass

from coordinator.settings import INT32_MAX, between, setting


# Not slotted: `GroupConfig` inherits several types' structs, and slots are laid out there.
@dataclass(frozen=True)
class ClassicGroupConfig:
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
