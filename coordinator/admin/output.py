"""Rendering admin results: aligned text tables for people, JSON for scripts.

Tables print "-" for an unknown value (no committed offset, no end offset, no owner), as Kafka's
kafka-consumer-groups does. JSON keeps unknown values as null and uses the dataclasses' field names.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any

from .assignment import Partitions


def to_json(value: Any) -> str:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = dataclasses.asdict(value)
    elif isinstance(value, list):
        value = [dataclasses.asdict(v) if dataclasses.is_dataclass(v) and not isinstance(v, type) else v
                 for v in value]
    return json.dumps(value, indent=2, sort_keys=True)


def cell(value: Any) -> str:
    if value is None or value == "":
        return "-"
    return str(value)


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Columns padded to their widest cell; the last column is not padded."""
    text_rows = [[cell(v) for v in row] for row in rows]
    widths = [max([len(h), *(len(r[i]) for r in text_rows)]) for i, h in enumerate(headers)]

    def line(values: Sequence[str]) -> str:
        padded = [v.ljust(w) for v, w in zip(values[:-1], widths[:-1], strict=True)]
        return "  ".join([*padded, values[-1]]).rstrip()

    return "\n".join([line(list(headers)), *(line(r) for r in text_rows)])


def partitions_text(partitions: Partitions | None) -> str:
    """`orders:0,1 payments:2`; "?" when the assignment could not be decoded."""
    if partitions is None:
        return "?"
    return " ".join(f"{topic}:{','.join(str(p) for p in parts)}" for topic, parts in partitions.items())
