"""Build kio entities of any version from one plain description.

Handlers describe a response once, as nested mappings with Kafka's field names in snake_case
(`{"error_code": 0, "groups": [{"group_id": "g", ...}]}`), and `build(cls, data)` produces the
entity of the exact version asked for:

- fields the version does not have are ignored (so one description serves every version);
- fields the description leaves out take the schema default, or the zero value of their Kafka type
  (0, "", b"", empty array, all-zero UUID; None where the field is nullable);
- nested mappings become the version's nested entity classes; ints become `ErrorCode` and
  millisecond timedeltas where the schema says so.

Per-class plans are computed once and cached, so building costs one pass over the description.
"""

from __future__ import annotations

import dataclasses
import datetime
import uuid
from collections.abc import Callable, Mapping
from functools import cache
from types import NoneType, UnionType
from typing import Any, TypeVar, get_args, get_origin

from kio.schema.errors import ErrorCode

T = TypeVar("T")

_ZERO_UUID = uuid.UUID(int=0)

_ZEROS: dict[str, Any] = {
    "int8": 0,
    "int16": 0,
    "int32": 0,
    "int64": 0,
    "uint8": 0,
    "uint16": 0,
    "uint32": 0,
    "uint64": 0,
    "float64": 0.0,
    "string": "",
    "bytes": b"",
    "records": b"",
    "bool": False,
    "uuid": _ZERO_UUID,
    "error_code": ErrorCode.none,
    "timedelta_i32": datetime.timedelta(0),
    "timedelta_i64": datetime.timedelta(0),
}

Converter = Callable[[Any], Any]
_MISSING = object()


def _timedelta(value: Any) -> Any:
    if isinstance(value, datetime.timedelta):
        return value
    return datetime.timedelta(milliseconds=value)


def _error_code(value: Any) -> Any:
    if isinstance(value, ErrorCode):
        return value
    return ErrorCode(int(value))


def _unwrap_optional(tp: Any) -> tuple[Any, bool]:
    if get_origin(tp) is UnionType:
        args = [a for a in get_args(tp) if a is not NoneType]
        return args[0], True
    return tp, False


def _field_plan(field: dataclasses.Field[Any]) -> tuple[str, Converter | None, Any]:
    """(name, converter or None, default or _MISSING)."""
    tp, nullable = _unwrap_optional(field.type)
    converter: Converter | None = None
    zero: Any
    if get_origin(tp) is tuple:
        inner, _ = _unwrap_optional(get_args(tp)[0])
        if dataclasses.is_dataclass(inner):
            nested = inner

            def converter(value: Any, _cls: Any = nested) -> Any:
                return tuple(item if isinstance(item, _cls) else build(_cls, item) for item in value)

        else:
            kafka_type = field.metadata.get("kafka_type")
            if kafka_type == "error_code":
                def converter(value: Any) -> Any:
                    return tuple(_error_code(v) for v in value)
            else:
                def converter(value: Any) -> Any:
                    return tuple(value)
        zero = None if nullable else ()
    elif dataclasses.is_dataclass(tp):
        nested_cls = tp

        def converter(value: Any, _cls: Any = nested_cls) -> Any:
            if value is None or isinstance(value, _cls):
                return value
            return build(_cls, value)

        zero = None if nullable else _MISSING
    else:
        kafka_type = field.metadata.get("kafka_type", "")
        if kafka_type in ("timedelta_i32", "timedelta_i64"):
            converter = _timedelta
        elif kafka_type == "error_code":
            converter = _error_code
        zero = None if nullable else _ZEROS.get(kafka_type, _MISSING)
    if field.default is not dataclasses.MISSING:
        default = field.default
    elif field.default_factory is not dataclasses.MISSING:
        default = field.default_factory()
    else:
        default = zero
    return field.name, converter, default


@cache
def _plan(cls: Any) -> tuple[tuple[str, Converter | None, Any], ...]:
    return tuple(_field_plan(f) for f in dataclasses.fields(cls))


def build(cls: type[T], data: Mapping[str, Any]) -> T:
    """Instantiate the kio entity `cls` from a version-free description."""
    kwargs: dict[str, Any] = {}
    plan: Any = _plan
    for name, converter, default in plan(cls):
        value = data.get(name, _MISSING)
        if value is _MISSING:
            if default is _MISSING:
                # A required nested entity with no description: build it from nothing.
                nested: Any = next(f for f in dataclasses.fields(cls) if f.name == name).type  # type: ignore[arg-type]
                kwargs[name] = build(nested, {})
                continue
            kwargs[name] = default
        elif converter is not None and value is not None:
            kwargs[name] = converter(value)
        else:
            kwargs[name] = value
    return cls(**kwargs)
