"""The history writer: a shard observer that stamps events and writes them in batches off the loop.

Theory of operation
-------------------
`observe(event)` runs on the event loop inside the shard's batch, right after the core handled a
request (see `coordinator.runtime.shard`). It must stay cheap: it turns the event into rows
(`coordinator.history.rows`; a `group_type_changed` row goes first when the group's type differs
from the last one seen), stamps each with wall-clock ms, the next sequence number and the
coordinator's node.id / cluster.id, and appends them to an in-memory list. Nothing else happens on
the loop.

A flusher task wakes every `history.flush.interval.ms` (or as soon as `FLUSH_ROWS` rows are
waiting), swaps the list out and hands it to a worker thread, which encodes the rows as JSON lines
(msgspec) and appends them to the segment files (`coordinator.history.segments`: rotation,
retention). One batch is in flight at a time, so rows reach the files in sequence order.

Failure policy: the history is an observability stream, not state. A write error is logged (one
line per error kind per interval, `storage_errors.StorageLog`: a full disk fails every flush) and the
batch dropped; the coordinator keeps serving. If writing falls behind by `max_buffered_rows`, new
rows are dropped and counted (`dropped`), never blocking the shard. No fsync (see segments).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import msgspec

from ..logging import get_logger
from ..storage_errors import StorageLog
from .rows import AssignmentSource, GroupTypeWatch, PartitionTracker, Row, rows_of
from .schema import SCHEMA_VERSION
from .segments import SegmentLog

log = get_logger("coordinator.history")
_storage = StorageLog("coordinator.history")

FLUSH_ROWS = 10_000
"""Rows waiting that trigger a flush before the interval is up."""


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class HistoryWriter:
    def __init__(self, directory: Path, *, node_id: int, cluster_id: str, segment_bytes: int,
                 segment_ms: int, retention_ms: int, flush_interval_ms: int = 1000,
                 max_buffered_rows: int = 1_000_000, source: AssignmentSource | None = None,
                 clock: Callable[[], int] = wall_clock_ms) -> None:
        self.clock = clock
        self.segments = SegmentLog(directory, segment_bytes=segment_bytes, segment_ms=segment_ms,
                                   retention_ms=retention_ms, clock=clock)
        self.tracker = PartitionTracker(source)
        self.types = GroupTypeWatch()
        self.flush_interval_ms = flush_interval_ms
        self.max_buffered_rows = max_buffered_rows
        self._common: Row = {"v": SCHEMA_VERSION, "node_id": node_id, "cluster_id": cluster_id}
        self._pending: list[Row] = []
        self._seq = 0
        self._encoder = msgspec.json.Encoder()
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self.dropped = 0
        self.written = 0

    # -- lifecycle ----------------------------------------------------------------------------
    def open(self) -> None:
        """Prepare the directory (closing what a previous process left open) and seed ownership."""
        self._seq = self.segments.open()
        self.tracker.seed()
        self.segments.enforce_retention()

    def start(self) -> None:
        """Start the background flusher (needs a running loop)."""
        self._wake = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._flusher(), name="history-writer")

    async def close(self) -> None:
        """Stop the flusher, write what is buffered, close the active segment."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        rows, self._pending = self._pending, []
        await asyncio.to_thread(self._write_and_close, rows)

    # -- the observer -------------------------------------------------------------------------
    def observe(self, event: object) -> None:
        rows = rows_of(event, self.tracker)
        if not rows:
            return
        now = self.clock()
        pending = self._pending
        change = self.types.change
        for row in _with_type_changes(rows, change):
            if len(pending) >= self.max_buffered_rows:
                self.dropped += 1
                continue
            row.update(self._common)
            row["ts_ms"] = now
            row["seq"] = self._seq
            self._seq += 1
            pending.append(row)
        if len(pending) >= FLUSH_ROWS and self._wake is not None:
            self._wake.set()

    __call__ = observe

    # -- writing ------------------------------------------------------------------------------
    def flush(self) -> int:
        """Write everything buffered now, in this thread (tests, tools). Returns rows written."""
        rows, self._pending = self._pending, []
        self._write(rows)
        return len(rows)

    async def _flusher(self) -> None:
        assert self._wake is not None
        interval = self.flush_interval_ms / 1000
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), interval)
            self._wake.clear()
            rows, self._pending = self._pending, []
            await asyncio.to_thread(self._write, rows)
            if self.dropped:
                log.warning("history_rows_dropped", dropped=self.dropped, max_buffered_rows=self.max_buffered_rows)
                self.dropped = 0

    def _write(self, rows: list[Row]) -> None:
        try:
            if rows:
                encode = self._encoder.encode
                self.segments.append((r["seq"], r["ts_ms"], encode(r) + b"\n") for r in rows)
                self.written += len(rows)
            else:
                self.segments.maybe_roll()
            # A directory listing per flush (in this thread): cheap next to the write.
            for path in self.segments.enforce_retention():
                log.info("history_segment_deleted", path=str(path))
        except OSError as exc:  # a full disk fails every flush: one line per kind per interval
            _storage.failed("history_write_failed", "history", exc, rows=len(rows))

    def _write_and_close(self, rows: list[Row]) -> None:
        self._write(rows)
        try:
            self.segments.close()
        except OSError as exc:
            log.error("history_close_failed", error=repr(exc))


def _with_type_changes(rows: Iterable[Row], change: Callable[[Row], Row | None]) -> Iterator[Row]:
    for row in rows:
        changed = change(row)
        if changed is not None:
            yield changed
        yield row


def open_writer(data_dir: Path, config: Any, source: AssignmentSource | None,
                node_id: int | None = None) -> HistoryWriter | None:
    """The writer the server attaches, from its configuration (None when history.enable=false);
    `node_id` is the writing node's (a shard's is `node.id + k`), by default `node.id`."""
    if not config["history.enable"]:
        return None
    writer = HistoryWriter(
        data_dir / "history",
        node_id=config["node.id"] if node_id is None else node_id,
        cluster_id=config["cluster.id"],
        segment_bytes=config["history.segment.bytes"],
        segment_ms=config["history.segment.ms"],
        retention_ms=config["history.retention.ms"],
        flush_interval_ms=config["history.flush.interval.ms"],
        source=source,
    )
    writer.open()
    return writer
