"""The partition store: every partition log of the catalog's topics, on disk, with retention,
the memory cache's bounds, recovery at start-up and idempotent producer checks on append.

A `PartitionLog` (`partition.py`) is one partition's offsets, batch index and cache. Every batch is
written to its partition's active segment file when it is appended (`segments.py`); the flusher
(`flusher.py`) fsyncs per `log.flush.policy` and then moves the high watermark. Start-up
(`PartitionStore.open`) recovers each partition directory: torn tails cut, the index rebuilt from
batch headers, producer state (`producers.py`) replayed from them, as Kafka does. The log start
offset is not checkpointed: after a restart it is the first batch on disk, and retention, applied
again at once, moves it where the same rules put it.

The store creates logs lazily for catalog topics (keyed by topic id, so a topic deleted and
re-created under the same name starts empty; files only from the first append), deletes their files
when the catalog deletes the topic, and applies, oldest batches first:
- `retention.bytes` (topic) / `log.retention.bytes` (broker), Kafka's rule at batch granularity: drop
  the head batch while the log would still hold at least `retention.bytes` without it;
- `retention.ms` / `log.retention.ms`: drop head batches whose max timestamp is older than now minus
  retention, checked for a log at most every `retention_check_interval_ms` when it is appended to,
  and for every log by `enforce_retention()` (Kafka checks every `log.retention.check.interval.ms`);
  retention only drops batches below the high watermark, and deletes a segment file once every
  batch in it is dropped (never the active segment: its name keeps the log end across restarts);
- memory: `dataplane.max.bytes` bounds the bytes one log keeps cached, `dataplane.total.max.bytes`
  all logs together (the globally oldest cached batch is evicted first: a FIFO of (log, base offset)
  in append order, stale entries skipped and purged). Evicted batches are read back from disk.
  Batches recovered at start-up are not cached.
"""

from __future__ import annotations

import functools
import os
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from coordinator.catalog.catalog import Topic, TopicCatalog, TopicChange
from coordinator.logging import get_logger
from coordinator.recordlog import FileSystem, FlushPolicy, MemoryFileSystem, WriteRefused

from . import metrics
from .batch import BatchHeader, parse_header, stamp
from .config import DataPlaneConfig
from .flusher import Flusher
from .partition import PartitionLog
from .producer_ids import ProducerIdAllocator
from .segments import PartitionFiles

log_line = get_logger("coordinator.dataplane")

LEADER_EPOCH = 0
"""The one leader epoch of every partition: written into stored batches, returned by ListOffsets,
checked against Fetch/ListOffsets `current_leader_epoch`. Metadata must report the same."""

NO_TIMESTAMP = -1


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


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
        self._cache_fifo: deque[tuple[PartitionLog, int]] = deque()
        """(log, base offset) of cached batches in append order: the globally oldest first."""
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
        if not self.flusher.immediate:
            self.fs.fsync_dir(os.path.dirname(self.directory))  # the partitions directory's own entry
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
        for recovered in recovery.batches:
            header = recovered.header
            log._add(header.base_offset, header, header.size, recovered.segment, recovered.position, None)
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
        the write to the active segment, the memory bounds. Raises `ProducerError`, or
        `WriteRefused` when the disk refuses the write (nothing changed: Produce answers
        KAFKA_STORAGE_ERROR and the producer retries). The batch is
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
        if append_time is not None:
            header = parse_header(data)  # LogAppendTime rewrote the max timestamp
        base_offset = log.log_end_offset
        end_offset = base_offset + header.last_offset_delta + 1
        files = log.files
        if files is None:
            try:
                files = PartitionFiles.create(
                    self.fs, self.directory, f"{topic.topic_id}-{partition}", base_offset,
                    sync=not self.flusher.immediate,
                )
            except OSError as exc:  # nothing was written: refuse as a failed write is refused
                raise WriteRefused(f"{topic.name}-{partition}: cannot create its files: {exc}", base_offset) from exc
            log.files = files
        # Raises WriteRefused (undone, nothing changed) when the disk refuses the write.
        segment, file_position = files.append(data, base_offset, end_offset, settings.segment_bytes)
        size = len(data)
        log._add(base_offset, header, size, segment, file_position, data)
        log.producers.update(header, base_offset, header.max_timestamp)
        self.total_bytes += size
        self.cached_bytes += size
        self._cache_fifo.append((log, base_offset))
        bytes_in, messages_in, log_bytes = self._metrics(topic.name)
        bytes_in.inc(size)
        messages_in.inc(header.records_count)
        log_bytes.inc(size)
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
            self.cached_bytes -= log._evict_oldest_cached()
        fifo = self._cache_fifo
        while self.cached_bytes > self.config.total_max_bytes and fifo:
            owner, base_offset = fifo.popleft()
            if not owner.deleted and owner._oldest_cached_offset() == base_offset:
                self.cached_bytes -= owner._evict_oldest_cached()
            # else: already evicted by its partition's cap, or dropped by retention
        metrics.CACHE_BYTES.set(self.cached_bytes)
        if len(fifo) >= self._fifo_compact_at:
            # Entries of batches evicted by a partition cap or dropped by retention linger until
            # they reach the front; purge them when they could outnumber the live ones.
            self._cache_fifo = deque((o, b) for o, b in fifo if _still_cached(o, b))
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
        head = log._head_view()
        while head is not None and head.last_offset < log.durable_end and now - head.max_timestamp > retention_ms:
            dropped += self._drop(log, "retention_ms")
            head = log._head_view()
        self._delete_segments(log)
        return dropped

    def _enforce_size(self, log: PartitionLog, settings: TopicSettings) -> int:
        dropped = 0
        if settings.retention_bytes >= 0:
            head = log._head_view()
            while (
                head is not None and head.last_offset < log.durable_end
                and log.size_bytes - head.size >= settings.retention_bytes
            ):
                dropped += self._drop(log, "retention_bytes")
                head = log._head_view()
            self._delete_segments(log)
        return dropped

    def _delete_segments(self, log: PartitionLog) -> None:
        files = log.files
        if files is not None and not log.deleted and files.delete_below(log.log_start_offset):
            log._forget_segments_before(files.segments[0])

    def _drop(self, log: PartitionLog, reason: str) -> int:
        size, cached = log._drop_head()
        self.total_bytes -= size
        if cached:
            self.cached_bytes -= size
        self._metrics(log.topic)[2].dec(size)
        metrics.LOG_DELETED_BYTES.labels(reason).inc(size)
        return size

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
            self.cached_bytes -= log._clear_cache()
            files = log.files
            if files is not None:
                self.flusher.when_idle(functools.partial(files.remove_all, self._remove_dir))
            log.wake()
        self.total_bytes -= freed
        metrics.CACHE_BYTES.set(self.cached_bytes)
        metrics.LOG_DELETED_BYTES.labels("topic_deleted").inc(freed)
        self._topic_metrics.pop(topic.name, None)
        metrics.forget_topic(topic.name)


def _still_cached(log: PartitionLog, base_offset: int) -> bool:
    oldest = log._oldest_cached_offset()
    return not log.deleted and oldest is not None and base_offset >= oldest


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
