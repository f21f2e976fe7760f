"""Group coordinator configuration as the core sees it: plain ints in milliseconds.

Each group type declares its own settings in its config struct (`classic/settings.py`,
`consumer/settings.py`, `streams/settings.py`, `share/settings.py`), registered with the type (`shard.BUILT_IN_TYPES`); `GroupConfig` inherits
them, so every part of the core reads one value, and declares the settings of no type (offsets).
Each configurable field is the declaration of its Kafka setting (`coordinator.settings.setting`):
key, default (Apache Kafka 4.x's, ``GroupCoordinatorConfig``), validation and the line the README and
``coordinator serve --help`` show. `coordinator.config` collects these declarations into the one
registry and builds a ``GroupConfig`` from the resolved values; nothing else lists them.
``offsets.retention.minutes`` feeds ``offsets_retention_ms`` (scale 60000), because Kafka has no
``offsets.retention.ms`` broker key. Fields without `setting` are Kafka constants, not configurable.
"""

from __future__ import annotations

from dataclasses import dataclass

from coordinator.core.classic.settings import ClassicGroupConfig
from coordinator.core.consumer.settings import ConsumerGroupConfig, ConsumerGroupMigrationPolicy
from coordinator.core.share.settings import ShareGroupConfig
from coordinator.core.streams.settings import StreamsGroupConfig
from coordinator.settings import INT32_MAX, at_least, between, setting

__all__ = ["ClassicGroupConfig", "ConsumerGroupConfig", "ConsumerGroupMigrationPolicy", "GroupConfig", "ShareGroupConfig",
           "StreamsGroupConfig"]


@dataclass(frozen=True, slots=True)
class GroupConfig(ShareGroupConfig, StreamsGroupConfig, ConsumerGroupConfig, ClassicGroupConfig):
    # --- offsets --------------------------------------------------------------------------------
    offsets_retention_ms: int = setting(
        "offsets.retention.minutes", 10_080, "Committed offsets of empty groups expire after this long.",
        check=between(1, INT32_MAX), scale=60_000)
    offsets_retention_check_interval_ms: int = setting(
        "offsets.retention.check.interval.ms", 600_000, "How often expired offsets are looked for.",
        check=at_least(1))  # a LONG in Kafka
    offset_metadata_max_bytes: int = setting(
        "offset.metadata.max.bytes", 4_096, "Largest metadata string of a committed offset.", check=between(0, INT32_MAX))
