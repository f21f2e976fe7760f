"""Collection sizes a request claims, checked before kio decodes it.

kio's native reader reserves memory for every array from the element count on the wire (8 bytes
an element) before it reads an element. A count of 33 billion (a 5-byte varint) in a 30-byte
OffsetFetch made it ask for 264 GB, and a failed allocation in Rust aborts the process: one frame
killed the server (found by `bench/fuzz_wire.py`). Kafka's generated readers refuse such a frame
first, and so does `check`, with Kafka's message: "Tried to allocate a collection of size N, but
there are only M bytes remaining." (A legitimate count never exceeds the bytes left: every element
takes at least one.) The same holds for the count of tagged fields. kio also decodes a null where
the schema has a non-nullable array, as None, which handlers then iterate: refused too, with
Kafka's "non-nullable field X was serialized as null".

How: for each (api key, version) whose schema has an array, a walker is generated once from the
kio schema as straight-line Python (lengths of strings and bytes skipped, fixed-size fields
summed, arrays counted and walked, tagged fields skipped by size or walked when known). It only
reads lengths and counts; kio still decodes and checks everything, so a frame that ends early is
left for kio to refuse. Requests without arrays (Heartbeat) cost one dict lookup; a steady
ConsumerGroupHeartbeat about a microsecond.

Strings too: Kafka's generated readers refuse a compact (flexible-version) string longer than
32,767 bytes ("string field groupId had invalid length 40000"), the most an INT16 length can say,
so a name taken from a flexible request always fits the older versions' responses (a 40,000-byte
group id stored once would otherwise break ListGroups v0–v2 for every client). The walker checks
every compact string's length where it reads it. A request whose only reason to be walked is its
strings is walked only when the frame is big enough to hold such a string.
"""

from __future__ import annotations

import dataclasses
import itertools
import struct
from collections.abc import Callable
from functools import cache
from types import NoneType, UnionType
from typing import Any, get_args, get_origin

from .errors import MalformedRequest
from .schemas import request_schema

_FIXED = {"int8": 1, "uint8": 1, "bool": 1, "int16": 2, "uint16": 2, "error_code": 2, "int32": 4, "uint32": 4,
          "timedelta_i32": 4, "int64": 8, "timedelta_i64": 8, "float64": 8, "uuid": 16}
_I16 = struct.Struct(">h").unpack_from
_I32 = struct.Struct(">i").unpack_from

MAX_STRING_LENGTH = 0x7FFF
"""The longest string Kafka's readers accept (an INT16 length's limit, kept for compact strings)."""

Walker = Callable[[bytes, int], int]


def _uvarint(data: bytes, pos: int) -> tuple[int, int]:
    """An unsigned varint of up to 5 bytes (Kafka's); IndexError past the end."""
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80 or shift >= 28:
            return value, pos
        shift += 7


def _null(name: str) -> MalformedRequest:
    return MalformedRequest(f"non-nullable field {name} was serialized as null")


def _too_large(count: int, remaining: int) -> MalformedRequest:
    return MalformedRequest(f"Tried to allocate a collection of size {count}, but there are only "
                            f"{max(remaining, 0)} bytes remaining.")


def _long_string(name: str, length: int) -> MalformedRequest:
    return MalformedRequest(f"string field {name} had invalid length {length}")


def _camel(name: str) -> str:
    """kio's snake_case field name as Kafka's schema spells it (for Kafka's message)."""
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _unwrap(tp: Any) -> Any:
    if get_origin(tp) is UnionType:
        return next(a for a in get_args(tp) if a is not NoneType)
    return tp


class _Source:
    """Generates the walker of one request schema as Python source."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.names = itertools.count()
        self.helpers: dict[str, Any] = {"_uv": _uvarint, "_i16": _I16, "_i32": _I32, "_too_large": _too_large,
                                        "_null": _null, "_long": _long_string}
        self.has_array = False
        self.has_string = False
        """A compact string is read: its length is checked (Kafka's readers refuse one over 32,767)."""

    def emit(self, indent: int, line: str) -> None:
        self.lines.append("    " * indent + line)

    def entity(self, cls: Any, flexible: bool, indent: int) -> None:
        tagged = {}
        for spec in dataclasses.fields(cls):
            if "tag" in spec.metadata:
                tagged[spec.metadata["tag"]] = spec
            else:
                self.field(spec, spec.type, flexible, indent)
        if flexible:
            self.tags(tagged, indent)

    def count(self, flexible: bool, indent: int, name: str, field: str | None) -> None:
        """An array's count, checked against the bytes left; `field` names a non-nullable array
        (kio would decode its null as None where every handler expects a sequence)."""
        if flexible:
            self.emit(indent, "b = d[p]")
            self.emit(indent, "if b < 128:")
            self.emit(indent + 1, f"{name} = b - 1")
            self.emit(indent + 1, "p += 1")
            self.emit(indent, "else:")
            self.emit(indent + 1, f"{name}, p = _uv(d, p)")
            self.emit(indent + 1, f"{name} -= 1")
        else:
            self.emit(indent, f"{name} = _i32(d, p)[0]")
            self.emit(indent, "p += 4")
        self.emit(indent, f"if {name} > len(d) - p:")
        self.emit(indent + 1, f"raise _too_large({name}, len(d) - p)")
        if field is not None:
            self.emit(indent, f"if {name} < 0:")
            self.emit(indent + 1, f"raise _null({field!r})")

    def field(self, spec: dataclasses.Field[Any], tp: Any, flexible: bool, indent: int) -> None:
        nullable = get_origin(tp) is UnionType and NoneType in get_args(tp)
        tp = _unwrap(tp)
        kafka_type = spec.metadata.get("kafka_type", "")
        if get_origin(tp) is tuple:
            self.has_array = True
            inner = _unwrap(get_args(tp)[0])
            n = f"n{next(self.names)}"
            self.count(flexible, indent, n, None if nullable else spec.name)
            if not dataclasses.is_dataclass(inner) and kafka_type in _FIXED:
                self.emit(indent, f"if {n} > 0:")
                self.emit(indent + 1, f"p += {n} * {_FIXED[kafka_type]}")
                return
            self.emit(indent, f"for _ in range({n}):")
            if dataclasses.is_dataclass(inner):
                self.entity(inner, flexible, indent + 1)
            else:
                self.field(spec, inner, flexible, indent + 1)
        elif dataclasses.is_dataclass(tp):
            if nullable:  # Kafka writes a nullable struct after an int8: -1 null, 1 present
                self.emit(indent, "p += 1")
                self.emit(indent, "if d[p - 1] < 128:")
                self.entity(tp, flexible, indent + 1)
            else:
                self.entity(tp, flexible, indent)
        elif kafka_type in _FIXED:
            self.emit(indent, f"p += {_FIXED[kafka_type]}")
        elif kafka_type in ("string", "bytes", "records"):
            if flexible:  # compact: varint of length + 1, 0 is null
                self.emit(indent, "b = d[p]")
                self.emit(indent, "if b < 128:")
                self.emit(indent + 1, "p += b or 1")
                self.emit(indent, "else:")
                self.emit(indent + 1, "b, p = _uv(d, p)")
                if kafka_type == "string":  # one byte holds lengths up to 126: checked only here
                    self.has_string = True
                    self.emit(indent + 1, f"if b > {MAX_STRING_LENGTH + 1}:")
                    self.emit(indent + 2, f"raise _long({_camel(spec.name)!r}, b - 1)")
                self.emit(indent + 1, "p += b - 1")
            elif kafka_type == "string":
                self.emit(indent, "p += 2 + max(_i16(d, p)[0], 0)")
            else:
                self.emit(indent, "p += 4 + max(_i32(d, p)[0], 0)")
        else:
            raise TypeError(f"no guard for {kafka_type!r} ({spec.name})")

    def tags(self, tagged: dict[int, dataclasses.Field[Any]], indent: int) -> None:
        """Tagged fields: a count (checked like an array's), then tag, size, value; a known tag
        whose value holds an array or a string is walked by its own walker, within its size."""
        known = {}
        for tag, spec in tagged.items():
            sub = _Source()
            sub.field(spec, spec.type, True, 1)
            if sub.has_array or sub.has_string:
                known[tag] = sub.compile()
                self.has_array |= sub.has_array
                self.has_string |= sub.has_string
        t = f"t{next(self.names)}"
        self.emit(indent, "b = d[p]")
        self.emit(indent, "if b < 128:")
        self.emit(indent + 1, f"{t} = b")
        self.emit(indent + 1, "p += 1")
        self.emit(indent, "else:")
        self.emit(indent + 1, f"{t}, p = _uv(d, p)")
        self.emit(indent, f"if {t}:")
        self.emit(indent + 1, f"if {t} > len(d) - p:")
        self.emit(indent + 2, f"raise _too_large({t}, len(d) - p)")
        self.emit(indent + 1, f"for _ in range({t}):")
        self.emit(indent + 2, "tag, p = _uv(d, p)")
        self.emit(indent + 2, "size, p = _uv(d, p)")
        if known:
            name = f"_known{next(self.names)}"
            self.helpers[name] = known
            self.emit(indent + 2, f"walker = {name}.get(tag)")
            self.emit(indent + 2, "if walker is not None:")
            self.emit(indent + 3, "walker(d[:p + size], p)")
        self.emit(indent + 2, "p += size")

    def compile(self) -> Walker:
        source = "def walk(d, p):\n" + "\n".join(self.lines or ["    pass"]) + "\n    return p\n"
        namespace = dict(self.helpers)
        exec(compile(source, "<protocol.guard>", "exec"), namespace)
        walker: Walker = namespace["walk"]
        return walker


@cache
def _plan(api_key: int, version: int) -> tuple[Walker, bool] | None:
    """The request's walker and whether every frame needs it (it has an array), or None: nothing
    to check (no array, no compact string)."""
    cls = request_schema(api_key, version)
    source = _Source()
    source.entity(cls, bool(cls.__flexible__), 1)
    if not (source.has_array or source.has_string):
        return None
    return source.compile(), source.has_array


def walker(api_key: int, version: int) -> Walker | None:
    """The request's generated walker (from the body's first byte), or None: nothing to check."""
    plan = _plan(api_key, version)
    return None if plan is None else plan[0]


def walks_every_frame(api_key: int, version: int) -> bool:
    """Whether every frame is walked (the request has an array), not only those that could hold a
    string over 32,767 bytes."""
    plan = _plan(api_key, version)
    return plan is not None and plan[1]


@cache
def _flexible(api_key: int, version: int) -> bool:
    return bool(request_schema(api_key, version).__flexible__)


def check(api_key: int, version: int, frame: bytes) -> None:
    """Raise MalformedRequest if `frame` (header included) claims more elements in a collection
    than it has bytes left, or holds a compact string over 32,767 bytes. A frame that ends early
    is left to kio, which refuses it."""
    plan = _plan(api_key, version)
    if plan is None:
        return
    walk, every_frame = plan
    if not every_frame and len(frame) <= MAX_STRING_LENGTH:
        return  # too small to hold a string the walker would refuse
    try:
        # Header: api key, version, correlation id (8 bytes), client id (INT16 string), then
        # tagged fields in flexible versions (header v2).
        pos = 10 + max(_I16(frame, 8)[0], 0)
        if _flexible(api_key, version):
            tags, pos = _uvarint(frame, pos)
            if tags > len(frame) - pos:
                raise _too_large(tags, len(frame) - pos)
            for _ in range(tags):
                _, pos = _uvarint(frame, pos)
                size, pos = _uvarint(frame, pos)
                pos += size
        walk(frame, pos)
    except (IndexError, struct.error):
        return  # ends early: kio says so
