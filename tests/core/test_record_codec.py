"""The record codec is built from its owners' declarations: one owner per id, the same bytes as
ever, and a shard's codec holds exactly what its registrations declare."""

from __future__ import annotations

import pytest

from coordinator.core import records
from coordinator.core.classic.schema import GroupMetadataKey, GroupMetadataValue
from coordinator.core.offset_records import OffsetCommitKey, OffsetCommitValue
from coordinator.core.record_codec import (
    Record,
    RecordCodec,
    RecordStruct,
    RecordTypeDecl,
    UnknownRecordTypeError,
)
from coordinator.core.registry import Registration, check_records
from coordinator.core.shard import CoordinatorShard
from coordinator.security.records import CODEC as SECURITY_CODEC
from coordinator.security.records import AclKey, AclValue
from coordinator.security.store import SecurityStore


class OtherKey(RecordStruct, frozen=True):
    name: str


class OtherValue(RecordStruct, frozen=True):
    n: int


def test_a_record_type_id_declared_twice_stops_construction() -> None:
    taken = RecordTypeDecl(1, "NotOffsets", OtherKey, {0: OtherValue})
    with pytest.raises(ValueError, match="record type 1 declared twice"):
        RecordCodec((*records.BUILTIN_RECORD_TYPES, taken))


def test_a_key_or_value_struct_declared_by_two_types_stops_construction() -> None:
    with pytest.raises(ValueError, match="key struct OffsetCommitKey"):
        RecordCodec((*records.BUILTIN_RECORD_TYPES, RecordTypeDecl(4000, "Again", OffsetCommitKey, {0: OtherValue})))
    with pytest.raises(ValueError, match="value struct OffsetCommitValue"):
        RecordCodec((*records.BUILTIN_RECORD_TYPES, RecordTypeDecl(4000, "Again", OtherKey, {0: OffsetCommitValue})))


def test_a_declaration_needs_a_struct_for_the_version_it_writes_and_a_16_bit_id() -> None:
    with pytest.raises(ValueError, match="write version 1"):
        RecordTypeDecl(4000, "Odd", OtherKey, {0: OtherValue}, write_version=1)
    with pytest.raises(ValueError, match="16 bits"):
        RecordTypeDecl(70_000, "Big", OtherKey, {0: OtherValue})


def test_a_registration_replays_exactly_the_record_types_it_declares() -> None:
    decl = RecordTypeDecl(4000, "Other", OtherKey, {0: OtherValue})
    check_records(Registration("ok", record_types=(decl,), replayers={OtherKey: lambda k, v, live: None}))
    with pytest.raises(ValueError, match="declared without a replayer"):
        check_records(Registration("mute", record_types=(decl,)))
    with pytest.raises(ValueError, match="replayed without a declaration"):
        check_records(Registration("stowaway", replayers={OtherKey: lambda k, v, live: None}))


def test_the_built_in_codec_writes_the_bytes_the_log_always_held() -> None:
    # Fixed bytes: what the codec wrote before record types were declared by their owners.
    assert records.encode_record(Record(OffsetCommitKey("g", "t", 0), OffsetCommitValue(5))) == (
        1, b"\x93\xa1g\xa1t\x00", b"\x00\x00\x96\x05\xff\xa0\xff\xff\xc0")
    assert records.encode_record(Record(GroupMetadataKey("g"), None)) == (2, b"\x91\xa1g", None)
    value = GroupMetadataValue("consumer", 1, "range", "m", 7)
    assert records.decode_record(*records.encode_record(Record(GroupMetadataKey("g"), value))).value == value


def test_a_shard_codec_knows_its_services_records_and_the_core_codec_does_not() -> None:
    acl = Record(AclKey(2, "t", 3, "User:a", "*", 3, 3), AclValue())
    with pytest.raises(KeyError):
        records.encode_record(acl)  # the core names no security record
    shard = CoordinatorShard(services=(SecurityStore(),))
    encoded = shard.codec.encode_record(acl)
    assert encoded == SECURITY_CODEC.encode_record(acl) and encoded[0] == 1002
    assert shard.codec.decode_record(*encoded) == acl
    with pytest.raises(UnknownRecordTypeError):
        CoordinatorShard().codec.decode_record(*encoded)
    assert set(CoordinatorShard().codec.key_types) == {d.type_id for d in records.BUILTIN_RECORD_TYPES}
