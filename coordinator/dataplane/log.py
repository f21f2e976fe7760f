"""Partition logs (batches on disk, a bounded cache in memory) and the store that owns them.

A `PartitionLog` holds one partition's record batches in offset order, with Kafka's offsets:
`log_start_offset` (first retained offset), `high_watermark` (the durable end: what Fetch and
ListOffsets see and what Produce acknowledges) and `log_end_offset` (next offset to assign). There
is one replica and no transactions, so the last stable offset equals the high watermark. Batches
are only ever removed from the head, so the retained offsets are always the contiguous range
[log_start_offset, log_end_offset).

Storage: every batch is written to its partition's active segment file when it is appended
(`segments.py`); the flusher (`flusher.py`) fsyncs per `log.flush.policy` and then moves the high
watermark. Start-up (`PartitionStore.open`) recovers each partition directory: torn tails cut, the
log rebuilt from batch headers, producer state (`producers.py`) replayed from them, as Kafka does.
The log start offset is not checkpointed: after a restart it is the first batch on disk, and
retention, applied again at once, moves it where the same rules put it.

The `PartitionStore` creates logs lazily for catalog topics (keyed by topic id, so a topic deleted
and re-created under the same name starts empty), deletes their files when the catalog deletes the
topic, and applies, oldest batches first:
- `retention.bytes` (topic) / `log.retention.bytes` (broker), Kafka's rule at batch granularity: drop
  the head batch while the log would still hold at least `retention.bytes` without it;
- `retention.ms` / `log.retention.ms`: drop head batches whose max timestamp is older than now minus
  retention, checked for a log at most every `retention_check_interval_ms` when it is appended to,
  and for every log by `enforce_retention()` (Kafka checks every `log.retention.check.interval.ms`);
  retention only drops batches below the high watermark, and deletes a segment file once every
  batch in it is dropped (never the active segment: its name keeps the log end across restarts);
- memory: `dataplane.max.bytes` bounds the bytes one log keeps cached, `dataplane.total.max.bytes`
  all logs together (the globally oldest cached batch is evicted first: a FIFO of (log, batch) in
  append order, stale entries skipped and purged). Evicted batches are read back from disk.
  Batches recovered at start-up are not cached.

Long polling: a Fetch that must wait registers one future on every log it reads; the high watermark
moving (or the topic's deletion) resolves and forgets all futures of that log. Waiters re-check
their condition, so a wake-up is only a hint.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
import uuid
from bisect import bisect_right
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from coordinator.catalog.catalog import Topic, TopicCatalog, TopicChange
from coordinator.logging import get_logger
from coordinator.recordlog import FileSystem, FlushPolicy, MemoryFileSystem

from . import metrics
from .batch import BatchHeader, parse_header, record_timestamps, stamp
from .config import DataPlaneConfig
from .flusher import Flusher
from .producer_ids import ProducerIdAllocator
from .producers import ProducerStates
from .segments import PartitionFiles, Segment

log_line = get_logger("coordinator.dataplane")

LEADER_EPOCH = 0
"""The one leader epoch of every partition: written into stored batches, returned by ListOffsets,
checked against Fetch/ListOffsets `current_leader_epoch`. Metadata must report the same."""

NO_TIMESTAMP = -1
_SEQUENCE = itertools.count()


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class StoredBatch:
    """One batch as served, with the header fields the log needs kept unpacked.

    `data` is the batch's bytes while it is in the memory cache, None once evicted: `bytes()`
    then reads it back from its segment file."""

    __slots__ = (
        "base_offset", "data", "file_position", "last_offset", "max_timestamp", "position",
        "records_count", "segment", "size",
    )

    def __init__(
        self, data: bytes | None, base_offset: int, header: BatchHeader, position: int,
        segment: Segment | None = None, file_position: int = 0,
    ) -> None:
        self.data = data
        self.base_offset = base_offset
        self.last_offset = base_offset + header.last_offset_delta
        self.max_timestamp = header.max_timestamp
        self.records_count = header.records_count
        self.position = position
        """Bytes appended to the log before this batch (a virtual file position)."""
        self.size = header.size
        self.segment = segment
        self.file_position = file_position

    def bytes(self) -> bytes:
        if self.data is not None:
            return self.data
        assert self.segment is not None
        return self.segment.read(self.file_position, self.size)

    def header(self) -> BatchHeader:
        return parse_header(self.bytes())


@dataclass(frozen=True, slots=True)
class TopicSettings:
    """A topic's effective settings: its configs over the broker defaults."""

    max_message_bytes: int
    retention_bytes: int
    retention_ms: int
    log_append_time: bool
    segment_bytes: int

    @classmethod
    def of(cls, topic: Topic, config: DataPlaneConfig) -> TopicSettings:
        configs = topic.configs
        return cls(
            max_message_bytes=_int(configs.get("max.message.bytes"), config.message_max_bytes),
            retention_bytes=_int(configs.get("retention.bytes"), config.log_retention_bytes),
            retention_ms=_int(configs.get("retention.ms"), config.log_retention_ms),
            log_append_time=configs.get("message.timestamp.type", config.log_message_timestamp_type)
            == "LogAppendTime",
            segment_bytes=_int(configs.get("segment.bytes"), config.segment_bytes),
        )


def _int(value: str | None, default: int) -> int:
    if value is None:
        return default
    try:
        return int(value)
    except ValueError:
        return default


class PartitionLog:
    """One partition's batches. Mutated only through `PartitionStore`.

    Offsets: `log_start_offset` <= `high_watermark` <= `log_end_offset`. The log end offset is the
    next offset to assign; the high watermark (= last stable offset, no transactions) is the
    durable end: every batch below it is on disk per `log.flush.policy`. Fetch and ListOffsets see
    only batches below the high watermark, and Produce answers once its batch is below it, so what
    a crash can lose (the tail above it) was never acknowledged nor read.
    """

    def __init__(self, topic: str, topic_id: uuid.UUID, partition: int, files: PartitionFiles | None = None) -> None:
        self.topic = topic
        self.topic_id = topic_id
        self.partition = partition
        self.files = files
        self.log_start_offset = 0
        self.log_end_offset = 0
        self.durable_end = 0
        self.size_bytes = 0
        self.cached_bytes = 0
        self.deleted = False
        self.last_retention_check_ms = 0
        self.producers = ProducerStates()
        self._batches: list[StoredBatch] = []
        self._head = 0
        self._end_position = 0
        self._cached: deque[StoredBatch] = deque()
        """Batches whose bytes are in memory: always the newest ones, oldest first."""
        self._max_timestamp: tuple[int, int] | None = None
        """(timestamp, offset) of the largest timestamp retained; None = recompute."""
        self._waiters: set[asyncio.Future[None]] = set()
        self._durable_waiters: list[tuple[int, int, asyncio.Future[None]]] = []
        """A heap of (end offset, sequence, future): duplicates wait on earlier offsets."""
        self.on_durable: Callable[[PartitionLog], None] | None = None

    # -- reads -------------------------------------------------------------------------------
    @property
    def high_watermark(self) -> int:
        return self.durable_end

    @property
    def last_stable_offset(self) -> int:
        return self.durable_end

    def __len__(self) -> int:
        return len(self._batches) - self._head

    def batches(self) -> Iterator[StoredBatch]:
        """Retained batches below the high watermark, in offset order."""
        for i in range(self._head, len(self._batches)):
            batch = self._batches[i]
            if batch.base_offset >= self.durable_end:
                return
            yield batch

    def _index_of(self, offset: int) -> int:
        """Index of the first batch whose last offset is >= `offset` (len when none)."""
        i = bisect_right(self._batches, offset, lo=self._head, key=_base_offset) - 1
        if i < self._head:
            return self._head
        if self._batches[i].last_offset < offset:
            return i + 1
        return i

    def _visible_end(self) -> int:
        """Index just past the last batch below the high watermark."""
        return self._index_of(self.durable_end)

    def read(self, fetch_offset: int, max_bytes: int, min_one: bool) -> list[StoredBatch]:
        """Whole batches from the one holding `fetch_offset`, up to `max_bytes` in total; the first
        batch is returned even if larger when `min_one` (KIP-74)."""
        out: list[StoredBatch] = []
        total = 0
        for i in range(self._index_of(fetch_offset), self._visible_end()):
            batch = self._batches[i]
            if total + batch.size > max_bytes and not (min_one and not out):
                break
            out.append(batch)
            total += batch.size
        return out

    def bytes_from(self, fetch_offset: int) -> int:
        i = self._index_of(fetch_offset)
        end = self._visible_end()
        if i >= end:
            return 0
        end_position = self._batches[end].position if end < len(self._batches) else self._end_position
        return end_position - self._batches[i].position

    def offset_for_timestamp(self, target: int) -> tuple[int, int] | None:
        """(timestamp, offset) of the first record whose timestamp is >= `target`, Kafka's rule:
        the first batch whose max timestamp is >= target, then the first such record in it. For a
        batch whose codec cannot be read here, its base offset and max timestamp stand in (an
        offset never later than the exact answer)."""
        for batch in self.batches():
            if batch.max_timestamp < target:
                continue
            data = batch.bytes()
            records = record_timestamps(data, parse_header(data))
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
        if self._max_timestamp is None or self._max_timestamp[1] >= self.durable_end:
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
        if self.deleted:
            durable, self._durable_waiters = self._durable_waiters, []
            for _, _, future in durable:
                if not future.done():
                    future.set_result(None)

    def wait_durable(self, end_offset: int) -> asyncio.Future[None] | None:
        """A future resolved once every offset below `end_offset` is durable (None: it is)."""
        if end_offset <= self.durable_end or self.deleted:
            return None
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._durable_waiters, (end_offset, next(_SEQUENCE), future))
        return future

    def mark_durable(self, end_offset: int) -> None:
        """The flusher made every offset below `end_offset` durable: the high watermark moves."""
        if end_offset <= self.durable_end:
            return
        self.durable_end = end_offset
        waiters = self._durable_waiters
        while waiters and waiters[0][0] <= end_offset:
            _, _, future = heapq.heappop(waiters)
            if not future.done():
                future.set_result(None)
        self.wake()
        if self.on_durable is not None:
            self.on_durable(self)

    # -- mutations (PartitionStore only) -----------------------------------------------------
    def _add(self, batch: StoredBatch, cached: bool) -> None:
        self._batches.append(batch)
        self._end_position += batch.size
        self.size_bytes += batch.size
        self.log_end_offset = batch.last_offset + 1
        if cached:
            self._cached.append(batch)
            self.cached_bytes += batch.size
        if self._max_timestamp is not None and batch.max_timestamp > self._max_timestamp[0]:
            self._max_timestamp = None

    def _evict_oldest_cached(self) -> StoredBatch | None:
        if not self._cached:
            return None
        batch = self._cached.popleft()
        batch.data = None
        self.cached_bytes -= batch.size
        return batch

    def _head_batch(self) -> StoredBatch | None:
        return self._batches[self._head] if self._head < len(self._batches) else None

    def _drop_head(self) -> StoredBatch:
        batch = self._batches[self._head]
        self._batches[self._head] = _DROPPED
        self._head += 1
        self.size_bytes -= batch.size
        if self._cached and self._cached[0] is batch:
            self._cached.popleft()
            self.cached_bytes -= batch.size
            batch.data = None
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
    data = batch.bytes()
    records = record_timestamps(data, parse_header(data))
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
    """-1 unless the topic uses LogAppendTime (and for duplicates)."""
    log_start_offset: int
    end_offset: int
    """The batch is acknowledged once the partition's high watermark reaches this offset."""
    duplicate: bool = False


class PartitionStore:
    """Every partition log of the catalog's topics: batches on disk, bounded bytes in memory."""

    def __init__(
        self,
        catalog: TopicCatalog,
        config: DataPlaneConfig | None = None,
        *,
        clock_ms: Callable[[], int] = wall_clock_ms,
        retention_check_interval_ms: int = 300000,
        fs: FileSystem | None = None,
        directory: str = "/partitions",
        flush_policy: FlushPolicy = FlushPolicy.NONE,
        flush_interval_ms: int = 10,
        on_fatal: Callable[[BaseException], None] | None = None,
        remove_dir: Callable[[str], None] | None = None,
    ) -> None:
        """`fs`/`directory`: where partition directories live (default: a `MemoryFileSystem`, for
        tests); `remove_dir` deletes an emptied partition directory (the protocol has no rmdir)."""
        self.catalog = catalog
        self.config = config or DataPlaneConfig()
        self.clock_ms = clock_ms
        self.retention_check_interval_ms = retention_check_interval_ms
        self.fs: FileSystem = fs if fs is not None else MemoryFileSystem()
        self.directory = directory
        self.flusher = Flusher(flush_policy, flush_interval_ms, on_fatal or _raise)
        self._remove_dir = remove_dir
        self.total_bytes = 0
        """Bytes retained (on disk) by every log."""
        self.cached_bytes = 0
        """Bytes of batches held in memory by every log."""
        self.recovered_truncated_bytes = 0
        self._logs: dict[uuid.UUID, dict[int, PartitionLog]] = {}
        self._cache_fifo: deque[tuple[PartitionLog, StoredBatch]] = deque()
        self._fifo_compact_at = 4096
        self._topic_metrics: dict[str, tuple[Any, Any, Any]] = {}
        self._opened = fs is None
        self.producer_ids: ProducerIdAllocator | None = None
        """Set by `open()`: InitProducerId is served only by the directory's owner."""
        if fs is None:
            self.fs.make_dirs(directory)
            self.producer_ids = ProducerIdAllocator(self.fs, directory)
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

    # -- lifecycle ---------------------------------------------------------------------------
    def open(self) -> None:
        """Recover every partition directory of a catalog topic (torn tails cut, producer state
        rebuilt, retention applied); delete directories of topics that no longer exist. Call
        once, holding the data directory, before serving."""
        self.fs.make_dirs(self.directory)
        self._opened = True
        self.producer_ids = ProducerIdAllocator(self.fs, self.directory)
        for name in sorted(self.fs.list_dir(self.directory)):
            parsed = _parse_dir_name(name)
            path = f"{self.directory}/{name}"
            if parsed is None:
                continue
            topic_id, partition = parsed
            topic = self.catalog.by_id(topic_id)
            if topic is None or partition >= topic.num_partitions:
                files, _ = PartitionFiles.recover(self.fs, path, sync=False)
                files.remove_all(self._remove_dir)
                continue
            self._recover(topic, partition, path)
        self.enforce_retention()

    def _recover(self, topic: Topic, partition: int, path: str) -> None:
        files, recovery = PartitionFiles.recover(self.fs, path, sync=not self.flusher.immediate)
        if recovery.truncated_bytes:
            self.recovered_truncated_bytes += recovery.truncated_bytes
            metrics.TRUNCATED_BYTES.inc(recovery.truncated_bytes)
            log_line.warning(
                "partition_tail_truncated", topic=topic.name, partition=partition,
                bytes_dropped=recovery.truncated_bytes, log_end_offset=recovery.next_offset,
            )
        log = PartitionLog(topic.name, topic.topic_id, partition, files)
        log.on_durable = self._after_durable
        position = 0
        for recovered in recovery.batches:
            header = recovered.header
            batch = StoredBatch(None, header.base_offset, header, position, recovered.segment, recovered.position)
            position += batch.size
            log._add(batch, cached=False)
            log.producers.update(header, header.base_offset, header.max_timestamp)
        first = files.segments[0].base
        log.log_start_offset = recovery.batches[0].header.base_offset if recovery.batches else first
        log.log_end_offset = log.durable_end = recovery.next_offset
        log.last_retention_check_ms = self.clock_ms()
        self._logs.setdefault(topic.topic_id, {})[partition] = log
        self.total_bytes += log.size_bytes
        self._metrics(topic.name)[2].inc(log.size_bytes)

    def start(self) -> None:
        """Start the flusher (from the event loop)."""
        self.flusher.start()

    async def close(self) -> None:
        """Make everything written durable, then close every file."""
        await self.flusher.close()
        for log in self.logs():
            if log.files is not None:
                log.files.close()

    # -- lookup ------------------------------------------------------------------------------
    def log(self, topic: Topic, partition: int) -> PartitionLog:
        """The log of a catalog topic's partition (0 <= partition < num_partitions), created empty
        on first use."""
        logs = self._logs.get(topic.topic_id)
        if logs is None:
            logs = self._logs[topic.topic_id] = {}
        log = logs.get(partition)
        if log is None:
            if not self._opened:
                raise RuntimeError("PartitionStore.open() has not run")
            # Files are created by the first append: reads of empty partitions (Fetch, ListOffsets
            # across many partitions) cost no directory and no file descriptor.
            log = logs[partition] = PartitionLog(topic.name, topic.topic_id, partition)
            log.on_durable = self._after_durable
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
        """Append one validated batch (see `batch.validate_produce`): producer checks, offsets,
        the write to the active segment, the memory bounds. Raises `ProducerError`. The batch is
        acknowledged (and visible to Fetch) once the high watermark reaches `end_offset`."""
        settings = settings or TopicSettings.of(topic, self.config)
        log = self.log(topic, partition)
        original = log.producers.check(header)
        if original is not None:
            metrics.PRODUCE_DUPLICATES.inc()
            return AppendResult(original.first_offset, -1, log.log_start_offset, original.last_offset + 1, True)
        now = self.clock_ms()
        append_time = now if settings.log_append_time else None
        data = stamp(batch, log.log_end_offset, LEADER_EPOCH, append_time)
        header = parse_header(data)  # as stored: base offset, epoch (and LogAppendTime) stamped
        base_offset = log.log_end_offset
        end_offset = base_offset + header.last_offset_delta + 1
        files = log.files
        if files is None:
            files = log.files = PartitionFiles.create(
                self.fs, self.directory, f"{topic.topic_id}-{partition}", base_offset, sync=not self.flusher.immediate
            )
        segment, file_position = files.append(data, base_offset, end_offset, settings.segment_bytes)
        stored = StoredBatch(data, base_offset, header, log._end_position, segment, file_position)
        log._add(stored, cached=True)
        log.producers.update(header, base_offset, header.max_timestamp)
        self.total_bytes += stored.size
        self.cached_bytes += stored.size
        self._cache_fifo.append((log, stored))
        bytes_in, messages_in, log_bytes = self._metrics(topic.name)
        bytes_in.inc(stored.size)
        messages_in.inc(stored.records_count)
        log_bytes.inc(stored.size)
        if self.flusher.immediate:
            log.mark_durable(end_offset)
        else:
            self.flusher.dirty(log)
        self._enforce_size(log, settings)
        if now - log.last_retention_check_ms >= self.retention_check_interval_ms:
            self._enforce_time(log, settings.retention_ms, now)
        self._bound_cache(log)
        return AppendResult(
            base_offset, append_time if append_time is not None else -1, log.log_start_offset, end_offset
        )

    # -- memory ------------------------------------------------------------------------------
    def _bound_cache(self, log: PartitionLog) -> None:
        """Evict cached bytes (they stay on disk) down to the partition and total caps."""
        while log.cached_bytes > self.config.partition_max_bytes:
            evicted = log._evict_oldest_cached()
            assert evicted is not None
            self.cached_bytes -= evicted.size
        fifo = self._cache_fifo
        while self.cached_bytes > self.config.total_max_bytes and fifo:
            owner, batch = fifo.popleft()
            if batch.data is None:
                continue  # already evicted or dropped
            evicted = owner._evict_oldest_cached()
            assert evicted is batch
            self.cached_bytes -= batch.size
        while fifo and fifo[0][1].data is None:
            fifo.popleft()
        metrics.CACHE_BYTES.set(self.cached_bytes)
        if len(fifo) >= self._fifo_compact_at:
            # Entries of batches evicted by a partition cap or dropped by retention linger until
            # they reach the front; purge them when they could outnumber the live ones.
            self._cache_fifo = deque((o, b) for o, b in fifo if b.data is not None)
            self._fifo_compact_at = max(4096, 2 * len(self._cache_fifo))

    # -- retention ---------------------------------------------------------------------------
    def enforce_retention(self) -> int:
        """Apply time retention to every log now (and size retention, and producer expiry);
        returns the bytes dropped. The runtime calls this every `log.retention.check.interval.ms`;
        appends also check their own log lazily."""
        now = self.clock_ms()
        dropped = 0
        for log in self.logs():
            topic = self.catalog.by_id(log.topic_id)
            if topic is None:
                continue
            settings = TopicSettings.of(topic, self.config)
            dropped += self._enforce_size(log, settings)
            dropped += self._enforce_time(log, settings.retention_ms, now)
            log.producers.expire(now)
        return dropped

    def _after_durable(self, log: PartitionLog) -> None:
        """Size retention holds back batches above the high watermark; apply it once they pass."""
        if self.flusher.immediate:
            return  # durable within append(), which applies size retention itself
        topic = self.catalog.by_id(log.topic_id)
        if topic is not None and not log.deleted:
            self._enforce_size(log, TopicSettings.of(topic, self.config))

    def _enforce_time(self, log: PartitionLog, retention_ms: int, now: int) -> int:
        log.last_retention_check_ms = now
        if retention_ms < 0:
            return 0
        dropped = 0
        head = log._head_batch()
        while head is not None and head.last_offset < log.durable_end and now - head.max_timestamp > retention_ms:
            dropped += self._drop(log, "retention_ms")
            head = log._head_batch()
        self._delete_segments(log)
        return dropped

    def _enforce_size(self, log: PartitionLog, settings: TopicSettings) -> int:
        dropped = 0
        if settings.retention_bytes >= 0:
            head = log._head_batch()
            while (
                head is not None and head.last_offset < log.durable_end
                and log.size_bytes - head.size >= settings.retention_bytes
            ):
                dropped += self._drop(log, "retention_bytes")
                head = log._head_batch()
            self._delete_segments(log)
        return dropped

    def _delete_segments(self, log: PartitionLog) -> None:
        if log.files is not None and not log.deleted:
            log.files.delete_below(log.log_start_offset)

    def _drop(self, log: PartitionLog, reason: str) -> int:
        cached = log._cached and log._cached[0] is log._head_batch()
        batch = log._drop_head()
        self.total_bytes -= batch.size
        if cached:
            self.cached_bytes -= batch.size
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
            self.cached_bytes -= log.cached_bytes
            for batch in log._cached:
                batch.data = None
            log._cached.clear()
            log.cached_bytes = 0
            if log.files is not None:
                log.files.remove_all(self._remove_dir)
            log.wake()
        self.total_bytes -= freed
        metrics.CACHE_BYTES.set(self.cached_bytes)
        metrics.LOG_DELETED_BYTES.labels("topic_deleted").inc(freed)
        self._topic_metrics.pop(topic.name, None)
        metrics.forget_topic(topic.name)


def _raise(exc: BaseException) -> None:
    raise exc


def _parse_dir_name(name: str) -> tuple[uuid.UUID, int] | None:
    topic_id, sep, partition = name.rpartition("-")
    if not sep or not partition.isdigit():
        return None
    try:
        return uuid.UUID(topic_id), int(partition)
    except ValueError:
        return None
