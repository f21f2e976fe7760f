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

The online migration between the classic and the consumer protocol (``consumer/migration.py``,
``consumer/classic_members.py``) needs whole messages, as Kafka's ``ConsumerProtocol`` reads them:
``read_subscription`` (every field of v0-3; a higher version is read as v3, as Kafka does),
``read_assignment`` (partitions and UserData: a custom assignor's UserData cannot survive an upgrade)
and ``write_assignment`` (what a classic member of a consumer group receives in its SyncGroup, in
the version of its own subscription, capped at 3).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")

HIGHEST_VERSION = 3
"""The newest ConsumerProtocolSubscription/Assignment version (Kafka 4.x); newer ones are read as it."""


@dataclass(frozen=True, slots=True)
class Subscription:
    """A ``ConsumerProtocolSubscription`` (a classic consumer's JoinGroup protocol metadata)."""

    version: int
    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: Mapping[str, frozenset[int]] = field(default_factory=dict)  # v1+
    generation_id: int = -1  # v2+
    rack_id: str | None = None  # v3+


@dataclass(frozen=True, slots=True)
class ProtocolAssignment:
    """A ``ConsumerProtocolAssignment`` (what SyncGroup hands a classic consumer)."""

    version: int
    partitions: Mapping[str, frozenset[int]]
    user_data: bytes | None = None


class _Reader:
    """Kafka's non-flexible encoding: int16-length strings, int32-length arrays and bytes."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def i16(self) -> int:
        (value,) = _I16.unpack_from(self.data, self.pos)
        self.pos += 2
        return int(value)

    def i32(self) -> int:
        (value,) = _I32.unpack_from(self.data, self.pos)
        self.pos += 4
        return int(value)

    def string(self, nullable: bool = False) -> str | None:
        length = self.i16()
        if length < 0:
            if nullable:
                return None
            raise ValueError("null string")
        end = self.pos + length
        if end > len(self.data):
            raise ValueError("string past the end")
        text = self.data[self.pos : end].decode("utf-8")
        self.pos = end
        return text

    def name(self) -> str:
        text = self.string()
        assert text is not None
        return text

    def nullable_bytes(self) -> bytes | None:
        length = self.i32()
        if length < 0:
            return None
        end = self.pos + length
        if end > len(self.data):
            raise ValueError("bytes past the end")
        raw = self.data[self.pos : end]
        self.pos = end
        return raw

    def count(self) -> int:
        n = self.i32()
        if n < 0:
            raise ValueError("null array")
        return n

    def topic_partitions(self) -> dict[str, frozenset[int]]:
        out: dict[str, frozenset[int]] = {}
        for _ in range(self.count()):
            topic = self.name()
            n = self.count()
            parts = struct.unpack_from(f">{n}i", self.data, self.pos)
            self.pos += 4 * n
            out[topic] = out.get(topic, frozenset()) | frozenset(parts)
        return out


def read_version(data: bytes) -> int:
    """The version a subscription or assignment was written in (Kafka's ``deserializeVersion``)."""
    try:
        return _Reader(data).i16()
    except struct.error as exc:
        raise ValueError(f"malformed consumer protocol message: {exc}") from exc


def read_subscription(data: bytes) -> Subscription:
    """Every field of a ConsumerProtocolSubscription; malformed bytes raise ValueError."""
    try:
        reader = _Reader(data)
        version = reader.i16()
        if version < 0:
            raise ValueError(f"unsupported subscription version {version}")
        version = min(version, HIGHEST_VERSION)
        topics = tuple(reader.name() for _ in range(reader.count()))
        user_data = reader.nullable_bytes()
        owned = reader.topic_partitions() if version >= 1 else {}
        generation = reader.i32() if version >= 2 else -1
        rack = reader.string(nullable=True) if version >= 3 else None
        return Subscription(version, topics, user_data, owned, generation, rack)
    except (struct.error, UnicodeDecodeError) as exc:
        raise ValueError(f"malformed consumer protocol subscription: {exc}") from exc


def read_assignment(data: bytes) -> ProtocolAssignment:
    """A ConsumerProtocolAssignment with its UserData; malformed bytes raise ValueError."""
    try:
        reader = _Reader(data)
        version = reader.i16()
        if version < 0:
            raise ValueError(f"unsupported assignment version {version}")
        partitions = reader.topic_partitions()
        return ProtocolAssignment(min(version, HIGHEST_VERSION), partitions, reader.nullable_bytes())
    except (struct.error, UnicodeDecodeError) as exc:
        raise ValueError(f"malformed consumer protocol assignment: {exc}") from exc


def write_assignment(partitions: Mapping[str, Iterable[int]], version: int) -> bytes:
    """A ConsumerProtocolAssignment without UserData (Kafka's ``serializeAssignment``: the version
    is the member's own, capped at the newest; every version has the same fields)."""
    out = bytearray(_I16.pack(min(max(version, 0), HIGHEST_VERSION)))
    out += _I32.pack(len(partitions))
    for topic in sorted(partitions):
        raw = topic.encode("utf-8")
        parts = sorted(partitions[topic])
        out += _I16.pack(len(raw)) + raw + _I32.pack(len(parts))
        out += struct.pack(f">{len(parts)}i", *parts)
    out += _I32.pack(-1)  # UserData: null
    return bytes(out)


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


def encode_subscription(
    topics: list[str],
    version: int = 0,
    user_data: bytes | None = None,
    owned: Mapping[str, Iterable[int]] | None = None,
    generation_id: int = -1,
    rack_id: str | None = None,
) -> bytes:
    """Serialize a subscription of ``version``. For tests and tools, not the hot path."""
    out = bytearray(_I16.pack(version))
    out += _I32.pack(len(topics))
    for topic in topics:
        raw = topic.encode("utf-8")
        out += _I16.pack(len(raw)) + raw
    out += _I32.pack(-1) if user_data is None else _I32.pack(len(user_data)) + user_data
    if version >= 1:
        owned = owned or {}
        out += _I32.pack(len(owned))
        for topic, parts in owned.items():
            raw = topic.encode("utf-8")
            ordered = sorted(parts)
            out += _I16.pack(len(raw)) + raw + _I32.pack(len(ordered)) + struct.pack(f">{len(ordered)}i", *ordered)
    if version >= 2:
        out += _I32.pack(generation_id)
    if version >= 3:
        if rack_id is None:
            out += _I16.pack(-1)
        else:
            raw = rack_id.encode("utf-8")
            out += _I16.pack(len(raw)) + raw
    return bytes(out)
