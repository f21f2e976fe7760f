"""The log writer: append entries, write them in batches, fsync by policy, roll segments, fence.

Theory of operation
-------------------
`append(records, timestamp_ms)` encodes one entry, gives it the next offset and buffers it.
`flush(now_ms)` writes everything buffered with one write call and, per `FlushPolicy`, one
fsync: that is group commit, one fsync per batch however many entries it holds. The committer
(`committer.py`) splits `flush` into `take_batch` (event-loop thread) and `write_batch` (executor
thread) so the loop is never blocked on the disk.

Offsets: `next_offset` >= `written_end` >= `durable_end`. Every entry with offset <
`durable_end` has been fsynced (under `FlushPolicy.NONE`, written): only those may be
acknowledged. `write_batch`, `flush` and `sync` return the new `durable_end`.

Segments roll when a batch would push the active segment past `segment_bytes` (a batch is never
split, so one oversized batch makes one oversized segment). Before creating the next segment
the active one is fsynced (under every policy but NONE), so closed segments are always whole
and only the active segment can have a torn tail.

Fencing rule
------------
The data directory lock (`lock.py`) is what keeps two coordinators from writing one log. This
writer adds a check that catches a writer which lost the lock without noticing (a stalled
process whose lock was broken, a lock on a filesystem that does not honour flock):

- every entry carries the writer's `writer_epoch`; a new active coordinator opens the log with
  an epoch higher than any on disk (by default max + 1) and writes `CoordinatorEpoch` first;
- `open` refuses (`FencedWriter`) an epoch lower than one already on disk;
- before each write, the writer checks that the active segment is exactly as long as it left
  it and that no newer segment exists; otherwise someone else appended and it raises
  `FencedWriter` without writing anything;
- readers skip entries whose epoch is lower than an epoch seen before them (`segments`), so a
  stale write that slips into the window between the check and the write is never replayed.

Failures
--------
A write the disk refuses (an OSError from the write call itself: ENOSPC, EDQUOT) is undone: the
active segment is cut back to where this writer left it and `write_batch` raises `WriteRefused`.
The batch's entries and every entry appended after them were never written, and they must go
too (they were computed from state that included the refused ones): the appending thread calls
`rewind()`. Nothing below the refused batch is touched, so nothing acknowledged is lost.

A reader following the log (a standby, another shard's security copy) may have read some of the
refused entries in the instant before the cut. So that it can tell, and so that it never takes a
later entry for one it has seen, the writer reuses neither their offsets nor their bytes: the
offsets of the dropped entries stay unused (a gap, as compaction leaves), and the next write after
a refusal starts a new segment (at the first unused offset; the cut one stays, possibly empty). A
reader that finds a segment shorter than where it stopped in it knows it read entries that are
gone (`tail.LogRewound`). Creating that segment may be refused too; then nothing has changed and
the roll is tried again with the next write.

Every other failure (an fsync, the fence check, a cut that fails) is fail-stop: every
later call raises `LogFailed`; nothing is undone, the process exits and a restart replays the log.
A failed fsync cannot be retried: the kernel may have dropped the pages it could not write
(fsyncgate), so a second fsync could succeed over lost bytes.

Threads: `append` and `take_batch` from one thread; `write_batch`, `sync` and `close` from one
thread at a time (possibly another one). They share no mutable state except through `Batch`.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import NamedTuple

from coordinator.recordlog.errors import FencedWriter, LogFailed, WriteRefused
from coordinator.recordlog.format import encode_entry
from coordinator.recordlog.fs import AppendHandle, FileSystem
from coordinator.recordlog.load import LoadSink
from coordinator.recordlog.record import LogEntry, RawRecord
from coordinator.recordlog.segments import Recovery, list_segments, recover, segment_path
from coordinator.settings import at_least, setting

# Kafka's offsets.topic.segment.bytes default.
DEFAULT_SEGMENT_BYTES = 100 * 1024 * 1024
DEFAULT_FLUSH_INTERVAL_MS = 10
DEFAULT_APPEND_LINGER_MS = -1
"""Kafka's adaptive `group.coordinator.append.linger.ms` setting, where Kafka 4.0's default is 5 ms:
a fixed linger is paid in full by each request of a connection, which is served one at a time, and
at 5 ms that halved pipelined OffsetCommit throughput (BENCHMARKS.md)."""


class FlushPolicy(enum.Enum):
    ALWAYS = "always"  # fsync every batch before it counts as durable (the default)
    INTERVAL = "interval"  # fsync at most every flush_interval_ms; batches wait for it
    NONE = "none"  # never fsync; written counts as durable. Tests and benchmarks only.


@dataclass(frozen=True)
class LogConfig:
    """The record log's settings; each field declares its key (see `coordinator.settings`)."""

    segment_bytes: int = setting(
        "log.segment.bytes", DEFAULT_SEGMENT_BYTES,
        "Record log segment size (Kafka's offsets.topic.segment.bytes).", check=at_least(1024))
    flush_policy: FlushPolicy = setting(
        "log.flush.policy", FlushPolicy.ALWAYS,
        "When appended records are fsynced: always, interval or none (ours).")
    flush_interval_ms: int = setting(
        "log.flush.interval.ms", DEFAULT_FLUSH_INTERVAL_MS,
        "With log.flush.policy=interval: fsync at most this often; replies wait for the fsync that "
        "covers them (ours).", check=at_least(0))
    append_linger_ms: int = setting(
        "group.coordinator.append.linger.ms", DEFAULT_APPEND_LINGER_MS,
        "How long appended records wait for more to accumulate before they are written and fsynced "
        "together; replies wait for that fsync. -1 or 0: write as soon as the event loop has handled "
        "what was ready (Kafka's).", check=at_least(-1))

    def __post_init__(self) -> None:
        if self.segment_bytes <= 0:
            raise ValueError("segment_bytes must be positive")
        if self.flush_interval_ms < 0:
            raise ValueError("flush_interval_ms must not be negative")
        if self.append_linger_ms < -1:
            raise ValueError("append_linger_ms must be -1 or more")


class Batch(NamedTuple):
    data: bytes  # frames back to back
    first_offset: int
    end_offset: int  # exclusive


class RecordLog:
    """Writer of one log directory. Create with `RecordLog.open`."""

    def __init__(
        self,
        fs: FileSystem,
        directory: str,
        config: LogConfig,
        writer_epoch: int,
        recovery: Recovery,
    ) -> None:
        self._fs = fs
        self._directory = directory
        self._config = config
        self._writer_epoch = writer_epoch
        self.recovery = recovery
        # Append side (caller's thread).
        self._pending: list[bytes] = []
        self._pending_bytes = 0
        self._pending_first = recovery.next_offset
        self._next_offset = recovery.next_offset
        # Write side (one thread at a time).
        self._active_base = recovery.segment_bases[-1]
        self._active_size = recovery.active_size
        self._handle: AppendHandle | None = fs.open_append(
            segment_path(directory, self._active_base)
        )
        self._written_end = recovery.next_offset
        self._durable_end = recovery.next_offset
        self._last_sync_ms: int | None = None
        self._failed: BaseException | None = None
        self._cut = False
        """The last write was refused and cut back: the next one starts a new segment."""

    @classmethod
    def open(
        cls,
        fs: FileSystem,
        directory: str,
        *,
        config: LogConfig | None = None,
        writer_epoch: int | None = None,
        replay: Callable[[LogEntry], None] | None = None,
        load: LoadSink | None = None,
        from_offset: int = 0,
    ) -> RecordLog:
        """Recover the log in `directory` (creating it if needed) and open it for appending.

        Before this returns, `replay` receives every entry with offset >= `from_offset`, in
        order, or `load` receives their records as `LoadBatch`es, in order (see `load`).
        `writer_epoch=None` takes max epoch on disk + 1; an explicit epoch lower than one on
        disk raises `FencedWriter`. The caller must hold the data directory lock.
        `recovery.truncated_bytes` is the torn tail that was dropped: log it.
        """
        config = config or LogConfig()
        recovery = recover(fs, directory, replay=replay, load=load, from_offset=from_offset)
        if writer_epoch is None:
            writer_epoch = recovery.max_epoch + 1
        elif writer_epoch < recovery.max_epoch:
            raise FencedWriter(
                f"log {directory} has entries of epoch {recovery.max_epoch}"
                f" > writer epoch {writer_epoch}"
            )
        if not recovery.segment_bases:
            handle = fs.open_append(segment_path(directory, recovery.next_offset))
            handle.close()
            fs.fsync_dir(directory)
            recovery = _with_bases(recovery, (recovery.next_offset,))
        return cls(fs, directory, config, writer_epoch, recovery)

    # -- state -------------------------------------------------------------------------------

    @property
    def directory(self) -> str:
        return self._directory

    @property
    def config(self) -> LogConfig:
        return self._config

    @property
    def writer_epoch(self) -> int:
        return self._writer_epoch

    @property
    def next_offset(self) -> int:
        return self._next_offset

    @property
    def written_end(self) -> int:
        return self._written_end

    @property
    def durable_end(self) -> int:
        return self._durable_end

    @property
    def active_segment_base(self) -> int:
        return self._active_base

    @property
    def has_pending(self) -> bool:
        """Entries appended but not yet taken into a batch."""
        return bool(self._pending)

    @property
    def pending_bytes(self) -> int:
        """Bytes of the entries appended but not yet taken into a batch."""
        return self._pending_bytes

    @property
    def failed(self) -> BaseException | None:
        return self._failed

    # -- append side -------------------------------------------------------------------------

    def append(self, records: Sequence[RawRecord], timestamp_ms: int) -> int:
        """Buffer one entry (the records of one handler call); returns its offset.

        Raises ValueError/TypeError for records the format cannot hold (nothing is buffered).
        """
        self._check_usable()
        offset = self._next_offset
        frame = encode_entry(offset, self._writer_epoch, timestamp_ms, records)
        self._pending.append(frame)
        self._pending_bytes += len(frame)
        self._next_offset = offset + 1
        return offset

    def rewind(self) -> None:
        """After `WriteRefused`: forget every entry not written (buffered or in the refused batch).
        Their offsets are not used again: the next append takes `next_offset` as it was, and the
        gap, holding nothing, counts as written (and as durable if everything written is).

        Call from the appending thread, once the refused `write_batch` has returned and before the
        next one starts (the committer runs one at a time): it moves the write side's ends too."""
        self._check_usable()
        self._pending = []
        self._pending_bytes = 0
        self._pending_first = self._next_offset
        if self._durable_end == self._written_end:
            self._durable_end = self._next_offset
        self._written_end = self._next_offset

    def take_batch(self) -> Batch | None:
        """Remove everything buffered as one batch (None if nothing is)."""
        if not self._pending:
            return None
        data = b"".join(self._pending)
        batch = Batch(data, self._pending_first, self._next_offset)
        self._pending = []
        self._pending_bytes = 0
        self._pending_first = self._next_offset
        return batch

    # -- write side --------------------------------------------------------------------------

    def write_batch(self, batch: Batch, now_ms: int | None = None) -> int:
        """Write a batch, fsync per policy; returns `durable_end`.

        `now_ms` (a monotonic clock) is required under `FlushPolicy.INTERVAL`.
        """
        self._check_now(now_ms)
        self._check_usable()
        try:
            self._write(batch)  # raises WriteRefused with the writer still usable
            policy = self._config.flush_policy
            if policy is FlushPolicy.ALWAYS:
                self._fsync(now_ms)
            elif policy is FlushPolicy.NONE:
                self._durable_end = self._written_end
            elif now_ms is not None and self._sync_is_due(now_ms):
                self._fsync(now_ms)
        except WriteRefused:
            raise
        except BaseException as exc:
            self._failed = exc
            raise
        return self._durable_end

    def flush(self, now_ms: int | None = None) -> int:
        """Write everything buffered as one batch and fsync per policy; returns `durable_end`.

        With nothing buffered, performs a due interval fsync, if any.
        """
        self._check_now(now_ms)
        self._check_usable()
        batch = self.take_batch()
        if batch is not None:
            return self.write_batch(batch, now_ms)
        if now_ms is not None and self._sync_is_due(now_ms):
            return self.sync(now_ms)
        return self._durable_end

    def sync(self, now_ms: int | None = None) -> int:
        """Fsync everything written now, whatever the interval (not under NONE)."""
        self._check_usable()
        try:
            if self._config.flush_policy is FlushPolicy.NONE:
                self._durable_end = self._written_end
            elif self._written_end > self._durable_end:
                self._fsync(now_ms)
        except BaseException as exc:
            self._failed = exc
            raise
        return self._durable_end

    def sync_due_ms(self) -> int | None:
        """Under INTERVAL with unsynced data: the `now_ms` at which `sync` should run."""
        if self._config.flush_policy is not FlushPolicy.INTERVAL:
            return None
        if self._written_end == self._durable_end:
            return None
        if self._last_sync_ms is None:
            return 0
        return self._last_sync_ms + self._config.flush_interval_ms

    def close(self) -> None:
        """Write and fsync what is buffered (unless failed), then release the file."""
        try:
            if self._failed is None and self._handle is not None:
                batch = self.take_batch()
                if batch is not None:
                    try:
                        self._write(batch)
                    except BaseException as exc:
                        self._failed = exc
                        raise
                self.sync()
        finally:
            if self._handle is not None:
                self._handle.close()
                self._handle = None

    # -- internals ---------------------------------------------------------------------------

    def _check_usable(self) -> None:
        if self._failed is not None:
            raise LogFailed(
                f"log {self._directory} failed earlier: {self._failed!r}"
            ) from self._failed
        if self._handle is None:
            raise LogFailed(f"log {self._directory} is closed")

    def _check_now(self, now_ms: int | None) -> None:
        # Checked before anything is taken or written, so a caller's mistake costs nothing.
        if now_ms is None and self._config.flush_policy is FlushPolicy.INTERVAL:
            raise ValueError("FlushPolicy.INTERVAL needs now_ms")

    def _active_handle(self) -> AppendHandle:
        assert self._handle is not None
        return self._handle

    def _write(self, batch: Batch) -> None:
        """Fence check, roll if needed, one write call. Durability is the caller's business."""
        if batch.first_offset != self._written_end:
            raise ValueError(f"batch starts at {batch.first_offset}, expected {self._written_end}")
        self._check_not_fenced()
        if self._cut or (self._active_size and self._active_size + len(batch.data) > self._config.segment_bytes):
            self._roll(batch.first_offset)
        handle = self._active_handle()
        try:
            handle.write(batch.data)
        except OSError as exc:
            # A short write may have left part of the batch: cut it off. If the cut fails, the
            # file's end is unknown and the OSError makes the writer fail-stop.
            handle.truncate(self._active_size)
            self._cut = True
            raise WriteRefused(f"{self._directory}: write of {len(batch.data)} bytes refused: {exc}",
                               batch.first_offset) from exc
        self._cut = False
        self._active_size += len(batch.data)
        self._written_end = batch.end_offset

    def _check_not_fenced(self) -> None:
        size = self._active_handle().size()
        if size != self._active_size:
            raise FencedWriter(
                f"active segment of {self._directory} is {size} bytes, this writer (epoch"
                f" {self._writer_epoch}) left it at {self._active_size}: another writer appended"
            )
        newest = list_segments(self._fs, self._directory)
        if newest and newest[-1] > self._active_base:
            raise FencedWriter(
                f"{self._directory} has segment {newest[-1]} past this writer's active segment"
                f" {self._active_base} (epoch {self._writer_epoch}): another writer rolled"
            )

    def _sync_is_due(self, now_ms: int) -> bool:
        due = self.sync_due_ms()
        return due is not None and now_ms >= due

    def _fsync(self, now_ms: int | None) -> None:
        self._active_handle().fsync()
        self._durable_end = self._written_end
        if now_ms is not None:
            self._last_sync_ms = now_ms

    def _roll(self, base: int) -> None:
        handle = self._active_handle()
        if self._config.flush_policy is not FlushPolicy.NONE:
            # Closed segments must be whole: only the active one may have a torn tail.
            handle.fsync()
            self._durable_end = self._written_end
        try:
            new_handle = self._fs.open_append(segment_path(self._directory, base))
        except OSError as exc:  # no room for a new file: nothing has changed, the next write retries
            raise WriteRefused(f"{self._directory}: cannot create segment {base}: {exc}", base) from exc
        handle.close()
        self._handle = new_handle
        if new_handle.size() != 0:
            raise FencedWriter(f"new segment {base} of {self._directory} already has data")
        if self._config.flush_policy is not FlushPolicy.NONE:
            self._fs.fsync_dir(self._directory)
        self._active_base = base
        self._active_size = 0


def _with_bases(recovery: Recovery, bases: tuple[int, ...]) -> Recovery:
    return replace(recovery, segment_bases=bases, active_size=0)
