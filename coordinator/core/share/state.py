"""A shard's share partitions: lookup by (group, topic id, partition), replay dispatch, and their lifecycle.

:class:`SharePartitions` is what the shard will hold next to its groups (registration is the next
step): every share-partition record of a group's log partition is replayed here, live and at load.
:func:`initialize` starts a partition at the offset ``share.auto.offset.reset`` (or
AlterShareGroupOffsets) chose; :func:`reset` starts it again elsewhere (AlterShareGroupOffsets on
an initialized partition: a new state epoch, everything in flight forgotten, as Kafka's
``initializeState`` is a fresh start); :func:`delete` forgets it (DeleteShareGroupOffsets,
DeleteGroups), after which the next initialization applies the reset strategy again.
"""

from __future__ import annotations

from collections.abc import Iterator
from uuid import UUID

from .partition import SharePartition
from .records import (
    ShareBatchKey,
    SharePartitionKey,
    ShareRecord,
    batch_tombstone,
    partition_record,
    partition_tombstone,
)

PartitionId = tuple[str, UUID, int]


class SharePartitions:
    """Every share partition of a shard; mutated only by :meth:`replay`."""

    def __init__(self) -> None:
        self._partitions: dict[PartitionId, SharePartition] = {}

    def get(self, group_id: str, topic_id: UUID, partition: int) -> SharePartition | None:
        return self._partitions.get((group_id, topic_id, partition))

    def of_group(self, group_id: str) -> Iterator[SharePartition]:
        return (p for (g, _, _), p in self._partitions.items() if g == group_id)

    def __len__(self) -> int:
        return len(self._partitions)

    def replay(self, record: ShareRecord) -> None:
        key = record.key
        ident = (key.group_id, key.topic_id, key.partition)
        if isinstance(key, SharePartitionKey) and record.value is None:
            self._partitions.pop(ident, None)
            return
        p = self._partitions.get(ident)
        if p is None:
            if isinstance(key, ShareBatchKey) and record.value is None:
                return  # a tombstone of a batch whose partition is gone already
            p = self._partitions[ident] = SharePartition(*ident)
        p.replay(record)

    def apply(self, records: list[ShareRecord]) -> list[ShareRecord]:
        """Replay ``records`` (the live path) and return them for the caller's log entry."""
        for record in records:
            self.replay(record)
        return records


def initialize(partitions: SharePartitions, group_id: str, topic_id: UUID, partition: int,
               start_offset: int) -> list[ShareRecord]:
    """Start a partition that has no state at ``start_offset``; nothing if it has state already."""
    existing = partitions.get(group_id, topic_id, partition)
    if existing is not None and existing.initialized:
        return []
    key = SharePartitionKey(group_id, topic_id, partition)
    return partitions.apply([partition_record(key, 0, start_offset, start_offset)])


def reset(partitions: SharePartitions, group_id: str, topic_id: UUID, partition: int,
          start_offset: int) -> list[ShareRecord]:
    """Start again at ``start_offset`` with a new state epoch, forgetting everything in flight."""
    p = partitions.get(group_id, topic_id, partition)
    if p is None or not p.initialized:
        return initialize(partitions, group_id, topic_id, partition, start_offset)
    records = [batch_tombstone(p.key, first) for first in p.batches]
    records.append(partition_record(p.key, p.state_epoch + 1, start_offset, start_offset))
    return partitions.apply(records)


def delete(partitions: SharePartitions, group_id: str, topic_id: UUID, partition: int) -> list[ShareRecord]:
    """Forget a partition's state (its batches, then the partition)."""
    p = partitions.get(group_id, topic_id, partition)
    if p is None:
        return []
    records = [batch_tombstone(p.key, first) for first in p.batches]
    records.append(partition_tombstone(p.key))
    return partitions.apply(records)
