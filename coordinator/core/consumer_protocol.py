"""The pieces of the embedded consumer protocol the coordinator reads: subscribed topics, assigned partitions.

Classic groups with protocol type "consumer" carry a ``ConsumerProtocolSubscription`` as each member's
protocol metadata. Kafka's coordinator needs the topic list for offset expiration and for OffsetDelete's
``GROUP_SUBSCRIBED_TO_TOPIC`` (``ClassicGroup.computeSubscribedTopics``). Layout (big-endian):

    int16 version                      0..3 known; any version >= 0 is accepted
    int32 topic count, then per topic: int16 length + UTF-8 bytes
    ... (v0: UserData; v1+: OwnedPartitions; v2+: GenerationId; v3+: RackId)

Every version starts with the v0 fields and later versions only append, so, exactly like Kafka, we
parse the v0 *prefix* (version, then Topics) of any version and ignore the rest. Malformed bytes raise
``ValueError``; callers treat that as "subscription unknown".

``decode_assignment`` reads a ``ConsumerProtocolAssignment`` (the leader's SyncGroup bytes) the same
way: version, then the v0 Topics/Partitions prefix. The history uses it to follow partition
ownership in classic groups.
"""

from __future__ import annotations

import struct

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def parse_subscription_topics(data: bytes) -> frozenset[str]:
    """Return the topic names of a serialized ConsumerProtocolSubscription (any version)."""
    try:
        (version,) = _I16.unpack_from(data, 0)
        if version < 0:
            raise ValueError(f"unsupported subscription version {version}")
        (count,) = _I32.unpack_from(data, 2)
        if count < 0:
            raise ValueError("null topic array")
        pos = 6
        topics: set[str] = set()
        for _ in range(count):
            (length,) = _I16.unpack_from(data, pos)
            pos += 2
            if length < 0 or pos + length > len(data):
                raise ValueError("bad topic name length")
            topics.add(data[pos : pos + length].decode("utf-8"))
            pos += length
        return frozenset(topics)
    except (struct.error, UnicodeDecodeError) as exc:
        raise ValueError(f"malformed consumer protocol subscription: {exc}") from exc


def decode_assignment(data: bytes) -> dict[str, frozenset[int]]:
    """Topic -> partitions of a ConsumerProtocolAssignment (any version: they share the v0 prefix).

    Empty bytes mean no assignment. Malformed bytes raise ValueError."""
    if not data:
        return {}
    try:
        (version,) = _I16.unpack_from(data, 0)
        if version < 0:
            raise ValueError(f"negative assignment version {version}")
        (topics,) = _I32.unpack_from(data, 2)
        pos = 6
        out: dict[str, frozenset[int]] = {}
        for _ in range(max(topics, 0)):
            (length,) = _I16.unpack_from(data, pos)
            pos += 2
            if length < 0 or pos + length > len(data):
                raise ValueError("bad topic name length")
            name = data[pos : pos + length].decode("utf-8")
            pos += length
            (count,) = _I32.unpack_from(data, pos)
            pos += 4
            parts = struct.unpack_from(f">{max(count, 0)}i", data, pos)
            pos += 4 * max(count, 0)
            if parts:
                out[name] = out.get(name, frozenset()) | frozenset(parts)
        return out
    except (struct.error, UnicodeDecodeError) as exc:
        raise ValueError(f"malformed consumer protocol assignment: {exc}") from exc


def encode_subscription(topics: list[str], version: int = 0, user_data: bytes | None = None) -> bytes:
    """Serialize the v0 fields (plus an empty tail for v1+). For tests and tools, not the hot path."""
    out = bytearray(_I16.pack(version))
    out += _I32.pack(len(topics))
    for topic in topics:
        raw = topic.encode("utf-8")
        out += _I16.pack(len(raw)) + raw
    out += _I32.pack(-1) if user_data is None else _I32.pack(len(user_data)) + user_data
    if version >= 1:
        out += _I32.pack(0)  # OwnedPartitions: empty
    if version >= 2:
        out += _I32.pack(-1)  # GenerationId
    if version >= 3:
        out += _I16.pack(-1)  # RackId: null
    return bytes(out)
