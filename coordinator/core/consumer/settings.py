"""Consumer groups' (KIP-848) settings: the type's config struct, registered with the type
(`core/shard.py`, `BUILT_IN_TYPES`), and the migration policy it declares. Each configurable field
declares its Kafka setting (`coordinator.settings.setting`); the core reads them through
`GroupConfig` (`core/config.py`), which inherits every built-in type's struct."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from coordinator.core.assignors.registry import consumer_group_assignors
from coordinator.settings import INT32_MAX, between, setting


def _assignors(value: Any) -> str | None:
    try:
        consumer_group_assignors(value)
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


# Not slotted: `GroupConfig` inherits several types' structs, and slots are laid out there.
@dataclass(frozen=True)
class ConsumerGroupConfig:
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
