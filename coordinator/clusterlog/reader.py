"""A log partition read `read_committed`: committed entries in offset order, nothing of an aborted
transaction, control markers skipped.

The broker returns data only up to the last stable offset (LSO) and lists the aborted transactions
that overlap what it returns; filtering them out is the reader's job, as in Kafka's consumer
(`CompletedFetch`): a transactional batch of a producer whose aborted transaction has started at or
before it is skipped until that producer's ABORT marker. `read_to_end` reads until the LSO the
broker reports, which waits out open transactions (Kafka's coordinator loading, and Kafka
Connect's `readToEnd` after a write, rely on the same).
"""

from __future__ import annotations

import asyncio
import heapq
import time
from dataclasses import dataclass

from protocol.errors import ErrorCode

from .batch import ABORT, LogRecord, decode_batches
from .cluster import LogCluster, LogUnavailable

FETCH = 1
READ_COMMITTED = 1


@dataclass(frozen=True, slots=True)
class ReadResult:
    records: list[LogRecord]
    next_offset: int
    last_stable_offset: int
    high_watermark: int


class PartitionReader:
    def __init__(self, cluster: LogCluster, topic: str, partition: int, max_bytes: int = 4 << 20) -> None:
        self.cluster = cluster
        self.topic = topic
        self.partition = partition
        self.max_bytes = max_bytes

    async def read(self, offset: int, max_wait_ms: int = 0) -> ReadResult:
        """Committed records from `offset` on (possibly none), and where to read next."""
        response = await self.cluster.call_leader(self.topic, self.partition, FETCH, 12, {
            "replica_id": -1, "max_wait": max_wait_ms, "min_bytes": 1, "max_bytes": self.max_bytes,
            "isolation_level": READ_COMMITTED, "session_id": 0, "session_epoch": -1, "rack_id": "",
            "forgotten_topics_data": [],
            "topics": [{"topic": self.topic, "partitions": [{
                "partition": self.partition, "current_leader_epoch": -1, "fetch_offset": offset,
                "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": self.max_bytes}]}]})
        if response.error_code:
            raise LogUnavailable(f"Fetch {self.topic}-{self.partition}: {ErrorCode(int(response.error_code)).name}")
        data = response.responses[0].partitions[0]
        code = ErrorCode(int(data.error_code))
        if code != ErrorCode.NONE:
            if code == ErrorCode.NOT_LEADER_OR_FOLLOWER:
                self.cluster.forget_leader(self.topic, self.partition)
            raise LogUnavailable(f"Fetch {self.topic}-{self.partition} at {offset}: {code.name}")
        aborted = [(int(a.first_offset), int(a.producer_id)) for a in (data.aborted_transactions or ())]
        heapq.heapify(aborted)
        aborting: set[int] = set()
        records: list[LogRecord] = []
        next_offset = offset
        for batch in decode_batches(data.records or b""):
            while aborted and aborted[0][0] <= batch.last_offset:
                aborting.add(heapq.heappop(aborted)[1])
            next_offset = batch.last_offset + 1
            if batch.control_type is not None:
                if batch.control_type == ABORT:
                    aborting.discard(batch.producer_id)
                continue
            if batch.transactional and batch.producer_id in aborting:
                continue
            records.extend(r for r in batch.records if r.offset >= offset)
        return ReadResult(records, next_offset, int(data.last_stable_offset), int(data.high_watermark))

    async def read_to_end(self, offset: int = 0) -> tuple[list[LogRecord], int]:
        """Every committed record from `offset` up to the last stable offset; (records, next offset)."""
        out: list[LogRecord] = []
        while True:
            result = await self.read(offset)
            out.extend(result.records)
            if result.next_offset <= offset:  # nothing came back
                if offset >= result.last_stable_offset:
                    return out, offset
                raise LogUnavailable(f"{self.topic}-{self.partition}: no data at {offset} below the last "
                                     f"stable offset {result.last_stable_offset}")
            offset = result.next_offset
            if offset >= result.last_stable_offset:
                return out, offset

    async def read_to_high_watermark(self, offset: int = 0, timeout_s: float = 30.0) -> tuple[list[LogRecord], int]:
        """Every committed record from `offset` up to the high watermark seen by the first read:
        what a new owner must replay. The last stable offset can lag behind a transaction whose
        EndTxn has already answered (its markers follow), so stopping at the LSO could miss entries
        whose replies were sent; this waits for them (Kafka Connect's `readToEnd` waits the same
        way for the end offsets it asked for)."""
        out: list[LogRecord] = []
        result = await self.read(offset)
        end = result.high_watermark
        deadline = time.monotonic() + timeout_s
        while True:
            progressed = result.next_offset > offset
            out.extend(result.records)
            if progressed:
                offset = result.next_offset
            if offset >= end:
                return out, offset
            if not progressed:
                if time.monotonic() > deadline:
                    raise LogUnavailable(f"{self.topic}-{self.partition}: the last stable offset stayed at "
                                         f"{result.last_stable_offset} below {end} for {timeout_s:g}s")
                await asyncio.sleep(0.01)  # a transaction's markers are still being written
            result = await self.read(offset)
