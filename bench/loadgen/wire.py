"""Request templates and the little response parsing the hot path needs.

A template is a framed request encoded once with kio and correlation id 0; `Template.frame(cid)`
returns it with the id patched in (bytes 8..12 of the frame: size, api key, api version, id).
Responses are parsed by hand only where it is cheap and fixed (the error code of Heartbeat v4,
the steady-state ConsumerGroupHeartbeat v1 answer); anything else is decoded with kio.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Mapping
from typing import Any

from protocol import client
from protocol.build import build
from protocol.client import encode_request, request_class

I16 = struct.Struct(">h")
I32 = struct.Struct(">i")
CID = struct.Struct(">i")
_TWO_I32 = struct.Struct(">ii")

HEARTBEAT = 12
JOIN_GROUP = 11
SYNC_GROUP = 14
LEAVE_GROUP = 13
OFFSET_COMMIT = 8
API_VERSIONS = 18
CREATE_TOPICS = 19
METADATA = 3
CONSUMER_GROUP_HEARTBEAT = 68

# Error codes the model clients react to.
NONE = 0
COORDINATOR_LOAD_IN_PROGRESS = 14
ILLEGAL_GENERATION = 22
UNKNOWN_MEMBER_ID = 25
REBALANCE_IN_PROGRESS = 27
MEMBER_ID_REQUIRED = 79
FENCED_MEMBER_EPOCH = 110
UNRELEASED_INSTANCE_ID = 111
STALE_MEMBER_EPOCH = 113


class Template:
    """A framed request with a patchable correlation id."""

    __slots__ = ("api_key", "api_version", "data", "head", "tail")

    def __init__(self, api_key: int, api_version: int, data: bytes) -> None:
        self.api_key = api_key
        self.api_version = api_version
        self.data = data
        self.head = data[:8]
        self.tail = data[12:]

    def frame(self, cid: int) -> bytes:
        return self.head + CID.pack(cid) + self.tail


def request(api_key: int, api_version: int, description: Mapping[str, Any],
            client_id: str = "loadgen") -> Template:
    """Encode a request of any API/version from a version-free description (protocol.build)."""
    cls = request_class(api_key, api_version)
    return Template(api_key, api_version, encode_request(api_key, 0, client_id, build(cls, description)))


def decode_response(api_key: int, api_version: int, payload: bytes) -> Any:
    """Decode a response payload (frame without its size); returns the body."""
    return client.decode_response(api_key, api_version, payload)[1]


def heartbeat_v4_error(payload: bytes) -> int:
    """Heartbeat v4 response: id(4) tags(1) throttle(4) error(2) tags(1)."""
    return int(I16.unpack_from(payload, 9)[0])


def _uvarint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7


def cgh_v1_quick(payload: bytes) -> tuple[int, int, int, bool]:
    """ConsumerGroupHeartbeat v1 response -> (error_code, member_epoch, interval_ms, has_assignment).

    Layout: id(4) tags(1) throttle(4) error(2) error_message(compact nullable string)
    member_id(compact nullable string) member_epoch(4) heartbeat_interval(4) assignment(int8 -1 = null).
    """
    (error,) = I16.unpack_from(payload, 9)
    n, pos = _uvarint(payload, 11)
    pos += max(n - 1, 0)
    n, pos = _uvarint(payload, pos)
    pos += max(n - 1, 0)
    epoch, interval = _TWO_I32.unpack_from(payload, pos)
    return error, epoch, interval, payload[pos + 8] != 0xFF


def member_uuid(seed: int) -> str:
    """A deterministic Kafka-style (22-character base64) member id."""
    import base64

    raw = uuid.UUID(int=(seed * 0x9E3779B97F4A7C15 + 1) % (1 << 128)).bytes
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


# ---- the embedded consumer protocol (classic groups' metadata and assignments) -------------------

def encode_subscription(topics: list[str], owned: Mapping[str, list[int]] | None = None) -> bytes:
    """ConsumerProtocolSubscription v1: topics, user data (null), owned partitions."""
    out = bytearray(I16.pack(1))
    out += I32.pack(len(topics))
    for topic in topics:
        raw = topic.encode()
        out += I16.pack(len(raw)) + raw
    out += I32.pack(-1)
    owned = owned or {}
    out += I32.pack(len(owned))
    for topic, partitions in owned.items():
        raw = topic.encode()
        out += I16.pack(len(raw)) + raw + I32.pack(len(partitions))
        out += struct.pack(f">{len(partitions)}i", *partitions)
    return bytes(out)


def decode_subscription_owned(data: bytes) -> dict[str, list[int]]:
    """Owned partitions of a v1+ subscription (empty for v0)."""
    (version,) = I16.unpack_from(data, 0)
    (count,) = I32.unpack_from(data, 2)
    pos = 6
    for _ in range(count):
        (length,) = I16.unpack_from(data, pos)
        pos += 2 + length
    (ud,) = I32.unpack_from(data, pos)
    pos += 4 + max(ud, 0)
    owned: dict[str, list[int]] = {}
    if version < 1:
        return owned
    (count,) = I32.unpack_from(data, pos)
    pos += 4
    for _ in range(count):
        (length,) = I16.unpack_from(data, pos)
        topic = data[pos + 2: pos + 2 + length].decode()
        pos += 2 + length
        (n,) = I32.unpack_from(data, pos)
        pos += 4
        owned[topic] = list(struct.unpack_from(f">{n}i", data, pos))
        pos += 4 * n
    return owned


def encode_assignment(assigned: Mapping[str, list[int]]) -> bytes:
    """ConsumerProtocolAssignment v0: topics with partitions, null user data."""
    out = bytearray(I16.pack(0))
    out += I32.pack(len(assigned))
    for topic, partitions in assigned.items():
        raw = topic.encode()
        out += I16.pack(len(raw)) + raw + I32.pack(len(partitions))
        out += struct.pack(f">{len(partitions)}i", *partitions)
    out += I32.pack(-1)
    return bytes(out)


def decode_assignment(data: bytes) -> dict[str, list[int]]:
    if not data:
        return {}
    (count,) = I32.unpack_from(data, 2)
    pos = 6
    assigned: dict[str, list[int]] = {}
    for _ in range(count):
        (length,) = I16.unpack_from(data, pos)
        topic = data[pos + 2: pos + 2 + length].decode()
        pos += 2 + length
        (n,) = I32.unpack_from(data, pos)
        pos += 4
        assigned[topic] = list(struct.unpack_from(f">{n}i", data, pos))
        pos += 4 * n
    return assigned


def offset_commit_v8_error(payload: bytes) -> int:
    """The first non-zero partition error of an OffsetCommit v8 response, read by hand: decoding
    each response with kio costs the load generator more than the server's handling
    and made it the bottleneck of the commit rows. Layout: correlation id, header tags, throttle,
    then compact arrays of topics (name, partitions of (index, error, tags), tags)."""
    pos = 4 + 1 + 4
    topics, pos = _uvarint(payload, pos)
    for _ in range(topics - 1):
        name_length, pos = _uvarint(payload, pos)
        pos += name_length - 1
        partitions, pos = _uvarint(payload, pos)
        for _ in range(partitions - 1):
            error = (payload[pos + 4] << 8) | payload[pos + 5]
            if error:
                return error
            pos += 6
            tags, pos = _uvarint(payload, pos)
            if tags:
                return _offset_commit_error_decoded(payload)  # tagged fields: let kio read it
        tags, pos = _uvarint(payload, pos)
        if tags:
            return _offset_commit_error_decoded(payload)
    return 0


def _offset_commit_error_decoded(payload: bytes) -> int:
    body = decode_response(OFFSET_COMMIT, 8, payload)
    return max((int(p.error_code) for t in body.topics for p in t.partitions), default=0)
