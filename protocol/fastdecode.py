"""Direct decoders for the hot requests, producing exactly the kio entities kio's readers produce.

Per steady heartbeat, kio's generic reading was the largest single cost left in the codec: a
header entity built only for its client id, then the body entity through kio's native reader
(and, for requests with arrays, `guard.py`'s walk before it). For the requests a coordinator
receives most — Heartbeat, ConsumerGroupHeartbeat, OffsetCommit — these decoders read the header's
client id and the body with `struct` and build the same kio entity (the class kio would build, its
fields set through their slots: a frozen dataclass's `__init__` costs more than the reading).

They read only what they are sure of. Anything unexpected — a frame that ends early, a null where
the field is not nullable, a tagged field, an array count above the bytes left, bytes that are not
UTF-8, a varint longer than Kafka's five bytes, bytes after the body — returns None, and the codec
decodes the frame with kio as it does every other request, so kio (with `guard.py`) keeps deciding
every refusal. The one refusal made here is Kafka's own string rule, which must hold on both paths:
a compact string over 32,767 bytes is a `MalformedRequest` ("string field groupId had invalid
length N", as Kafka's generated readers say).

`tests/protocol/test_fastdecode.py` proves with Hypothesis, for every version covered, that random
valid requests decode equal to kio's result and that random truncations and corruptions get the
same outcome (the same entity, or a refusal) on both paths.
"""

from __future__ import annotations

import dataclasses
import datetime
import struct
import uuid
from collections.abc import Callable
from types import NoneType, UnionType
from typing import Any, get_args, get_origin

from .errors import MalformedRequest
from .schemas import request_schema

MAX_STRING_LENGTH = 0x7FFF
"""The longest string Kafka's readers accept (an INT16 length's limit, kept for compact strings)."""

_I16 = struct.Struct(">h").unpack_from
_I32 = struct.Struct(">i").unpack_from
_I64 = struct.Struct(">q").unpack_from
_IQ = struct.Struct(">iq").unpack_from
_IQI = struct.Struct(">iqi").unpack_from

_MAX_RETENTION_MS = 2**53
"""Longer retention times (285,000 years) are left to kio, which has its own limit."""

Decoded = tuple[str, Any]
"""The header's client id ("" when null, as the codec reports it) and the body entity."""
Decoder = Callable[[bytes], Decoded | None]


class _Unsure(Exception):
    """Something these decoders do not vouch for: the frame goes to kio."""


def _uvarint(d: bytes, p: int) -> tuple[int, int]:
    """An unsigned varint of at most five bytes and 32 bits (Kafka's); anything longer is kio's."""
    value = shift = 0
    while shift < 35:
        byte = d[p]
        p += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            if value > 0xFFFFFFFF:
                raise _Unsure
            return value, p
        shift += 7
    raise _Unsure


def _length(d: bytes, p: int) -> tuple[int, int]:
    """A compact length (varint of length + 1; -1 is null)."""
    b = d[p]
    if b < 0x80:
        return b - 1, p + 1
    b, p = _uvarint(d, p)
    return b - 1, p


def _compact(d: bytes, p: int, name: str) -> tuple[str | None, int]:
    """A compact nullable string; over 32,767 bytes is Kafka's refusal."""
    b = d[p]
    if b < 0x80:
        n = b - 1
        p += 1
    else:
        n, p = _uvarint(d, p)
        n -= 1
        if n > MAX_STRING_LENGTH:
            raise MalformedRequest(f"string field {name} had invalid length {n}")
    if n < 0:
        return None, p
    end = p + n
    if end > len(d):
        raise _Unsure
    return str(d[p:end], "utf-8"), end


def _compact_required(d: bytes, p: int, name: str) -> tuple[str, int]:
    value, p = _compact(d, p, name)
    if value is None:
        raise _Unsure
    return value, p


def _string(d: bytes, p: int) -> tuple[str | None, int]:
    """An INT16-length nullable string (at most 32,767 bytes by its encoding)."""
    n = _I16(d, p)[0]
    p += 2
    if n < 0:
        if n != -1:
            raise _Unsure
        return None, p
    end = p + n
    if end > len(d):
        raise _Unsure
    return str(d[p:end], "utf-8"), end


def _string_required(d: bytes, p: int) -> tuple[str, int]:
    value, p = _string(d, p)
    if value is None:
        raise _Unsure
    return value, p


def _count(d: bytes, p: int, flexible: bool) -> tuple[int, int]:
    """An array's element count (-1: null), never above the bytes left (`guard.py` refuses that)."""
    if flexible:
        n, p = _length(d, p)
    else:
        n = _I32(d, p)[0]
        p += 4
        if n < -1:
            raise _Unsure
    if n > len(d) - p:
        raise _Unsure
    return n, p


def _uuid(d: bytes, p: int) -> uuid.UUID | None:
    raw = d[p:p + 16]
    if len(raw) != 16:
        raise _Unsure
    return None if raw == _ZERO_UUID else uuid.UUID(bytes=raw)  # kio reads the zero id as null


_ZERO_UUID = bytes(16)


def _header(d: bytes, flexible: bool) -> tuple[str, int]:
    """Request header v1 (v2 when flexible): the client id and where the body starts."""
    client_id, p = _string(d, 8)
    if flexible:
        if d[p] != 0:  # header tagged fields: none expected
            raise _Unsure
        p += 1
    return client_id or "", p


def _end(d: bytes, p: int, flexible: bool) -> None:
    """The body's last tagged-field count (none expected) and the frame's end."""
    if flexible:
        if d[p] != 0:
            raise _Unsure
        p += 1
    if p != len(d):
        raise _Unsure


def _maker(cls: Any) -> Callable[..., Any]:
    """Builds a `cls` from its fields' values in declaration order, through the slots (what
    `__init__` leaves in them, without its per-field `object.__setattr__`)."""
    if "__slots__" not in cls.__dict__ or hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__name__}: not a plain slotted dataclass")
    names = [spec.name for spec in dataclasses.fields(cls)]
    namespace: dict[str, Any] = {"new": object.__new__, "cls": cls}
    lines = [f"def make({', '.join(names)}):", "    o = new(cls)"]
    for name in names:
        namespace[f"set_{name}"] = cls.__dict__[name].__set__
        lines.append(f"    set_{name}(o, {name})")
    lines.append("    return o")
    exec(compile("\n".join(lines) + "\n", f"<protocol.fastdecode {cls.__name__}>", "exec"), namespace)
    make: Callable[..., Any] = namespace["make"]
    return make


def _element(cls: Any, name: str) -> Any:
    """The entity class of the array field `name` of `cls`."""
    tp = next(spec.type for spec in dataclasses.fields(cls) if spec.name == name)
    if get_origin(tp) is UnionType:
        tp = next(a for a in get_args(tp) if a is not NoneType)
    return get_args(tp)[0]


def _guarded(decode: Callable[[bytes], Decoded]) -> Decoder:
    """Turns every sign of a frame these decoders do not vouch for into None (kio decodes it)."""
    def decoder(frame: bytes) -> Decoded | None:
        try:
            return decode(frame)
        except (_Unsure, IndexError, struct.error, UnicodeDecodeError, OverflowError):
            return None
    return decoder


# ---- Heartbeat (12) v0-4 --------------------------------------------------------------------------

def _heartbeat(version: int) -> Decoder:
    make = _maker(request_schema(12, version))
    flexible = version >= 4
    instance = version >= 3

    def decode(d: bytes) -> Decoded:
        client_id, p = _header(d, flexible)
        if flexible:
            group_id, p = _compact_required(d, p, "groupId")
            generation_id = _I32(d, p)[0]
            member_id, p = _compact_required(d, p + 4, "memberId")
            instance_id, p = _compact(d, p, "groupInstanceId")
            _end(d, p, True)
            return client_id, make(group_id, generation_id, member_id, instance_id)
        group_id, p = _string_required(d, p)
        generation_id = _I32(d, p)[0]
        member_id, p = _string_required(d, p + 4)
        if not instance:
            _end(d, p, False)
            return client_id, make(group_id, generation_id, member_id)
        instance_id, p = _string(d, p)
        _end(d, p, False)
        return client_id, make(group_id, generation_id, member_id, instance_id)

    return _guarded(decode)


# ---- ConsumerGroupHeartbeat (68) v0-1 -------------------------------------------------------------

def _consumer_group_heartbeat(version: int) -> Decoder:
    cls = request_schema(68, version)
    make = _maker(cls)
    make_topic = _maker(_element(cls, "topic_partitions"))
    regex = version >= 1

    def decode(d: bytes) -> Decoded:
        client_id, p = _header(d, True)
        group_id, p = _compact_required(d, p, "groupId")
        member_id, p = _compact_required(d, p, "memberId")
        member_epoch = _I32(d, p)[0]
        instance_id, p = _compact(d, p + 4, "instanceId")
        rack_id, p = _compact(d, p, "rackId")
        rebalance_timeout = datetime.timedelta(milliseconds=_I32(d, p)[0])
        n, p = _count(d, p + 4, True)
        names: tuple[str, ...] | None = None
        if n >= 0:
            read = []
            for _ in range(n):
                name, p = _compact_required(d, p, "subscribedTopicNames")
                read.append(name)
            names = tuple(read)
        topic_regex = None
        if regex:
            topic_regex, p = _compact(d, p, "subscribedTopicRegex")
        assignor, p = _compact(d, p, "serverAssignor")
        n, p = _count(d, p, True)
        owned: tuple[Any, ...] | None = None
        if n >= 0:
            topics = []
            for _ in range(n):
                topic_id = _uuid(d, p)
                count, p = _count(d, p + 16, True)
                if count < 0:
                    raise _Unsure
                partitions = struct.unpack_from(f">{count}i", d, p)
                p += 4 * count
                if d[p] != 0:
                    raise _Unsure
                p += 1
                topics.append(make_topic(topic_id, partitions))
            owned = tuple(topics)
        _end(d, p, True)
        if regex:
            return client_id, make(group_id, member_id, member_epoch, instance_id, rack_id, rebalance_timeout,
                                   names, topic_regex, assignor, owned)
        return client_id, make(group_id, member_id, member_epoch, instance_id, rack_id, rebalance_timeout,
                               names, assignor, owned)

    return _guarded(decode)


# ---- OffsetCommit (8) v2-10 -----------------------------------------------------------------------

def _offset_commit(version: int) -> Decoder:
    cls = request_schema(8, version)
    make = _maker(cls)
    topic_cls = _element(cls, "topics")
    make_topic = _maker(topic_cls)
    make_partition = _maker(_element(topic_cls, "partitions"))
    flexible = version >= 8
    retention = version <= 4
    leader_epoch = version >= 6
    instance = version >= 7
    topic_ids = version >= 10

    def decode(d: bytes) -> Decoded:
        client_id, p = _header(d, flexible)
        if flexible:
            group_id, p = _compact_required(d, p, "groupId")
            generation = _I32(d, p)[0]
            member_id, p = _compact_required(d, p + 4, "memberId")
            instance_id, p = _compact(d, p, "groupInstanceId")
        else:
            group_id, p = _string_required(d, p)
            generation = _I32(d, p)[0]
            member_id, p = _string_required(d, p + 4)
            if retention:
                retention_ms = _I64(d, p)[0]
                if not -_MAX_RETENTION_MS <= retention_ms <= _MAX_RETENTION_MS:
                    raise _Unsure  # kio refuses a duration whose microseconds overflow an int64
                retention_time = datetime.timedelta(milliseconds=retention_ms)
                p += 8
            elif instance:
                instance_id, p = _string(d, p)
        n, p = _count(d, p, flexible)
        if n < 0:
            raise _Unsure
        topics = []
        for _ in range(n):
            if topic_ids:
                topic: Any = _uuid(d, p)
                p += 16
            elif flexible:
                topic, p = _compact_required(d, p, "name")
            else:
                topic, p = _string_required(d, p)
            count, p = _count(d, p, flexible)
            if count < 0:
                raise _Unsure
            partitions = []
            for _ in range(count):
                if leader_epoch:
                    index, offset, epoch = _IQI(d, p)
                    p += 16
                else:
                    index, offset = _IQ(d, p)
                    p += 12
                if flexible:
                    metadata, p = _compact(d, p, "committedMetadata")
                    if d[p] != 0:
                        raise _Unsure
                    p += 1
                else:
                    metadata, p = _string(d, p)
                partitions.append(make_partition(index, offset, epoch, metadata) if leader_epoch
                                  else make_partition(index, offset, metadata))
            if flexible:
                if d[p] != 0:
                    raise _Unsure
                p += 1
            topics.append(make_topic(topic, tuple(partitions)))
        _end(d, p, flexible)
        if retention:
            return client_id, make(group_id, generation, member_id, retention_time, tuple(topics))
        if instance:
            return client_id, make(group_id, generation, member_id, instance_id, tuple(topics))
        return client_id, make(group_id, generation, member_id, tuple(topics))

    return _guarded(decode)


def _table() -> dict[tuple[int, int], Decoder]:
    table: dict[tuple[int, int], Decoder] = {}
    for version in range(5):
        table[(12, version)] = _heartbeat(version)
    for version in (0, 1):
        table[(68, version)] = _consumer_group_heartbeat(version)
    for version in range(2, 11):
        table[(8, version)] = _offset_commit(version)
    return table


DECODERS: dict[tuple[int, int], Decoder] = _table()
"""(api_key, api_version) -> decoder of a whole frame (header included, size prefix excluded) into
(client id, kio request entity), or None: decode it with kio."""
