"""Record factories of classic groups: the only place their records are built.

A classic group has one record, ``GroupMetadata`` (Kafka's type 2): the whole group as of its last
persisted generation (``group.ClassicGroup.to_metadata_value``); a tombstone deletes the group.
"""

from __future__ import annotations

from coordinator.core.classic.schema import GroupMetadataKey, GroupMetadataValue
from coordinator.core.record_codec import Record


def group_metadata_record(group_id: str, value: GroupMetadataValue) -> Record:
    return Record(GroupMetadataKey(group_id), value)


def empty_group_record(group_id: str, now_ms: int) -> Record:
    """What Kafka 4 writes to make a brand-new group durable when its first join wrote nothing."""
    return group_metadata_record(
        group_id,
        GroupMetadataValue(protocol_type="", generation=0, protocol=None, leader=None, current_state_timestamp=now_ms),
    )


def group_tombstone(group_id: str) -> Record:
    return Record(GroupMetadataKey(group_id), None)
