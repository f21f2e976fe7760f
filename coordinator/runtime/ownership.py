"""Who owns the data directory, and how its record log becomes the shard's state.

Rules:
- Exactly one process owns a data directory: the one holding its exclusive lock (`flock` on
  `<data-dir>/coordinator.lock`). Only the owner opens the Kafka listener and appends.
- A process that finds the lock held is a standby: it tails the log and replays every entry into
  its (not yet serving) core shard while it polls the lock every `STANDBY_POLL_S`. When the owner
  dies the kernel releases the lock; the standby takes it, recovers the rest of the log (torn
  tail truncated), and then serves: takeover costs one poll interval plus the tail it had not
  read yet.
- The new owner's first entry is a `CoordinatorEpoch` record (written by the core's `on_loaded`),
  and its writer epoch is above every epoch on disk, so an older owner revived after losing its
  lock can never append (the record log's fencing check fails it, and it stops).
- Replay runs in a worker thread, so a long load does not stop the event loop: group APIs answer
  COORDINATOR_LOAD_IN_PROGRESS meanwhile, and progress is logged. The standby's tailing replays
  in a worker thread too, while nothing serves from the core.
- Loading and tailing replay the same way (`Replayer`): the record log hands over the records
  of runs of entries in batches, as bytes, and the core replays them (offset commit values are
  kept encoded until first read: `core.offsets`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from ..core.offsets import LoadPlaces
from ..core.shard import CoordinatorShard
from ..logging import get_logger
from ..recordlog import (
    DataDirLock,
    FileSystem,
    LoadBatch,
    LogConfig,
    LogRewound,
    LogTailer,
    RecordLog,
    try_lock_data_dir,
)
from . import durable, kafka_metrics

log = get_logger("coordinator.ownership")

STANDBY_POLL_S = 0.1
_PROGRESS_EVERY_S = 5.0


class Replayer:
    """Applies loaded log batches to a core shard, counting and reporting progress.

    The record log hands over `LoadBatch`es: the records of a run of entries, in order, as
    bytes; the core decodes what it must (`CoordinatorShard.replay_encoded`). Start-up
    (`RecordLog.open(load=...)`) and the standby (`LogTailer.load`) both go through here."""

    def __init__(self, core: CoordinatorShard) -> None:
        self.core = core
        self.records = 0  # records read from the log and replayed into the core
        self.entries = 0
        self.skipped_unknown = 0
        self._last_report = time.monotonic()
        # Where offset commit values go, carried from batch to batch: nothing but this load
        # changes the core until it ends (start-up; a standby tails, then loads the rest).
        self._places = LoadPlaces()

    def __call__(self, batch: LoadBatch) -> None:
        self.skipped_unknown += self.core.replay_encoded(batch.items(), self._places)
        self.records += len(batch)
        self.entries += batch.entries
        now = time.monotonic()
        if now - self._last_report >= _PROGRESS_EVERY_S:
            self._last_report = now
            log.info("log_load_progress", entries=self.entries, records=self.records, offset=batch.last_offset)


async def acquire(fs: FileSystem, data_dir: Path, log_dir: Path, log_config: LogConfig,
                  new_core: Callable[[], CoordinatorShard],
                  on_owner: Callable[[], Awaitable[None]]) -> tuple[DataDirLock, RecordLog, Replayer]:
    """Take the data directory (waiting as a standby if it is owned) and load its log into a core
    from `new_core()`: the returned replayer's `core`.

    `on_owner` runs as soon as the lock is held, before the (possibly long) load: the server opens
    its listener there, so clients get COORDINATOR_LOAD_IN_PROGRESS rather than a refused connection.

    A standby whose tailer finds that entries it replayed were cut off by the owner (a write the
    disk refused: `LogRewound`) starts over with a new core. It tails once more after taking the
    lock, so a cut made just before the owner died is seen too."""
    replayer = Replayer(new_core())
    started = time.monotonic()
    lock = try_lock_data_dir(fs, str(data_dir))
    from_offset = 0
    if lock is None:
        log.info("standby_waiting", data_dir=str(data_dir))
        tailer = LogTailer(fs, str(log_dir))
        while True:
            try:
                await asyncio.to_thread(tailer.load, replayer)
            except LogRewound as exc:
                log.warning("standby_replaying_again", reason=str(exc))
                replayer, tailer = Replayer(new_core()), LogTailer(fs, str(log_dir))
                continue
            if lock is not None:
                break
            lock = try_lock_data_dir(fs, str(data_dir))
            if lock is None:
                await asyncio.sleep(STANDBY_POLL_S)
        from_offset = tailer.next_offset
        log.info("standby_takeover", tailed_entries=replayer.entries, from_offset=from_offset)
        started = time.monotonic()
    await on_owner()
    record_log = await asyncio.to_thread(
        RecordLog.open, fs, str(log_dir), config=log_config, load=replayer, from_offset=from_offset)
    recovery = record_log.recovery
    if recovery.truncated_bytes:
        durable.TRUNCATED_BYTES.inc(recovery.truncated_bytes)
        log.warning("log_tail_truncated", bytes_dropped=recovery.truncated_bytes, log_dir=str(log_dir))
    elapsed = time.monotonic() - started
    durable.LOAD_DURATION.set(elapsed)
    kafka_metrics.record_partition_load(elapsed)
    durable.LOAD_RECORDS.set(replayer.records)
    log.info("log_loaded", entries=replayer.entries, records=replayer.records, seconds=round(elapsed, 3),
             writer_epoch=record_log.writer_epoch, next_offset=record_log.next_offset,
             skipped_unknown=replayer.skipped_unknown)
    return lock, record_log, replayer
