"""A standby tailing a KIP-848 group's log while compaction rewrites it (KAFKA-19862).

The tailer reads the first segment as written, then compaction merges the closed segments and drops
superseded records, and the tailer reads on from the compacted file. It therefore sees a member's
old record claiming a partition, not the later record in which that member released it (dropped:
superseded by the member's even later record), and then another member's record claiming the same
partition. Replay must accept that and end in the live state.
"""

from __future__ import annotations

import uuid

from coordinator.core.config import GroupConfig
from coordinator.core.consumer.assignment import at_one_epoch, normalized
from coordinator.core.consumer.member import ConsumerGroupMember
from coordinator.core.consumer.records import (
    current_assignment_record,
    group_epoch_record,
    member_metadata_record,
    member_tombstones,
)
from coordinator.core.records import Record, decode_record, encode_record
from coordinator.core.shard import CoordinatorShard
from coordinator.recordlog import (
    LogConfig,
    LogRecord,
    LogTailer,
    MemoryFileSystem,
    RecordLog,
    compact,
)

LOG_DIR = "/log"
TOPIC = uuid.UUID(int=7)
G = "g"


def _member(member_id: str, epoch: int, partitions: tuple[int, ...]) -> ConsumerGroupMember:
    assigned = normalized({TOPIC: partitions}) if partitions else normalized({})
    return ConsumerGroupMember(
        member_id,
        subscribed_topic_names=("t",),
        member_epoch=epoch,
        previous_member_epoch=epoch - 1,
        assigned_partitions=assigned,
        assignment_epochs=at_one_epoch(assigned, epoch),
    )


def _holds(member_id: str, epoch: int, *partitions: int) -> list[Record]:
    member = _member(member_id, epoch, partitions)
    return [member_metadata_record(G, member), current_assignment_record(G, member)]


def _tail_through_compaction(entries: list[list[Record]], read_first: int) -> CoordinatorShard:
    """Write one segment per entry; the tailer reads ``read_first`` entries, then the closed
    segments are compacted, then the tailer reads the rest."""
    fs = MemoryFileSystem()
    log = RecordLog.open(fs, LOG_DIR, config=LogConfig(segment_bytes=1))  # one segment per batch
    tailer = LogTailer(fs, LOG_DIR)
    shard = CoordinatorShard(GroupConfig())

    def replay(polled: int | None = None) -> None:
        for entry in tailer.poll(polled):
            for record in entry.records:
                shard.replay(decode_record(record.record_type, record.key, record.value))

    for index, records in enumerate(entries):
        log.append([LogRecord(*encode_record(r)) for r in records], 0)
        log.flush()
        if index + 1 == read_first:
            replay()
    report = compact(fs, LOG_DIR, now_ms=0)
    assert report.superseded_dropped > 0
    replay()
    log.close()
    return shard


def _live(entries: list[list[Record]]) -> CoordinatorShard:
    shard = CoordinatorShard(GroupConfig())
    for records in entries:
        for record in records:
            shard.replay(record)
    return shard


def test_partition_moved_while_the_log_is_compacted_under_a_tailer() -> None:
    entries = [
        [group_epoch_record(G, 1, 0), *_holds("A", 1, 0, 1)],  # read as written
        [current_assignment_record(G, _member("A", 2, (1,)))],  # A releases 0: compacted away
        [group_epoch_record(G, 2, 0), *_holds("B", 2, 0)],  # B claims 0
        [current_assignment_record(G, _member("A", 3, (1,)))],  # supersedes A's release
        [group_epoch_record(G, 3, 0)],  # the active segment
    ]
    tailed = _tail_through_compaction(entries, read_first=1)
    live = _live(entries)
    assert tailed.durable_view() == live.durable_view()
    group = tailed.group(G)
    assert group is not None and group.owner(TOPIC, 0) == "B" and group.owner(TOPIC, 1) == "A"  # type: ignore[attr-defined]


def test_member_that_left_and_rejoined_while_the_log_is_compacted_is_a_new_member() -> None:
    entries = [
        [group_epoch_record(G, 1, 0), *_holds("A", 1, 0)],  # read as written
        # From here the tailer reads the compacted log: A's last record 8 (a tombstone) survives,
        # its metadata tombstone does not (superseded by the rejoin's record 5).
        [*member_tombstones(G, "A"), group_epoch_record(G, 2, 0)],  # A leaves
        [current_assignment_record(G, ConsumerGroupMember("A", member_epoch=0)), group_epoch_record(G, 3, 0)],
        [*member_tombstones(G, "A"), group_epoch_record(G, 4, 0)],  # A leaves again
        [member_metadata_record(G, _member("A", 0, ())), group_epoch_record(G, 5, 0)],  # A rejoins
        [group_epoch_record(G, 6, 0)],  # the active segment
    ]
    tailed = _tail_through_compaction(entries, read_first=1)
    live = _live(entries)
    assert tailed.durable_view() == live.durable_view()
    group = tailed.group(G)
    assert group is not None and group.members["A"].member_epoch == 0
