"""Precompiled `struct` encoders for the hot responses, byte-for-byte equal to kio's writers.

kio decodes natively but encodes in pure Python (a BytesIO per flexible struct for its tagged
fields); for the responses a coordinator sends most — Heartbeat, ConsumerGroupHeartbeat,
OffsetCommit — that is most of the cost of a request. These encoders write the same bytes from the
same kio entity with a few `struct.pack` calls. They are kept few and table-driven (one row per
response class: which header, whether flexible, whether it has a throttle time), and
`tests/protocol/test_fastencode.py` proves them equal to kio's output with Hypothesis.

`ENCODERS[cls](correlation_id, response)` returns the framed bytes (size prefix, response header,
body). No tagged fields are ever written: kio's entities for these APIs have none with values.
"""

from __future__ import annotations

import datetime
import struct
from collections.abc import Callable
from typing import Any

from kio.index import load_response_schema

_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_II = struct.Struct(">ii")
_IIH = struct.Struct(">iih")
_IIIH = struct.Struct(">iiih")
_IH = struct.Struct(">ih")

Encoder = Callable[[int, Any], bytes]


def _ms(value: datetime.timedelta) -> int:
    """kio's `write_timedelta_i32`."""
    return round(value.total_seconds() * 1000)


def _uvarint(value: int) -> bytes:
    if value < 0x80:
        return bytes((value,))
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _compact_nullable_string(value: str | None) -> bytes:
    if value is None:
        return b"\x00"
    raw = value.encode()
    return _uvarint(len(raw) + 1) + raw


def _framed(body: bytes) -> bytes:
    return _I32.pack(len(body)) + body


# ---- Heartbeat (12) v0-4 --------------------------------------------------------------------------

def _heartbeat(version: int) -> Encoder:
    if version == 0:
        def encode(cid: int, r: Any) -> bytes:
            return _IIH.pack(6, cid, r.error_code.value)
    elif version < 4:
        def encode(cid: int, r: Any) -> bytes:
            return _IIIH.pack(10, cid, _ms(r.throttle_time), r.error_code.value)
    else:
        def encode(cid: int, r: Any) -> bytes:
            # header v1: id + empty tags; body: throttle, error, empty tags
            return _II.pack(12, cid) + b"\x00" + _IH.pack(_ms(r.throttle_time), r.error_code.value) + b"\x00"
    return encode


# ---- ConsumerGroupHeartbeat (68) v0-1 -------------------------------------------------------------

def _consumer_group_heartbeat(cid: int, r: Any) -> bytes:
    parts = [_I32.pack(cid), b"\x00", _IH.pack(_ms(r.throttle_time), r.error_code.value),
             _compact_nullable_string(r.error_message), _compact_nullable_string(r.member_id),
             _II.pack(r.member_epoch, _ms(r.heartbeat_interval))]
    assignment = r.assignment
    if assignment is None:
        parts.append(b"\xff\x00")  # null struct marker (KIP-893), empty tags
    else:
        parts.append(b"\x01")
        topics = assignment.topic_partitions
        parts.append(_uvarint(len(topics) + 1))
        for tp in topics:
            partitions = tp.partitions
            parts.append(tp.topic_id.bytes if tp.topic_id is not None else bytes(16))
            parts.append(_uvarint(len(partitions) + 1))
            parts.append(struct.pack(f">{len(partitions)}i", *partitions))
            parts.append(b"\x00")
        parts.append(b"\x00\x00")  # Assignment tags, response tags
    return _framed(b"".join(parts))


# ---- OffsetCommit (8) v2-9 ------------------------------------------------------------------------

def _offset_commit(version: int) -> Encoder:
    flexible = version >= 8
    throttle = version >= 3

    def encode(cid: int, r: Any) -> bytes:
        parts = [_I32.pack(cid)]
        if flexible:
            parts.append(b"\x00")
        if throttle:
            parts.append(_I32.pack(_ms(r.throttle_time)))
        topics = r.topics
        parts.append(_uvarint(len(topics) + 1) if flexible else _I32.pack(len(topics)))
        for topic in topics:
            raw = topic.name.encode()
            parts.append(_uvarint(len(raw) + 1) if flexible else _I16.pack(len(raw)))
            parts.append(raw)
            partitions = topic.partitions
            parts.append(_uvarint(len(partitions) + 1) if flexible else _I32.pack(len(partitions)))
            if flexible:
                parts.extend(_IH.pack(p.partition_index, p.error_code.value) + b"\x00" for p in partitions)
                parts.append(b"\x00")
            else:
                parts.extend(_IH.pack(p.partition_index, p.error_code.value) for p in partitions)
        if flexible:
            parts.append(b"\x00")
        return _framed(b"".join(parts))

    return encode


def _table() -> dict[type, Encoder]:
    table: dict[type, Encoder] = {}
    for version in range(5):
        table[load_response_schema(12, version)] = _heartbeat(version)
    for version in (0, 1):
        table[load_response_schema(68, version)] = _consumer_group_heartbeat
    for version in range(2, 10):
        table[load_response_schema(8, version)] = _offset_commit(version)
    return table


ENCODERS: dict[type, Encoder] = _table()
