"""Per-group configs (Kafka's ``GroupConfig``): the overrides an admin sets on one group with
IncrementalAlterConfigs on a GROUP resource, their durable record, and each group's effective values.

A shard-wide service (like offsets and the coordinator epoch): it owns the record type
``GroupConfig`` (1004, ours: Kafka keeps group configs in its controller's metadata log, a
coordinator of its own has only this log) whose key is the group id and whose value is the group's
whole set of overrides, name -> text as the admin wrote it (a tombstone once none is left), so the
compacted log keeps exactly the last set. ``replay`` is the only mutator; the group types read a
group's values through ``GroupConfigs.of(group_id)`` (a ``GroupSettings``: the override where one
is set, else the broker-wide setting), so a change applies to the next heartbeat, session timer,
acquisition or assignment of that group, as in Kafka (which reads ``GroupConfigManager`` on every
use). A group's configs are not the group's: they may be set before the group exists and outlive
its deletion (Kafka deletes neither with the group).

Validation is Kafka's (``GroupConfig.validate`` under the controller's
``ConfigurationControlManager.incrementalAlterConfigResource``): an unknown name, a value that does
not parse, one below the type's floor, one outside the broker's min/max settings, a session timeout
not above the heartbeat interval: INVALID_CONFIG with Kafka's message; APPEND and SUBTRACT: no group
config is a list (INVALID_CONFIG). Where Kafka fills a value that is not overridden with its own
default for the session-above-heartbeat check, the broker's value is used here: the one that
applies.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import msgspec

from coordinator.core.config import GroupConfig
from coordinator.core.effects import Effects
from coordinator.core.errors import ErrorCode
from coordinator.core.record_codec import Record, RecordStruct, RecordTypeDecl
from coordinator.core.registry import Registration
from coordinator.core.share.config import AutoOffsetReset
from coordinator.settings import declared

GROUP_CONFIG = 1004

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
"""IncrementalAlterConfigs' operation types (Kafka's ``AlterConfigOp.OpType`` ids)."""
OPERATION_NAMES = {SET: "SET", DELETE: "DELETE", APPEND: "APPEND", SUBTRACT: "SUBTRACT"}

# DescribeConfigs' config sources (Kafka's ``ConfigEntry.ConfigSource`` ids).
DYNAMIC_GROUP_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 8, 4, 5
# DescribeConfigs v3+ config types (``ConfigEntry.ConfigType`` ids).
TYPE_STRING, TYPE_INT = 2, 3


class GroupConfigEntry(RecordStruct, frozen=True):
    name: str
    value: str


class GroupConfigKey(RecordStruct, frozen=True):
    group_id: str


class GroupConfigValue(RecordStruct, frozen=True):
    configs: tuple[GroupConfigEntry, ...]
    """Every override the group has, sorted by name (the whole value of the key)."""


RECORD_TYPES = (RecordTypeDecl(GROUP_CONFIG, "GroupConfig", GroupConfigKey, {0: GroupConfigValue}),)


@dataclass(frozen=True, slots=True)
class GroupSettings:
    """A group's effective values: its override where set, else the broker-wide setting."""

    consumer_session_timeout_ms: int
    consumer_heartbeat_interval_ms: int
    share_session_timeout_ms: int
    share_heartbeat_interval_ms: int
    share_record_lock_duration_ms: int
    share_delivery_count_limit: int
    share_auto_offset_reset: str
    share_isolation_level: str
    streams_session_timeout_ms: int
    streams_heartbeat_interval_ms: int
    streams_num_standby_replicas: int
    streams_initial_rebalance_delay_ms: int


@dataclass(frozen=True, slots=True)
class Definition:
    """One group config: its name, the ``GroupSettings`` field it feeds, the broker-wide setting
    that is its default (its synonym in DescribeConfigs), its type, Kafka's floor (``atLeast``) and
    the broker's min/max settings (``GroupConfig`` fields) it must stay within."""

    name: str
    attribute: str
    broker: str | None  # the GroupConfig field of its broker-wide default; None: Kafka's constant
    constant: str | None = None  # the default when there is no broker setting
    floor: int | None = None  # None: a string config
    low: str | None = None  # GroupConfig field of the broker's minimum
    high: str | None = None
    check: Callable[[str], str | None] | None = None  # a string config's validator


def _auto_offset_reset(text: str) -> str | None:
    try:
        AutoOffsetReset.parse(text)
    except ValueError as exc:
        return str(exc)
    return None


def _isolation_level(text: str) -> str | None:
    return None if text in ("read_committed", "read_uncommitted") else \
        "String must be one of: read_committed, read_uncommitted"


DEFINITIONS: tuple[Definition, ...] = (
    Definition("consumer.heartbeat.interval.ms", "consumer_heartbeat_interval_ms",
               "consumer_group_heartbeat_interval_ms", floor=1, low="consumer_group_min_heartbeat_interval_ms",
               high="consumer_group_max_heartbeat_interval_ms"),
    Definition("consumer.session.timeout.ms", "consumer_session_timeout_ms", "consumer_group_session_timeout_ms",
               floor=1, low="consumer_group_min_session_timeout_ms", high="consumer_group_max_session_timeout_ms"),
    Definition("share.auto.offset.reset", "share_auto_offset_reset", "share_auto_offset_reset",
               check=_auto_offset_reset),
    Definition("share.delivery.count.limit", "share_delivery_count_limit", "share_delivery_count_limit", floor=2,
               low="share_min_delivery_count_limit", high="share_max_delivery_count_limit"),
    Definition("share.heartbeat.interval.ms", "share_heartbeat_interval_ms", "share_group_heartbeat_interval_ms",
               floor=1, low="share_group_min_heartbeat_interval_ms", high="share_group_max_heartbeat_interval_ms"),
    Definition("share.isolation.level", "share_isolation_level", None, constant="read_uncommitted",
               check=_isolation_level),
    Definition("share.record.lock.duration.ms", "share_record_lock_duration_ms", "share_record_lock_duration_ms",
               floor=1_000, low="share_min_record_lock_duration_ms", high="share_max_record_lock_duration_ms"),
    Definition("share.session.timeout.ms", "share_session_timeout_ms", "share_group_session_timeout_ms", floor=1,
               low="share_group_min_session_timeout_ms", high="share_group_max_session_timeout_ms"),
    Definition("streams.heartbeat.interval.ms", "streams_heartbeat_interval_ms",
               "streams_group_heartbeat_interval_ms", floor=1, low="streams_group_min_heartbeat_interval_ms",
               high="streams_group_max_heartbeat_interval_ms"),
    # Kafka's group.streams.initial.rebalance.delay.ms default; streams groups here start at once.
    Definition("streams.initial.rebalance.delay.ms", "streams_initial_rebalance_delay_ms", None, constant="3000",
               floor=0),
    Definition("streams.num.standby.replicas", "streams_num_standby_replicas", "streams_group_num_standby_replicas",
               floor=0, high="streams_group_max_standby_replicas"),
    Definition("streams.session.timeout.ms", "streams_session_timeout_ms", "streams_group_session_timeout_ms",
               floor=1, low="streams_group_min_session_timeout_ms", high="streams_group_max_session_timeout_ms"),
)
BY_NAME: dict[str, Definition] = {d.name: d for d in DEFINITIONS}
_PAIRS = (("consumer", "consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"),
          ("share", "share.session.timeout.ms", "share.heartbeat.interval.ms"),
          ("streams", "streams.session.timeout.ms", "streams.heartbeat.interval.ms"))
"""Kafka's last checks: each type's session timeout above its heartbeat interval."""

_SETTINGS = {field: spec for field, spec, _ in declared(GroupConfig)}
"""GroupConfig field -> its setting declaration (the broker key, Kafka's default)."""


# ---- requests and responses -----------------------------------------------------------------------


class GroupConfigChange(msgspec.Struct, frozen=True, gc=False):
    group_id: str
    operations: tuple[tuple[str, int, str | None], ...]  # (name, operation type, value)


class AlterGroupConfigs(msgspec.Struct, frozen=True, gc=False):
    """IncrementalAlterConfigs' GROUP resources (each screened by the edge: authorized, named, no
    duplicate); ``validate_only`` checks without writing."""

    ref: int
    changes: tuple[GroupConfigChange, ...]
    validate_only: bool = False


class GroupConfigOutcome(msgspec.Struct, frozen=True, gc=False):
    group_id: str
    error_code: int = 0
    error_message: str | None = None


class GroupConfigsAltered(msgspec.Struct, frozen=True, gc=False):
    results: tuple[GroupConfigOutcome, ...] = ()
    error_code: int = 0


class DescribeGroupConfigs(msgspec.Struct, frozen=True, gc=False):
    ref: int
    group_ids: tuple[str, ...]


class DescribedConfig(msgspec.Struct, frozen=True, gc=False):
    """One row of DescribeConfigs: the effective value, its source, the type, and the synonyms
    (the group's override, then the broker-wide setting that is its default)."""

    name: str
    value: str
    source: int
    config_type: int
    synonyms: tuple[tuple[str, str, int], ...]  # (name, value, source)


class GroupConfigsDescribed(msgspec.Struct, frozen=True, gc=False):
    groups: tuple[tuple[str, tuple[DescribedConfig, ...]], ...] = ()
    error_code: int = 0


# ---- the service ------------------------------------------------------------------------------------


class InvalidConfig(Exception):
    """A change Kafka refuses with INVALID_CONFIG; the message is Kafka's."""


class GroupConfigs:
    """Every group's overrides on this shard, and the effective values the group types read."""

    def __init__(self, config: GroupConfig) -> None:
        self.config = config
        self.overrides: dict[str, dict[str, str]] = {}
        self.defaults = GroupSettings(**{d.attribute: self._parse(d, self._broker_text(d)) for d in DEFINITIONS})
        self._resolved: dict[str, GroupSettings] = {}

    @property
    def registration(self) -> Registration:
        return Registration(
            name="group-configs",
            record_types=RECORD_TYPES,
            requests={AlterGroupConfigs: self.alter, DescribeGroupConfigs: self.describe},
            error_responses={
                AlterGroupConfigs: lambda req, code: GroupConfigsAltered(error_code=int(code)),
                DescribeGroupConfigs: lambda req, code: GroupConfigsDescribed(error_code=int(code)),
            },
            replayers={GroupConfigKey: self.replay},
        )

    def of(self, group_id: str) -> GroupSettings:
        """The group's effective values (one dict lookup for a group without overrides)."""
        return self._resolved.get(group_id, self.defaults)

    def durable_view(self) -> dict[str, dict[str, str]]:
        return {group_id: dict(sorted(values.items())) for group_id, values in sorted(self.overrides.items())}

    # ---- replay: the only mutator ---------------------------------------------------------------------

    def replay(self, key: GroupConfigKey, value: GroupConfigValue | None, live: bool = False) -> None:
        if value is None or not value.configs:
            self.overrides.pop(key.group_id, None)
            self._resolved.pop(key.group_id, None)
            return
        values = {entry.name: entry.value for entry in value.configs if entry.name in BY_NAME}
        self.overrides[key.group_id] = values
        parsed = {}
        for name, text in values.items():
            try:
                parsed[BY_NAME[name].attribute] = self._parse(BY_NAME[name], text)
            except InvalidConfig:
                continue  # checked when written; a log is never refused for it: the broker's value applies
        self._resolved[key.group_id] = dataclasses.replace(self.defaults, **parsed)

    # ---- requests ----------------------------------------------------------------------------------

    def alter(self, req: AlterGroupConfigs, fx: Effects) -> None:
        results = []
        for change in req.changes:
            try:
                values = self._changed(self.overrides.get(change.group_id, {}), change.operations)
            except InvalidConfig as exc:
                results.append(GroupConfigOutcome(change.group_id, ErrorCode.INVALID_CONFIG, str(exc)))
                continue
            if not req.validate_only and values != self.overrides.get(change.group_id, {}):
                fx.record(config_record(change.group_id, values))
            results.append(GroupConfigOutcome(change.group_id))
        fx.reply(req.ref, GroupConfigsAltered(tuple(results)))

    def describe(self, req: DescribeGroupConfigs, fx: Effects) -> None:
        fx.reply(req.ref, GroupConfigsDescribed(tuple((group_id, self.described(group_id))
                                                      for group_id in req.group_ids)))

    def described(self, group_id: str) -> tuple[DescribedConfig, ...]:
        """Every group config as Kafka's DescribeConfigs shows it (ConfigHelper): the override with
        source DYNAMIC_GROUP_CONFIG, else the broker's value with the broker setting's source."""
        overrides = self.overrides.get(group_id, {})
        rows = []
        for d in DEFINITIONS:
            broker_text = self._broker_text(d)
            synonyms: list[tuple[str, str, int]] = []
            if d.broker is not None:
                spec = _SETTINGS[d.broker]
                synonyms.append((spec.name, broker_text,
                                 DEFAULT_CONFIG if broker_text == spec.default else STATIC_BROKER_CONFIG))
            else:
                synonyms.append((d.name, broker_text, DEFAULT_CONFIG))
            if d.name in overrides:
                synonyms.insert(0, (d.name, overrides[d.name], DYNAMIC_GROUP_CONFIG))
            _, value, source = synonyms[0]
            rows.append(DescribedConfig(d.name, value, source, TYPE_STRING if d.floor is None else TYPE_INT,
                                        tuple(synonyms)))
        return tuple(rows)

    # ---- validation (Kafka's GroupConfig.validate) ------------------------------------------------------

    def _changed(self, current: Mapping[str, str], operations: tuple[tuple[str, int, str | None], ...]
                 ) -> dict[str, str]:
        values = dict(current)
        for name, operation, text in operations:
            if operation in (APPEND, SUBTRACT):
                raise InvalidConfig(f"Can't {OPERATION_NAMES[operation]} to key {name} because its type is not LIST.")
            if operation == DELETE:
                values.pop(name, None)
            elif text is not None:
                values[name] = text
        for name in values:
            if name not in BY_NAME:
                raise InvalidConfig(f"Unknown group config name: {name}")
        parsed = {name: self._parse(BY_NAME[name], text) for name, text in values.items()}
        for name, value in parsed.items():
            self._within_bounds(BY_NAME[name], value)
        effective = {d.name: parsed.get(d.name, getattr(self.defaults, d.attribute)) for d in DEFINITIONS}
        for _, session, heartbeat in _PAIRS:
            if effective[session] <= effective[heartbeat]:
                raise InvalidConfig(f"{session} must be greater than {heartbeat}")
        return values

    def _within_bounds(self, d: Definition, value: Any) -> None:
        if d.low is not None and value < getattr(self.config, d.low):
            raise InvalidConfig(f"{d.name} must be greater than or equal to {_SETTINGS[d.low].name}")
        if d.high is not None and value > getattr(self.config, d.high):
            raise InvalidConfig(f"{d.name} must be less than or equal to {_SETTINGS[d.high].name}")

    @staticmethod
    def _parse(d: Definition, text: str) -> Any:
        """Kafka's ConfigDef.parse of one value: its type, then its validator."""
        if d.floor is None:
            value = text.strip()
            problem = d.check(value) if d.check is not None else None
            if problem is not None:
                raise InvalidConfig(f"Invalid value {text} for configuration {d.name}: {problem}")
            return value
        try:
            number = int(text.strip())
        except ValueError:
            raise InvalidConfig(f"Invalid value {text} for configuration {d.name}: Not a number of type INT") from None
        if not -(2**31) <= number < 2**31:
            raise InvalidConfig(f"Invalid value {text} for configuration {d.name}: Not a number of type INT")
        if number < d.floor:
            raise InvalidConfig(f"Invalid value {number} for configuration {d.name}: Value must be at least {d.floor}")
        return number

    def _broker_text(self, d: Definition) -> str:
        if d.broker is None:
            assert d.constant is not None
            return d.constant
        return str(getattr(self.config, d.broker))


def config_record(group_id: str, values: Mapping[str, str]) -> Record:
    """The group's whole set of overrides (a tombstone when none is left): the one factory."""
    if not values:
        return Record(GroupConfigKey(group_id), None)
    return Record(GroupConfigKey(group_id),
                  GroupConfigValue(tuple(GroupConfigEntry(name, values[name]) for name in sorted(values))))
