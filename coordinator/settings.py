"""How a setting is declared: once, with its Kafka key, default, validation and documentation.

A setting consumed by a component's config struct (the core's `GroupConfig`, the record log's
`LogConfig`, the data plane's `DataPlaneConfig`) is declared on the struct's field with `setting(...)`:

    group_max_size: int = setting("group.max.size", INT32_MAX, "Most members of a classic group.",
                                  check=at_least(1))

The field's default is the key's default (times `scale`, for keys whose unit differs from the
field's: `offsets.retention.minutes` feeds `offsets_retention_ms`), the field's type says how the
text of a value is parsed, and `coordinator.config` collects every declared field into its registry,
which yields the defaults, the validation, `coordinator serve --help`, the README table, and builds
the structs from resolved values (`Config.build(GroupConfig)`). Settings read by the server itself
are declared as `Setting(...)` rows in `coordinator.config`. The parsers several features share
(`parse_host_port`) are here too, so a feature's settings need nothing of `coordinator.config`.

Pure (standard library only), so the deterministic core may declare its settings with it.
"""

from __future__ import annotations

import dataclasses
import enum
import typing
from collections.abc import Callable
from typing import Any

Check = Callable[[Any], "str | None"]
"""Returns an error message for a parsed value that is out of range, None when it is fine."""

_METADATA = "coordinator.setting"


@dataclasses.dataclass(frozen=True, slots=True)
class Setting:
    name: str
    """Kafka's key (ours where Kafka has none; the doc line says "(ours)")."""
    default: str
    """The default as a user would write it (`uniform,range`, `true`, `10080`)."""
    doc: str
    parse: Callable[[str], Any] | None = None
    """Text -> value; None: derived from the type of the field the setting is declared on."""
    check: Check | None = None
    scale: int = 1
    """Field value = key value * scale (a key in minutes feeding a field in milliseconds)."""


def setting(name: str, default: Any, doc: str, *, check: Check | None = None, scale: int = 1,
            parse: Callable[[str], Any] | None = None) -> Any:
    """Declare a struct field as the setting `name` (use as the field's default)."""
    spec = Setting(name, as_text(default), doc, parse, check, scale)
    value = default * scale if scale != 1 else default
    return dataclasses.field(default=value, metadata={_METADATA: spec})


def declared(cls: type[Any]) -> list[tuple[str, Setting, Any]]:
    """(field name, setting, field type) of every field of the dataclass `cls` declared with `setting`."""
    hints = typing.get_type_hints(cls)
    return [(f.name, f.metadata[_METADATA], hints[f.name])
            for f in dataclasses.fields(cls) if _METADATA in f.metadata]


def as_text(value: Any) -> str:
    """A value as it is written in a properties file."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, enum.Enum):
        return str(value.value)
    if isinstance(value, tuple):
        return ",".join(str(v) for v in value)
    return str(value)


INT32_MAX = 2**31 - 1
"""The largest value of a Kafka INT setting (a Java int)."""


def parse_host_port(raw: str) -> tuple[str, int]:
    """`host:port`, `PLAINTEXT://host:port` or `[::1]:port`."""
    value = raw.strip()
    if "://" in value:
        scheme, value = value.split("://", 1)
        if scheme.upper() != "PLAINTEXT":
            raise ValueError(f"only PLAINTEXT listeners are supported, got {scheme}")
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"expected host:port, got {raw!r}")
    host = host.strip("[]")
    port_number = int(port)
    if not 0 <= port_number <= 65535:
        raise ValueError(f"port {port_number} out of range")
    return host, port_number


def at_least(low: int) -> Check:
    return lambda v: None if v >= low else f"must be at least {low}"


def between(low: int, high: int) -> Check:
    """A Kafka INT setting's range is `between(low, INT32_MAX)`: Kafka refuses a larger number
    ("Not a number of type INT"), and some of these values go into INT32 fields on the wire."""
    return lambda v: None if low <= v <= high else f"must be between {low} and {high}"


def one_of(*choices: str) -> Check:
    return lambda v: None if v in choices else f"must be one of {', '.join(choices)}"
