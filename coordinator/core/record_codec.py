"""The record codec mechanism: how a declared record type is encoded, decoded and replayed.

This module knows no record type. Each owner of records (a group type package, offsets, the
coordinator epoch, a shard service such as ``security/``) declares its own with
:class:`RecordTypeDecl` (the int stored in the log, the key struct, the value struct of every value
version); a :class:`RecordCodec` is built from a list of declarations and refuses, at construction,
a record type id or a key or value struct declared twice. ``records.py`` builds the codec of the
built-in types; ``CoordinatorShard`` builds one from the registrations it was given (its own
``codec``), which is what the runtime writes the log with.

Wire format (what ``encode_record`` returns and the record log stores opaquely):

* key bytes   = msgpack array of the key struct's fields. Keys never change shape: the key bytes are
  the compaction identity, so two encodings of one key must be byte-equal.
* value bytes = 2-byte big-endian value version + msgpack array of the value struct's fields.

Compatibility rule: within one value version, fields are only ever APPENDED, each with a default.
msgspec's ``array_like`` decoding fills missing trailing fields with their defaults (old bytes, new
reader) and ignores extra trailing fields (new bytes, old reader). A change that cannot be expressed
by appending (removing, retyping or reordering a field) takes a new version number and a new struct;
the old struct stays in its declaration's ``values`` forever so old logs stay readable. Unknown
record types raise ``UnknownRecordTypeError``; the loader skips them with a warning, as Kafka's
loader does.

Every table is built once, at construction: encoding a record is two dict lookups by struct type
and decoding one a lookup by record type, then one by value version (the hot path of OffsetCommit
and of every KIP-848 heartbeat).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import msgspec


class RecordStruct(msgspec.Struct, frozen=True, array_like=True):
    """Base of all record keys and values: immutable, hashable, encoded as msgpack arrays."""


@dataclass(frozen=True, slots=True)
class RecordTypeDecl:
    """One record type as its owner declares it.

    ``type_id`` is the int stored next to the record in the log (Kafka's where Kafka has one);
    ``values`` maps every value version ever written to its struct, and ``write_version`` is the
    version written today. A key struct carrying ``group_id`` or ``group`` makes the record belong
    to that group (``group_of``); any other key is coordinator-wide.
    """

    type_id: int
    name: str
    key: type[RecordStruct]
    values: Mapping[int, type[RecordStruct]]
    write_version: int = 0

    def __post_init__(self) -> None:
        if not 0 <= self.type_id <= 0xFFFF:  # the log stores it as a u16
            raise ValueError(f"record type {self.name}: id {self.type_id} does not fit in 16 bits")
        if self.write_version not in self.values:
            raise ValueError(f"record type {self.name}: no value struct for write version {self.write_version}")


class Record(msgspec.Struct, frozen=True, gc=False):
    """One coordinator record. ``value is None`` is a tombstone (delete the key).

    Immutable and compared by value, like the frozen dataclass it used to be; a msgspec struct
    because start-up replay builds one per record in the log and this is five to eight times
    cheaper to construct. ``gc=False`` (not tracked by the cyclic GC) is safe because a record
    can never be part of a reference cycle: its key and value are frozen structs of immutable
    fields, built before it. Never encoded as a whole: ``encode_record`` encodes key and value.
    """

    key: RecordStruct
    value: RecordStruct | None


class UnknownRecordTypeError(ValueError):
    """A record type (or value version) this code does not know; loaders skip it with a warning."""


_VERSION = struct.Struct(">H")
_encoder = msgspec.msgpack.Encoder(uuid_format="bytes")  # topic ids as 16 raw bytes (decoders accept both)

KeyDecoder = Callable[[bytes], Any]
ValueDecoders = dict[int, Callable[[bytes], Any]]

IDENTITY_HEAD_SIZE = 6
"""A loaded record's identity is its type (u16) and key length (u32), then the key bytes."""

RecordReplayer = Callable[[Any, Any, bool], None]
"""``replay(key, value or None, live)``: what a registration declares per key struct."""

EncodedReplayers = dict[int, tuple[KeyDecoder, ValueDecoders, RecordReplayer]]
"""record type -> (key decoder, value decoder by value version, replayer)."""


def group_of(key: object) -> str | None:
    """The group a record belongs to; None for coordinator-wide records (CoordinatorEpoch, ACLs)."""
    group = getattr(key, "group_id", None)
    if group is None:
        group = getattr(key, "group", None)
    return group


def encode_key(key: object) -> bytes:
    return _encoder.encode(key)


class RecordCodec:
    """Encoding and decoding of the declared record types (tables built here, once)."""

    def __init__(self, declarations: Iterable[RecordTypeDecl]) -> None:
        self.declarations: tuple[RecordTypeDecl, ...] = tuple(declarations)
        self.key_types: dict[int, type[RecordStruct]] = {}
        self._type_of_key: dict[type, int] = {}
        self._write_version: dict[type, int] = {}
        self._decoders: dict[int, tuple[KeyDecoder, ValueDecoders]] = {}
        for decl in self.declarations:
            if decl.type_id in self.key_types:
                other = self.key_types[decl.type_id].__name__
                raise ValueError(f"record type {decl.type_id} declared twice ({other} and {decl.key.__name__})")
            if decl.key in self._type_of_key:
                raise ValueError(f"key struct {decl.key.__name__} declared by two record types")
            self.key_types[decl.type_id] = decl.key
            self._type_of_key[decl.key] = decl.type_id
            value = decl.values[decl.write_version]
            if value in self._write_version:
                raise ValueError(f"value struct {value.__name__} written by two record types")
            self._write_version[value] = decl.write_version
            self._decoders[decl.type_id] = (
                msgspec.msgpack.Decoder(decl.key).decode,
                {version: msgspec.msgpack.Decoder(cls).decode for version, cls in decl.values.items()},
            )

        # The two hot paths are closures over this codec's tables (no attribute lookup per call).
        self.encode_record: Callable[[Record], tuple[int, bytes, bytes | None]] = _encoder_of(
            self._type_of_key, self._write_version)
        self.decode_record: Callable[[int, bytes, bytes | None], Record] = _decoder_of(self._decoders)

    def record_type(self, key: object) -> int:
        return self._type_of_key[type(key)]

    def knows(self, record_type: int) -> bool:
        return record_type in self._decoders

    def decode_record_key(self, rtype: int, key: bytes) -> Any:
        """The key of a record alone (what ``group_of`` needs); errors as ``decode_record``'s."""
        decoders = self._decoders.get(rtype)
        if decoders is None:
            raise UnknownRecordTypeError(f"unknown record type {rtype}")
        return decoders[0](key)

    def encoded_replayers(self, replayers: Mapping[type, RecordReplayer]) -> EncodedReplayers:
        """The table ``replay_encoded_record`` dispatches on, from the replayers declared per key struct."""
        return {
            rtype: (decode_key, decode_value_by_version, replayers[self.key_types[rtype]])
            for rtype, (decode_key, decode_value_by_version) in self._decoders.items()
            if self.key_types[rtype] in replayers
        }


def _encoder_of(type_of_key: dict[type, int],
                write_version: dict[type, int]) -> Callable[[Record], tuple[int, bytes, bytes | None]]:
    encode = _encoder.encode
    pack_version = _VERSION.pack

    def encode_record(record: Record) -> tuple[int, bytes, bytes | None]:
        """Encode to ``(record_type, key_bytes, value_bytes or None for a tombstone)``."""
        rtype = type_of_key[type(record.key)]
        key = encode(record.key)
        if record.value is None:
            return rtype, key, None
        return rtype, key, pack_version(write_version[type(record.value)]) + encode(record.value)

    return encode_record


def _decoder_of(decoders: dict[int, tuple[KeyDecoder, ValueDecoders]]) -> Callable[[int, bytes, bytes | None], Record]:
    def decode_record(rtype: int, key: bytes, value: bytes | None) -> Record:
        """Inverse of ``encode_record``.

        Raises ``UnknownRecordTypeError`` for unknown types/versions and ``msgspec.DecodeError`` (a
        ``ValueError``) for malformed bytes.
        """
        found = decoders.get(rtype)
        if found is None:
            raise UnknownRecordTypeError(f"unknown record type {rtype}")
        decode_key, decode_value_by_version = found
        decoded_key = decode_key(key)
        if value is None:
            return Record(decoded_key, None)
        if len(value) < 2:  # _VERSION.size
            raise msgspec.DecodeError("record value shorter than its version prefix")
        version = value[0] << 8 | value[1]  # _VERSION: big-endian u16
        decode_value = decode_value_by_version.get(version)
        if decode_value is None:
            raise UnknownRecordTypeError(f"unknown value version {version} for record type {rtype}")
        # A bytes slice: for these small values, cheaper than a memoryview and its slice.
        return Record(decoded_key, decode_value(value[2:]))

    return decode_record


def replay_encoded_record(table: EncodedReplayers, identity: bytes, value: bytes | None) -> int:
    """Decode and replay one record as the record log loads it; 1 if skipped as unknown, else 0.

    ``identity`` names the record as the record log does (``recordlog.load.LoadBatch``): the
    record type (u16, big-endian), the key length (u32), then the key bytes. This does what
    ``replayer(decode_record(...))`` does, without building a ``Record``. A record of an unknown type
    or value version is skipped (as Kafka's loader skips unknown types). Malformed bytes raise
    ``msgspec.DecodeError`` as ``decode_record`` does.
    """
    found = table.get(identity[0] << 8 | identity[1])
    if found is None:
        return 1
    decode_key, decode_value_by_version, replay = found
    if value is None:
        replay(decode_key(identity[IDENTITY_HEAD_SIZE:]), None, False)
        return 0
    if len(value) < 2:  # _VERSION.size
        raise msgspec.DecodeError("record value shorter than its version prefix")
    decode_value = decode_value_by_version.get(value[0] << 8 | value[1])
    if decode_value is None:
        return 1
    replay(decode_key(identity[IDENTITY_HEAD_SIZE:]), decode_value(value[2:]), False)
    return 0
