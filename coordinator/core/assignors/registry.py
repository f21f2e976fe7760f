"""The built-in assignors by name, and the parsing of ``group.consumer.assignors``.

Kafka's config is a list of built-in short names (since 4.0) or class names; the first entry is the
default assignor for groups whose members request none. Validation follows Kafka's
``ValidList.anyNonDuplicateValues(false, false)``: the list must not be empty and must not repeat
an entry. Kafka's class names of the two built-ins are accepted as aliases; other class names
(custom assignors) are not supported here and are rejected.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Final

from coordinator.core.assignors.api import PartitionAssignor
from coordinator.core.assignors.range_assignor import RangeAssignor
from coordinator.core.assignors.uniform import UniformAssignor

__all__ = [
    "ASSIGNORS",
    "CONSUMER_GROUP_ASSIGNORS_CONFIG",
    "CONSUMER_GROUP_ASSIGNORS_DEFAULT",
    "consumer_group_assignors",
]

CONSUMER_GROUP_ASSIGNORS_CONFIG: Final = "group.consumer.assignors"
CONSUMER_GROUP_ASSIGNORS_DEFAULT: Final[tuple[str, ...]] = ("uniform", "range")

_UNIFORM: Final = UniformAssignor()
_RANGE: Final = RangeAssignor()

ASSIGNORS: Final[Mapping[str, PartitionAssignor]] = MappingProxyType(
    {_UNIFORM.name: _UNIFORM, _RANGE.name: _RANGE}
)
"""The built-in assignors by name, in Kafka's default order."""

_ALIASES: Final[Mapping[str, str]] = MappingProxyType(
    {
        "org.apache.kafka.coordinator.group.assignor.UniformAssignor": _UNIFORM.name,
        "org.apache.kafka.coordinator.group.assignor.RangeAssignor": _RANGE.name,
    }
)


def consumer_group_assignors(
    value: str | Sequence[str] = CONSUMER_GROUP_ASSIGNORS_DEFAULT,
) -> tuple[PartitionAssignor, ...]:
    """The assignors configured by ``group.consumer.assignors``, default first.

    ``value`` is the raw config string (comma separated, whitespace around entries ignored, as in
    Kafka's LIST type) or an already split sequence. Raises ``ValueError`` when the list is empty,
    repeats an entry (or names the same assignor twice) or names an unknown assignor.
    """
    if isinstance(value, str):
        stripped = value.strip()
        entries = [entry.strip() for entry in stripped.split(",")] if stripped else []
    else:
        entries = [entry.strip() for entry in value]
    if not entries:
        raise ValueError(f"Configuration '{CONSUMER_GROUP_ASSIGNORS_CONFIG}' must not be empty.")
    if len(set(entries)) != len(entries):
        raise ValueError(
            f"Configuration '{CONSUMER_GROUP_ASSIGNORS_CONFIG}' values must not be duplicated."
        )
    assignors: list[PartitionAssignor] = []
    seen: set[str] = set()
    for entry in entries:
        name = _ALIASES.get(entry, entry)
        assignor = ASSIGNORS.get(name)
        if assignor is None:
            raise ValueError(
                f"Invalid value {entry!r} for configuration '{CONSUMER_GROUP_ASSIGNORS_CONFIG}': "
                f"supported assignors are {', '.join(ASSIGNORS)}."
            )
        if name in seen:
            raise ValueError(
                f"Configuration '{CONSUMER_GROUP_ASSIGNORS_CONFIG}' names assignor {name!r} twice."
            )
        seen.add(name)
        assignors.append(assignor)
    return tuple(assignors)
