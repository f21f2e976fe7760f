"""The classic group's record type: GroupMetadata (Kafka's type 2), its structs and declaration.

A classic group has one record: the whole group as of its last persisted generation
(``group.ClassicGroup.to_metadata_value``); a tombstone deletes the group. Struct and field names
follow Kafka's ``GroupMetadataValue.json`` in snake_case (``rebalanceTimeout`` -> ``rebalance_timeout``:
milliseconds, as in Kafka, although the name has no ``_ms``). ``records.py`` holds the factories,
``manager.py`` the replayer.
"""

from __future__ import annotations

from coordinator.core.record_codec import RecordStruct, RecordTypeDecl

GROUP_METADATA = 2


class GroupMetadataKey(RecordStruct, frozen=True):
    group: str


class GroupMetadataMember(RecordStruct, frozen=True):
    """Kafka's ``GroupMetadataValue.MemberMetadata``."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes  # metadata of the selected protocol only
    assignment: bytes


class GroupMetadataValue(RecordStruct, frozen=True):
    protocol_type: str  # "" when none
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = -1
    members: tuple[GroupMetadataMember, ...] = ()


RECORD_TYPES = (RecordTypeDecl(GROUP_METADATA, "GroupMetadata", GroupMetadataKey, {0: GroupMetadataValue}),)
