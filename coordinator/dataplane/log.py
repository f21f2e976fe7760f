"""In-memory partition logs and the store that owns them.

A `PartitionLog` holds one partition's record batches as bytes, in offset order, with Kafka's
offsets: `log_start_offset` (first retained offset), `log_end_offset` (next offset to assign). There
is one replica and no transactions, so the high watermark and the last stable offset both equal the
log end offset. Batches are only ever removed from the head, so the retained offsets are always the
contiguous range [log_start_offset, log_end_offset).

The `PartitionStore` creates logs lazily for catalog topics (keyed by topic id, so a topic deleted
and re-created under the same name starts empty), drops them when the catalog deletes the topic, and
bounds memory four ways, oldest batches first:
- `retention.bytes` (topic) / `log.retention.bytes` (broker), Kafka's rule at batch granularity: drop
  the head batch while the log would still hold at least `retention.bytes` without it;
- `retention.ms` / `log.retention.ms`: drop head batches whose max timestamp is older than now minus
  retention, checked for a log at most every `retention_check_interval_ms` when it is appended to,
  and for every log by `enforce_retention()` (Kafka checks every `log.retention.check.interval.ms`);
- `dataplane.max.bytes`: the log never holds more than this many bytes;
- `dataplane.total.max.bytes`: all logs together never hold more; the globally oldest batch goes
  first (a FIFO of (log, base offset) in append order; entries whose batch is already gone are
  skipped and purged when they outnumber the live ones).

Long polling: a Fetch that must wait registers one future on every log it reads; an append (or the
topic's deletion) resolves and forgets all futures of that log. Waiters re-check their condition,
so a wake-up is only a hint.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from bisect import bisect_right
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from coordinator.catalog.catalog import Topic, TopicCatalog, TopicChange

from . import metrics
from .batch import BatchHeader, parse_header, record_timestamps, stamp
from .config import DataPlaneConfig

LEADER_EPOCH = 0
"""The one leader epoch of every partition: written into stored batches, returned by ListOffsets,
checked against Fetch/ListOffsets `current_leader_epoch`. Metadata must report the same."""

NO_TIMESTAMP = -1


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class StoredBatch:
    """One batch as served, with the header fields the log needs kept unpacked."""

    __slots__ = ("base_offset", "data", "last_offset", "max_timestamp", "position", "records_count", "size")

    def __init__(self, data: bytes, base_offset: int, header: BatchHeader, position: int) -> None:
        self.data = data
        self.base_offset = base_offset
        self.last_offset = base_offset + header.last_offset_delta
        self.max_timestamp = header.max_timestamp
        self.records_count = header.records_count
        self.position = position
        """Bytes appended to the log before this batch (a virtual file position)."""
        self.size = len(data)

    def header(self) -> BatchHeader:
        return parse_header(self.data)


@dataclass(frozen=True, slots=True)
class TopicSettings:
    """A topic's effective settings: its configs over the broker defaults."""

    max_message_bytes: int
    retention_bytes: int
    retention_ms: int
    log_append_time: bool

    @classmethod
    def of(cls, topic: Topic, config: DataPlaneConfig) -> TopicSettings:
        configs = topic.configs
        return cls(
            max_message_bytes=_int(configs.get("max.message.bytes"), config.message_max_bytes),
            retention_bytes=_int(configs.get("retention.bytes"), config.log_retention_bytes),
            retention_ms=_int(configs.get("retention.ms"), config.log_retention_ms),
            log_append_time=configs.get("message.timestamp.type", config.log_message_timestamp_type)
            == "LogAppendTime",
        )


def _int(value: str | None, default: int) -> int:
    if value is None:
        return default
    try:
        return int(value)
    except ValueError:
        return default


class PartitionLog:
    """One partition's batches. Mutated only through `PartitionStore`."""

    def __init__(self, topic: str, topic_id: uuid.UUID, partition: int) -> None:
        self.topic = topic
        self.topic_id = topic_id
        self.partition = partition
        self.log_start_offset = 0
        self.log_end_offset = 0
        self.size_bytes = 0
        self.deleted = False
        self.last_retention_check_ms = 0
        self._batches: list[StoredBatch] = []
        self._head = 0
        self._end_position = 0
        self._max_timestamp: tuple[int, int] | None = None
        """(timestamp, offset) of the largest timestamp retained; None = recompute."""
        self._waiters: set[asyncio.Future[None]] = set()

    # -- reads -------------------------------------------------------------------------------
    @property
    def high_watermark(self) -> int:
        return self.log_end_offset

    @property
    def last_stable_offset(self) -> int:
        return self.log_end_offset

    def __len__(self) -> int:
        return len(self._batches) - self._head

    def batches(self) -> Iterator[StoredBatch]:
        for i in range(self._head, len(self._batches)):
            yield self._batches[i]

    def _index_of(self, offset: int) -> int:
        """Index of the first batch whose last offset is >= `offset` (len when none)."""
        i = bisect_right(self._batches, offset, lo=self._head, key=_base_offset) - 1
        if i < self._head:
            return self._head
        if self._batches[i].last_offset < offset:
            return i + 1
        return i

    def read(self, fetch_offset: int, max_bytes: int, min_one: bool) -> list[StoredBatch]:
        """Whole batches from the one holding `fetch_offset`, up to `max_bytes` in total; the first
        batch is returned even if larger when `min_one` (KIP-74)."""
        out: list[StoredBatch] = []
        total = 0
        for i in range(self._index_of(fetch_offset), len(self._batches)):
            batch = self._batches[i]
            if total + batch.size > max_bytes and not (min_one and not out):
                break
            out.append(batch)
            total += batch.size
        return out

    def bytes_from(self, fetch_offset: int) -> int:
        i = self._index_of(fetch_offset)
        if i >= len(self._batches):
            return 0
        return self._end_position - self._batches[i].position

    def offset_for_timestamp(self, target: int) -> tuple[int, int] | None:
        """(timestamp, offset) of the first record whose timestamp is >= `target`, Kafka's rule:
        the first batch whose max timestamp is >= target, then the first such record in it. For a
        batch whose codec cannot be read here, its base offset and max timestamp stand in (an
        offset never later than the exact answer)."""
        for batch in self.batches():
            if batch.max_timestamp < target:
                continue
            header = batch.header()
            records = record_timestamps(batch.data, header)
            if records is None:
                return batch.max_timestamp, batch.base_offset
            for timestamp, offset in records:
                if timestamp >= target:
                    return timestamp, offset
            return batch.max_timestamp, batch.base_offset
        return None

    def max_timestamp(self) -> tuple[int, int] | None:
        """(timestamp, offset) of the record with the largest timestamp (the first such), or None
        for an empty log. Undecodable batches answer with their last offset, as Kafka did before
        KAFKA-16310."""
        if self._max_timestamp is None:
            best: StoredBatch | None = None
            for batch in self.batches():
                if best is None or batch.max_timestamp > best.max_timestamp:
                    best = batch
            if best is None:
                return None
            self._max_timestamp = (best.max_timestamp, _offset_of_max_timestamp(best))
        return self._max_timestamp

    # -- waiters -----------------------------------------------------------------------------
    def add_waiter(self, waiter: asyncio.Future[None]) -> None:
        self._waiters.add(waiter)

    def discard_waiter(self, waiter: asyncio.Future[None]) -> None:
        self._waiters.discard(waiter)

    def wake(self) -> None:
        waiters, self._waiters = self._waiters, set()
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    # -- mutations (PartitionStore only) -----------------------------------------------------
    def _append(self, data: bytes, header: BatchHeader) -> StoredBatch:
        batch = StoredBatch(data, self.log_end_offset, header, self._end_position)
        self._batches.append(batch)
        self._end_position += batch.size
        self.size_bytes += batch.size
        self.log_end_offset = batch.last_offset + 1
        if self._max_timestamp is not None and batch.max_timestamp > self._max_timestamp[0]:
            self._max_timestamp = (batch.max_timestamp, _offset_of_max_timestamp(batch))
        self.wake()
        return batch

    def _head_batch(self) -> StoredBatch | None:
        return self._batches[self._head] if self._head < len(self._batches) else None

    def _drop_head(self) -> StoredBatch:
        batch = self._batches[self._head]
        self._batches[self._head] = _DROPPED
        self._head += 1
        self.size_bytes -= batch.size
        nxt = self._head_batch()
        self.log_start_offset = nxt.base_offset if nxt is not None else self.log_end_offset
        if self._max_timestamp is not None and self._max_timestamp[1] <= batch.last_offset:
            self._max_timestamp = None
        if self._head >= 1024 and self._head * 2 >= len(self._batches):
            del self._batches[: self._head]
            self._head = 0
        return batch


def _base_offset(batch: StoredBatch) -> int:
    return batch.base_offset


def _offset_of_max_timestamp(batch: StoredBatch) -> int:
    records = record_timestamps(batch.data, batch.header())
    if records is None:
        return batch.last_offset
    for timestamp, offset in records:
        if timestamp == batch.max_timestamp:
            return offset
    return batch.last_offset


_DROPPED = StoredBatch(b"", -1, parse_header(bytes(61)), 0)
"""Placeholder left in a dropped slot until the list is compacted (releases the bytes at once)."""


@dataclass(frozen=True, slots=True)
class AppendResult:
    base_offset: int
    log_append_time_ms: int
    """-1 unless the topic uses LogAppendTime."""
    log_start_offset: int


class PartitionStore:
    """Every partition log of the catalog's topics, under shared memory bounds."""

    def __init__(
        self,
        catalog: TopicCatalog,
        config: DataPlaneConfig | None = None,
        *,
        clock_ms: Callable[[], int] = wall_clock_ms,
        retention_check_interval_ms: int = 300000,
    ) -> None:
        self.catalog = catalog
        self.config = config or DataPlaneConfig()
        self.clock_ms = clock_ms
        self.retention_check_interval_ms = retention_check_interval_ms
        self.total_bytes = 0
        self._logs: dict[uuid.UUID, dict[int, PartitionLog]] = {}
        self._fifo: deque[tuple[PartitionLog, int]] = deque()
        self._live_batches = 0
        self._topic_metrics: dict[str, tuple[Any, Any, Any]] = {}
        catalog.add_listener(self._on_topic_change)

    def _metrics(self, topic: str) -> tuple[Any, Any, Any]:
        """The topic's (bytes in, messages in, log bytes) children, looked up once per topic."""
        children = self._topic_metrics.get(topic)
        if children is None:
            children = self._topic_metrics[topic] = (
                metrics.BYTES_IN.labels(topic),
                metrics.MESSAGES_IN.labels(topic),
                metrics.LOG_BYTES.labels(topic),
            )
        return children

    # -- lookup ------------------------------------------------------------------------------
    def log(self, topic: Topic, partition: int) -> PartitionLog:
        """The log of a catalog topic's partition (0 <= partition < num_partitions), created empty
        on first use."""
        logs = self._logs.get(topic.topic_id)
        if logs is None:
            logs = self._logs[topic.topic_id] = {}
        log = logs.get(partition)
        if log is None:
            log = logs[partition] = PartitionLog(topic.name, topic.topic_id, partition)
            log.last_retention_check_ms = self.clock_ms()
        return log

    def peek(self, topic_id: uuid.UUID, partition: int) -> PartitionLog | None:
        logs = self._logs.get(topic_id)
        return logs.get(partition) if logs is not None else None

    def logs(self) -> Iterator[PartitionLog]:
        for logs in list(self._logs.values()):
            yield from list(logs.values())

    # -- append ------------------------------------------------------------------------------
    def append(
        self, topic: Topic, partition: int, batch: bytes, header: BatchHeader,
        settings: TopicSettings | None = None,
    ) -> AppendResult:
        """Append one validated batch (see `batch.validate_produce`) and apply the size bounds."""
        settings = settings or TopicSettings.of(topic, self.config)
        log = self.log(topic, partition)
        now = self.clock_ms()
        append_time = now if settings.log_append_time else None
        data = stamp(batch, log.log_end_offset, LEADER_EPOCH, append_time)
        if append_time is not None:
            header = parse_header(data)
        stored = log._append(data, header)
        self.total_bytes += stored.size
        self._live_batches += 1
        self._fifo.append((log, stored.base_offset))
        bytes_in, messages_in, log_bytes = self._metrics(topic.name)
        bytes_in.inc(stored.size)
        messages_in.inc(stored.records_count)
        log_bytes.inc(stored.size)
        self._enforce_size(log, settings)
        if now - log.last_retention_check_ms >= self.retention_check_interval_ms:
            self._enforce_time(log, settings.retention_ms, now)
        self._enforce_total()
        return AppendResult(
            stored.base_offset, append_time if append_time is not None else -1, log.log_start_offset
        )

    # -- retention ---------------------------------------------------------------------------
    def enforce_retention(self) -> int:
        """Apply time retention to every log now; returns the bytes dropped. The runtime may call
        this every `log.retention.check.interval.ms`; appends also check their own log lazily."""
        now = self.clock_ms()
        dropped = 0
        for log in self.logs():
            topic = self.catalog.by_id(log.topic_id)
            if topic is None:
                continue
            dropped += self._enforce_time(log, TopicSettings.of(topic, self.config).retention_ms, now)
        return dropped

    def _enforce_time(self, log: PartitionLog, retention_ms: int, now: int) -> int:
        log.last_retention_check_ms = now
        if retention_ms < 0:
            return 0
        dropped = 0
        head = log._head_batch()
        while head is not None and now - head.max_timestamp > retention_ms:
            dropped += self._drop(log, "retention_ms")
            head = log._head_batch()
        return dropped

    def _enforce_size(self, log: PartitionLog, settings: TopicSettings) -> None:
        head = log._head_batch()
        if settings.retention_bytes >= 0:
            while head is not None and log.size_bytes - head.size >= settings.retention_bytes:
                self._drop(log, "retention_bytes")
                head = log._head_batch()
        while head is not None and log.size_bytes > self.config.partition_max_bytes:
            self._drop(log, "partition_cap")
            head = log._head_batch()

    def _enforce_total(self) -> None:
        while self.total_bytes > self.config.total_max_bytes and self._fifo:
            log, base_offset = self._fifo.popleft()
            if log.deleted or base_offset < log.log_start_offset:
                continue  # already dropped by the log's own retention
            head = log._head_batch()
            assert head is not None and head.base_offset == base_offset
            self._drop(log, "total_cap")
        if len(self._fifo) > 2 * self._live_batches + 1024:
            self._fifo = deque(
                (log, base) for log, base in self._fifo
                if not log.deleted and base >= log.log_start_offset
            )

    def _drop(self, log: PartitionLog, reason: str) -> int:
        batch = log._drop_head()
        self.total_bytes -= batch.size
        self._live_batches -= 1
        self._metrics(log.topic)[2].dec(batch.size)
        metrics.LOG_DELETED_BYTES.labels(reason).inc(batch.size)
        return batch.size

    # -- catalog -----------------------------------------------------------------------------
    def _on_topic_change(self, change: TopicChange) -> None:
        if change.after is not None or change.before is None:
            return
        topic = change.before
        logs = self._logs.pop(topic.topic_id, None)
        if logs is None:
            return
        freed = 0
        for log in logs.values():
            log.deleted = True
            freed += log.size_bytes
            self._live_batches -= len(log)
            log.wake()
        self.total_bytes -= freed
        metrics.LOG_DELETED_BYTES.labels("topic_deleted").inc(freed)
        self._topic_metrics.pop(topic.name, None)
        metrics.forget_topic(topic.name)
