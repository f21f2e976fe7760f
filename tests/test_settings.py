"""The settings registry: every key declared once, and the structs built from what was resolved."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from coordinator import config as config_module
from coordinator.config import KEYS, ConfigError, resolve
from coordinator.core.config import ClassicGroupConfig, ConsumerGroupConfig, GroupConfig
from coordinator.core.shard import BUILT_IN_TYPES
from coordinator.dataplane.config import DataPlaneConfig
from coordinator.recordlog import FlushPolicy, LogConfig
from coordinator.settings import Setting, declared

STRUCTS = (ClassicGroupConfig, ConsumerGroupConfig, GroupConfig, LogConfig, DataPlaneConfig)
PACKAGE = Path(__file__).resolve().parents[1] / "coordinator"


@pytest.mark.parametrize("cls", STRUCTS, ids=lambda c: c.__name__)
def test_a_struct_built_from_the_defaults_equals_its_own_defaults(cls: type) -> None:
    """The key's default and the field's default are one declaration (scaled where the units differ)."""
    assert resolve(environ={}).build(cls) == cls()


@pytest.mark.parametrize("cls", STRUCTS, ids=lambda c: c.__name__)
def test_every_declared_field_is_in_the_registry_and_feeds_that_field(cls: type) -> None:
    fields = declared(cls)
    assert fields, f"{cls.__name__} declares no settings"
    for name, spec, _ in fields:
        key = KEYS[spec.name]
        # The row belongs to the struct that declares the field (GroupConfig inherits the types').
        declaring = next(c for c in reversed(cls.__mro__)
                         if dataclasses.is_dataclass(c) and name in {f.name for f in dataclasses.fields(c)})
        assert (key.owner, key.field) == (declaring, name)


def test_each_built_in_group_type_registers_its_own_settings_and_the_core_reads_them_all() -> None:
    registered = {t.name: t.settings for t in BUILT_IN_TYPES}
    assert (registered["classic"], registered["consumer"]) == (ClassicGroupConfig, ConsumerGroupConfig)
    assert KEYS["group.max.size"].owner is ClassicGroupConfig
    assert KEYS["group.consumer.max.size"].owner is ConsumerGroupConfig
    assert KEYS["offsets.retention.minutes"].owner is GroupConfig  # no type's: offsets are every type's
    config = resolve(environ={}, overrides=["group.max.size=7", "group.consumer.max.size=9"])
    assert config.build(ClassicGroupConfig).group_max_size == 7
    assert (config.build(GroupConfig).group_max_size, config.build(GroupConfig).consumer_group_max_size) == (7, 9)


@pytest.mark.parametrize("protocols", ["classic", "classic,consumer", "consumer,classic"])
def test_the_rebalance_protocols_are_the_registered_group_types_names(protocols: str) -> None:
    config = resolve(environ={}, overrides=[f"group.coordinator.rebalance.protocols={protocols}"])
    assert config["group.coordinator.rebalance.protocols"] == tuple(protocols.split(","))


@pytest.mark.parametrize("protocols", ["consumer", "classic,nosuch", "classic,toy"])
def test_a_rebalance_protocol_no_type_registers_or_no_classic_is_refused_as_before(protocols: str) -> None:
    with pytest.raises(ConfigError) as error:
        resolve(environ={}, overrides=[f"group.coordinator.rebalance.protocols={protocols}"])
    assert error.value.key == "group.coordinator.rebalance.protocols"
    assert "must contain classic and may contain consumer" in str(error.value)


def test_resolved_values_reach_the_core_struct_in_its_units() -> None:
    config = resolve(environ={"COORDINATOR_OFFSETS_RETENTION_MINUTES": "5"},
                     overrides=["group.consumer.assignors=range", "group.max.size=7"])
    group = config.build(GroupConfig)
    assert config["offsets.retention.minutes"] == 5
    assert group.offsets_retention_ms == 5 * 60_000
    assert group.consumer_group_assignors == ("range",)
    assert group.group_max_size == 7


def test_an_enum_field_parses_its_choices_and_refuses_others() -> None:
    assert resolve(environ={}, overrides=["log.flush.policy=interval"]).build(LogConfig).flush_policy is FlushPolicy.INTERVAL
    with pytest.raises(ConfigError) as error:
        resolve(environ={}, overrides=["log.flush.policy=sometimes"])
    assert error.value.key == "log.flush.policy" and "always, interval, none" in str(error.value)


def test_validation_declared_on_a_core_field_applies() -> None:
    with pytest.raises(ConfigError) as error:
        resolve(environ={}, overrides=["group.consumer.assignors=uniform,uniform"])
    assert error.value.key == "group.consumer.assignors"
    with pytest.raises(ConfigError):
        resolve(environ={}, overrides=["offsets.retention.minutes=0"])


def test_a_key_declared_twice_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    twice = (Setting("group.max.size", "1", "again", int),)
    monkeypatch.setattr(config_module, "_SECTIONS", (*config_module._SECTIONS, twice))
    with pytest.raises(RuntimeError, match=r"group\.max\.size"):
        config_module._registry()


def test_every_key_the_server_reads_by_name_is_read_somewhere() -> None:
    """Keys not owned by a struct are read as config["key"]: a key nobody reads is dead."""
    sources = "\n".join(p.read_text() for p in PACKAGE.rglob("*.py") if p.name != "config.py")
    unread = [k.name for k in KEYS.values() if k.owner is None and f'"{k.name}"' not in sources]
    assert unread == []


def test_settings_module_is_pure_so_the_core_may_use_it() -> None:
    tree = ast.parse((PACKAGE / "settings.py").read_text())
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom) and node.module}
    assert imported <= {"__future__", "dataclasses", "enum", "typing", "collections"}


def test_fields_without_a_setting_are_constants_not_keys() -> None:
    names = {f.name for f in dataclasses.fields(GroupConfig)} - {n for n, _, _ in declared(GroupConfig)}
    assert names == {"new_member_join_timeout_ms"}
