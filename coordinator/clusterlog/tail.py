"""Every log partition read continuously, so loading one replays memory and reads only its tail
(issue 27, point 4: takeover without reading a partition from its start).

Theory of operation. The instance keeps a compacted copy of each partition: the last value of each
key (tombstones included), in the order of their last write, and the offset read up to; that is
what the topic holds once compacted, so replaying the copy gives the state replaying the partition
gives (the local log's compaction relies on the same). A background task reads every partition
`read_committed` from where its copy stopped every `interval_s`, owned or not: a partition loaded
again after its groups were rebuilt (the served set changed) is also replayed from memory. Loading
`catch_up(p)` reads the rest through the high watermark first (as `PartitionReader` does from 0),
under the partition's lock so the background read and the load never read one partition at once.
Memory: one copy of every partition's live keys per instance, beside the core's state.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable

from prometheus_client import Gauge

from ..logging import get_logger
from .batch import LogRecord
from .cluster import LogCluster, LogUnavailable
from .reader import PartitionReader

log = get_logger("coordinator.clusterlog.tail")

UNREACHABLE_LOG_INTERVAL_S = 30.0

TAILED_OFFSETS = Gauge("coordinator_log_tail_offsets",
                       "With the log upstream: offsets read so far, summed over every log partition's copy.")


class PartitionCopy:
    """One partition's committed records, compacted, and the offset read up to."""

    def __init__(self) -> None:
        self.records: dict[bytes, bytes | None] = {}
        self.position = 0

    def add(self, records: Iterable[LogRecord], next_offset: int) -> None:
        kept = self.records
        for record in records:
            if record.key is None:
                continue
            kept.pop(record.key, None)  # moves to the end: the order of last writes, as compaction keeps
            kept[record.key] = record.value
        self.position = max(self.position, next_offset)


class LogTail:
    def __init__(self, cluster: LogCluster, topic: str, partitions: int, interval_s: float) -> None:
        self.readers = [PartitionReader(cluster, topic, p) for p in range(partitions)]
        self.copies = [PartitionCopy() for _ in range(partitions)]
        self._locks = [asyncio.Lock() for _ in range(partitions)]
        self.interval_s = interval_s
        self._unreachable_logged = -UNREACHABLE_LOG_INTERVAL_S

    async def run(self) -> None:
        """Read every partition's new committed records, every `interval_s`, until cancelled."""
        while True:
            for partition in range(len(self.copies)):
                async with self._locks[partition]:
                    copy = self.copies[partition]
                    try:
                        result = await self.readers[partition].read(copy.position)
                    except LogUnavailable as exc:
                        now = time.monotonic()
                        if now - self._unreachable_logged >= UNREACHABLE_LOG_INTERVAL_S:
                            self._unreachable_logged = now
                            log.warning("log_tail_unavailable", partition=partition, error=str(exc))
                        continue
                    copy.add(result.records, result.next_offset)
            TAILED_OFFSETS.set(sum(copy.position for copy in self.copies))
            await asyncio.sleep(self.interval_s)

    async def catch_up(self, partition: int) -> tuple[list[tuple[bytes, bytes | None]], int]:
        """The partition's records to replay (the copy, read on through the high watermark), and
        how many of them had to be read now."""
        async with self._locks[partition]:
            copy = self.copies[partition]
            records, next_offset = await self.readers[partition].read_to_high_watermark(copy.position)
            copy.add(records, next_offset)
            return list(copy.records.items()), len(records)
