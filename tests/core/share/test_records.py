"""Share-partition records: their bytes round-trip, keep the layout every coordinator record has, and
belong to their group's log partition."""

from __future__ import annotations

import pytest

from coordinator.core.records import group_of
from coordinator.core.share.records import (
    SHARE_BATCH_RECORD_TYPE,
    SHARE_PARTITION_RECORD_TYPE,
    RecordState,
    SharePartitionKey,
    StateRun,
    batch_record,
    batch_tombstone,
    decode_share_record,
    encode_share_record,
    partition_record,
    partition_tombstone,
)

from .twin import GROUP, TOPIC

KEY = SharePartitionKey(GROUP, TOPIC, 3)


@pytest.mark.parametrize("record", [
    partition_record(KEY, 2, 100, 140),
    partition_tombstone(KEY),
    batch_record(KEY, 100, 119, [StateRun(100, 104, int(RecordState.ACKNOWLEDGED), 1),
                                 StateRun(105, 119, int(RecordState.ACQUIRED), 2, "member-1", 1_700_000_030_000)]),
    batch_tombstone(KEY, 100),
])
def test_records_round_trip_through_their_bytes(record: object) -> None:
    rtype, key, value = encode_share_record(record)  # type: ignore[arg-type]
    assert rtype in (SHARE_PARTITION_RECORD_TYPE, SHARE_BATCH_RECORD_TYPE)
    assert value is None or value[:2] == b"\x00\x00", "a 2-byte value version first, as every record"
    assert decode_share_record(rtype, key, value) == record


def test_keys_are_the_compaction_identity_and_name_the_group() -> None:
    _, a, _ = encode_share_record(batch_record(KEY, 100, 119, []))
    _, b, _ = encode_share_record(batch_tombstone(KEY, 100))
    _, c, _ = encode_share_record(batch_tombstone(KEY, 120))
    assert a == b != c
    assert group_of(KEY) == GROUP  # type: ignore[arg-type]


def test_unknown_types_and_versions_are_refused() -> None:
    rtype, key, value = encode_share_record(partition_record(KEY, 0, 0, 0))
    with pytest.raises(ValueError, match="not a share-partition record type"):
        decode_share_record(7, key, value)
    assert value is not None
    with pytest.raises(ValueError, match="unknown value version 9"):
        decode_share_record(rtype, key, b"\x00\x09" + value[2:])
