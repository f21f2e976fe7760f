"""Precompiled `struct` encoders for the hot responses, byte-for-byte equal to kio's writers.

kio decodes natively but encodes in pure Python (a BytesIO per flexible struct for its tagged
fields), and building the kio entity first costs as much again. For the responses a coordinator
sends most — Heartbeat, ConsumerGroupHeartbeat, OffsetCommit, ShareFetch — these encoders write the bytes
straight from the version-free description the adapters hand to `protocol.build` (same field names,
same defaults for what a description leaves out: 0, None for nullable fields; ints or timedeltas
for durations, ints or `ErrorCode`s for error codes). They are kept few and table-driven (one row per
API version), and `tests/protocol/test_fastencode.py` proves with Hypothesis that
`ENCODERS[(api_key, version)](correlation_id, description)` equals kio's encoding of
`build(schema, description)`.

The result is the framed bytes (size prefix, response header, body). No tagged fields are ever
written: kio's entities for these APIs have none with values.

ShareFetch's ``records`` may also be a list of buffers (the stored batches a fetch sends, whole):
they are joined into the frame once, the only copy between the log's bytes and the socket.
"""

from __future__ import annotations

import datetime
import struct
from collections.abc import Callable, Mapping
from typing import Any

_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_II = struct.Struct(">ii")
_IIH = struct.Struct(">iih")
_IIIH = struct.Struct(">iiih")
_IH = struct.Struct(">ih")
_HEARTBEAT_V4 = struct.Struct(">iiBihB")  # size, correlation id, header tags; throttle, error, body tags
_CGH_HEAD = struct.Struct(">iiBih")  # size, correlation id, header tags; throttle, error
_SMALL = tuple(bytes((n,)) for n in range(0x80))
"""The one-byte unsigned varints (a short string's compact length): indexed, not built per call."""

Description = Mapping[str, Any]
Encoder = Callable[[int, Description], bytes]


def _ms(value: Any) -> int:
    """A duration in int milliseconds; a timedelta rounded as kio's `write_timedelta_i32` does."""
    if value.__class__ is int:
        return value
    if isinstance(value, datetime.timedelta):
        return round(value.total_seconds() * 1000)
    return int(value)


def _uvarint(value: int) -> bytes:
    if value < 0x80:
        return _SMALL[value]
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
        def encode(cid: int, d: Description) -> bytes:
            return _IIH.pack(6, cid, d.get("error_code", 0))
    elif version < 4:
        def encode(cid: int, d: Description) -> bytes:
            return _IIIH.pack(10, cid, _ms(d.get("throttle_time", 0)), d.get("error_code", 0))
    else:
        def encode(cid: int, d: Description) -> bytes:
            # header v1: id + empty tags; body: throttle, error, empty tags
            return _HEARTBEAT_V4.pack(12, cid, 0, _ms(d.get("throttle_time", 0)), d.get("error_code", 0), 0)
    return encode


# ---- ConsumerGroupHeartbeat (68) v0-1 -------------------------------------------------------------

_NO_TOPIC_ID = bytes(16)


def _consumer_group_heartbeat(cid: int, d: Description) -> bytes:
    # The steady answer (no message, a short member id, no assignment) costs no call but the packs:
    # this encoder runs once per heartbeat.
    get = d.get
    throttle = get("throttle_time", 0)
    interval = get("heartbeat_interval", 0)
    message = get("error_message")
    member_id = get("member_id")
    if member_id is None:
        member = b"\x00"
    else:
        raw = member_id.encode()
        member = _SMALL[len(raw) + 1] + raw if len(raw) < 0x7F else _uvarint(len(raw) + 1) + raw
    assignment = get("assignment")
    body = (b"\x00" if message is None else _compact_nullable_string(message)) + member + _II.pack(
        get("member_epoch", 0), interval if interval.__class__ is int else _ms(interval)) + (
        b"\xff\x00" if assignment is None else _assignment(assignment))  # null struct marker (KIP-893), tags
    return _CGH_HEAD.pack(len(body) + 11, cid, 0, throttle if throttle.__class__ is int else _ms(throttle),
                          get("error_code", 0)) + body


def _assignment(assignment: Description) -> bytes:
    """ConsumerGroupHeartbeat's present Assignment struct, then the response's empty tags."""
    parts = [b"\x01"]
    topics = assignment.get("topic_partitions", ())
    parts.append(_uvarint(len(topics) + 1))
    for tp in topics:
        partitions = tp.get("partitions", ())
        topic_id = tp.get("topic_id")
        parts.append(_NO_TOPIC_ID if topic_id is None else topic_id.bytes)
        parts.append(_uvarint(len(partitions) + 1))
        parts.append(struct.pack(f">{len(partitions)}i", *partitions))
        parts.append(b"\x00")
    parts.append(b"\x00\x00")  # Assignment tags, response tags
    return b"".join(parts)


# ---- OffsetCommit (8) v2-9 ------------------------------------------------------------------------

def _offset_commit(version: int) -> Encoder:
    flexible = version >= 8
    throttle = version >= 3

    def encode(cid: int, d: Description) -> bytes:
        parts = [_I32.pack(cid)]
        if flexible:
            parts.append(b"\x00")
        if throttle:
            parts.append(_I32.pack(_ms(d.get("throttle_time", 0))))
        topics = d.get("topics", ())
        parts.append(_uvarint(len(topics) + 1) if flexible else _I32.pack(len(topics)))
        for topic in topics:
            raw = topic.get("name", "").encode()
            parts.append(_uvarint(len(raw) + 1) if flexible else _I16.pack(len(raw)))
            parts.append(raw)
            partitions = topic.get("partitions", ())
            parts.append(_uvarint(len(partitions) + 1) if flexible else _I32.pack(len(partitions)))
            if flexible:
                parts.extend(_IH.pack(p.get("partition_index", 0), p.get("error_code", 0)) + b"\x00"
                             for p in partitions)
                parts.append(b"\x00")
            else:
                parts.extend(_IH.pack(p.get("partition_index", 0), p.get("error_code", 0)) for p in partitions)
        if flexible:
            parts.append(b"\x00")
        return _framed(b"".join(parts))

    return encode


# ---- ShareFetch (78) v1-2 (the same layout) ----------------------------------------------------------

_SHARE_HEAD = struct.Struct(">iB")  # correlation id, header tags
_SHARE_TOP = struct.Struct(">ih")  # throttle, error
_SHARE_PARTITION = struct.Struct(">ih")  # partition index, error
_LEADER = struct.Struct(">iiB")  # leader id, leader epoch, tags
_SHARE_PARTITION_PLAIN = struct.Struct(">ihBhBiiB")  # index, error, null message, ack error, null message, leader
_NO_LEADER: Description = {}
_ACQUIRED = struct.Struct(">qqhB")  # first offset, last offset, delivery count, tags


def _share_fetch(cid: int, d: Description) -> bytes:
    get = d.get
    parts = [b"", _SHARE_HEAD.pack(cid, 0), _SHARE_TOP.pack(_ms(get("throttle_time", 0)), get("error_code", 0)),
             _compact_nullable_string(get("error_message")), _I32.pack(_ms(get("acquisition_lock_timeout", 0)))]
    topics = get("responses", ())
    parts.append(_uvarint(len(topics) + 1))
    for topic in topics:
        topic_id = topic.get("topic_id")
        parts.append(_NO_TOPIC_ID if topic_id is None else topic_id.bytes)
        partitions = topic.get("partitions", ())
        parts.append(_uvarint(len(partitions) + 1))
        for p in partitions:
            pget = p.get
            leader = pget("current_leader") or _NO_LEADER
            message, ack_message = pget("error_message"), pget("acknowledge_error_message")
            if message is None and ack_message is None:  # the common answer: one pack to the records
                parts.append(_SHARE_PARTITION_PLAIN.pack(
                    pget("partition_index", 0), pget("error_code", 0), 0, pget("acknowledge_error_code", 0), 0,
                    leader.get("leader_id", 0), leader.get("leader_epoch", 0), 0))
            else:
                parts.append(_SHARE_PARTITION.pack(pget("partition_index", 0), pget("error_code", 0)))
                parts.append(_compact_nullable_string(message))
                parts.append(_I16.pack(pget("acknowledge_error_code", 0)))
                parts.append(_compact_nullable_string(ack_message))
                parts.append(_LEADER.pack(leader.get("leader_id", 0), leader.get("leader_epoch", 0), 0))
            records = pget("records", b"")
            if records.__class__ is list:  # the stored batches, joined below with the rest
                parts.append(_uvarint(sum(map(len, records)) + 1))
                parts.extend(records)
            else:
                parts.append(_uvarint(len(records) + 1))
                parts.append(records)
            acquired = pget("acquired_records", ())
            parts.append(_uvarint(len(acquired) + 1))
            pack = _ACQUIRED.pack
            parts.extend(pack(a.get("first_offset", 0), a.get("last_offset", 0), a.get("delivery_count", 0), 0)
                         for a in acquired)
            parts.append(b"\x00")  # partition tags
        parts.append(b"\x00")  # topic tags
    nodes = get("node_endpoints", ())
    parts.append(_uvarint(len(nodes) + 1))
    for node in nodes:
        host = node.get("host", "").encode()
        parts.append(_I32.pack(node.get("node_id", 0)) + _uvarint(len(host) + 1) + host
                     + _I32.pack(node.get("port", 0)) + _compact_nullable_string(node.get("rack")) + b"\x00")
    parts.append(b"\x00")  # response tags
    parts[0] = _I32.pack(sum(map(len, parts)))
    return b"".join(parts)


def _table() -> dict[tuple[int, int], Encoder]:
    table: dict[tuple[int, int], Encoder] = {}
    for version in range(5):
        table[(12, version)] = _heartbeat(version)
    for version in (0, 1):
        table[(68, version)] = _consumer_group_heartbeat
    for version in range(2, 10):
        table[(8, version)] = _offset_commit(version)
    for version in (1, 2):
        table[(78, version)] = _share_fetch
    return table


ENCODERS: dict[tuple[int, int], Encoder] = _table()
"""(api_key, api_version) -> encoder of a response description into framed bytes."""
