"""Asyncio group commit: release each append's future once its entry is durable.

Theory of operation
-------------------
One committer task per log. `append()` encodes and buffers the entry at once (so offsets follow
call order) and returns a future; `append_entry()` does the same and returns the offset, for a
writer that follows `on_durable` instead (the shard: a future per entry would be one per member
catching up after a join). The task loops:

- if entries are buffered: once the oldest of them has lingered `linger_ms` (Kafka's
  `group.coordinator.append.linger.ms`), or at once if they fill a batch (`FULL_BATCH_BYTES`) or
  the committer is closing, take them all as one batch and run `write_batch` (one write, one
  fsync per policy) in the committer's single worker thread, so the event loop never waits on
  the disk; entries appended meanwhile form the next batch. This is group commit: entries that
  arrive within one linger, from any group, share a write and an fsync. With `linger_ms` 0 or
  -1 the batch is taken as soon as the task runs, after the loop has handled what was ready
  (Kafka's adaptive linger): batches then grow only with load.
- else, if written data awaits an interval fsync (`FlushPolicy.INTERVAL`): wait until it is due
  (or until new entries arrive), then `sync` in the worker thread;
- else sleep until the next `append` or `close`.

After each write or sync, every future whose offset is below `durable_end` gets its offset as
result, in offset order, then `on_durable(durable_end)` is called. `barrier()` gives a future for "everything appended so far is durable",
for a reply that has no records of its own but must not overtake earlier ones.

A write the disk refuses (`WriteRefused`: ENOSPC, EDQUOT; the writer has cut the file back) is
not fatal: the log rewinds (the refused batch and every entry appended since are dropped; their
offsets stay unused), the futures of the dropped entries fail with the `WriteRefused`, and
`on_refused(exc)` is called at once, before anything else can append: the appender must drop the
state those entries carried (the shard reloads from the log). Then the new `durable_end` (past
the unused offsets, when everything written is durable) is announced. The entries below the
refused batch are untouched and become durable as usual. Without an `on_refused` a refused write
is fatal like any other failure.

Every other failure is fail-stop: if an fsync, the fence check or a roll raises, `on_fatal(exc)`
is called once (the server logs it as critical and exits non-zero), outstanding futures fail with
`LogFailed`, and later appends raise `LogFailed`. Nothing is retried or undone.

Only one `write_batch`/`sync` runs at a time (the task awaits each), as `RecordLog` requires.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable, Sequence

from coordinator.recordlog.disk_thread import DiskThread
from coordinator.recordlog.errors import LogFailed, WriteRefused
from coordinator.recordlog.record import RawRecord
from coordinator.recordlog.writer import RecordLog

_TIMER_RESOLUTION_S = 0.001
"""uvloop's timers count whole milliseconds: a shorter wait would wake at once, again and again."""

FULL_BATCH_BYTES = 1024 * 1024
"""A batch this big is written without lingering further (Kafka's default max batch, 1 MiB)."""


class GroupCommitter:
    """Owns a `RecordLog` while the server runs. Use from the event loop thread only."""

    def __init__(self, log: RecordLog, *, on_fatal: Callable[[BaseException], None],
                 linger_ms: int | None = None) -> None:
        """`linger_ms` None takes the log's `append_linger_ms`."""
        self._log = log
        self._on_fatal = on_fatal
        linger = log.config.append_linger_ms if linger_ms is None else linger_ms
        self._linger_s = max(linger, 0) / 1000
        self._batch_opened = 0.0
        """loop.time() at which the first entry of the batch being gathered was appended."""
        # One dedicated thread: writes stay ordered, and compaction or other executor work
        # cannot delay an fsync that replies are waiting on.
        self._disk = DiskThread(f"recordlog-{log.directory}")
        self._waiters: collections.deque[tuple[int, asyncio.Future[int]]] = collections.deque()
        self._released_end = log.durable_end
        """The `durable_end` last announced: entries below it are durable and their futures done."""
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self._failed: BaseException | None = None
        self.batches_written = 0
        self.refused_batches = 0
        self.on_refused: Callable[[WriteRefused], None] | None = None
        """Told when a write was refused and the log rewound (see the module docstring)."""
        self.syncs = 0
        self.on_released: Callable[[int], None] | None = None
        """Told how many appends each write or sync made durable (group-commit batch sizes)."""
        self.on_durable: Callable[[int], None] | None = None
        """Told the new `durable_end` after each write or sync that made appends durable."""

    @property
    def log(self) -> RecordLog:
        return self._log

    @property
    def failed(self) -> BaseException | None:
        return self._failed

    def start(self) -> None:
        if self._task is not None:
            raise RuntimeError("committer already started")
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name=f"recordlog-committer-{self._log.directory}"
        )

    def append(self, records: Sequence[RawRecord], timestamp_ms: int) -> asyncio.Future[int]:
        """Buffer one entry; the future resolves with its offset once the entry is durable."""
        offset = self.append_entry(records, timestamp_ms)
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._waiters.append((offset, future))
        return future

    def append_entry(self, records: Sequence[RawRecord], timestamp_ms: int) -> int:
        """Buffer one entry and return its offset; `on_durable` says when it is durable (no
        future: a writer that follows `durable_end` needs none per entry)."""
        self._check_open()
        log = self._log
        opens_batch = not log.has_pending
        offset = log.append(records, timestamp_ms)
        if opens_batch:
            self._batch_opened = asyncio.get_running_loop().time()
            self._wakeup.set()
        elif log.pending_bytes >= FULL_BATCH_BYTES:
            self._wakeup.set()  # ends the linger: the batch is full
        return offset

    @property
    def durable_end(self) -> int:
        """Every offset below it is durable, as last announced through `on_durable`."""
        return self._released_end

    def barrier(self) -> asyncio.Future[int]:
        """A future that resolves once every entry appended so far is durable.

        Its result is the offset of the last such entry (-1 for an empty log); it is resolved
        already if they are all durable.
        """
        self._check_open()
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        last = self._log.next_offset - 1
        if last < self._log.durable_end:
            future.set_result(last)
        else:
            self._waiters.append((last, future))
        return future

    async def close(self) -> None:
        """Make everything appended so far durable, stop the task and release the log."""
        self._closing = True
        self._wakeup.set()
        try:
            if self._task is not None:
                await self._task
            await self._disk.run(self._log.close)
            if self._failed is None:
                self._release(self._log.durable_end)
        finally:
            self._disk.stop()

    # -- the task ----------------------------------------------------------------------------

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        log = self._log
        try:
            while True:
                if self._linger_s and log.has_pending and not self._closing \
                        and log.pending_bytes < FULL_BATCH_BYTES:
                    wait_s = self._batch_opened + self._linger_s - loop.time()
                    if wait_s > _TIMER_RESOLUTION_S:
                        await self._wait_for_wakeup(wait_s)
                        continue
                batch = log.take_batch()
                if batch is not None:
                    try:
                        durable_end = await self._disk.run(log.write_batch, batch, _now_ms(loop))
                    except WriteRefused as exc:
                        if self.on_refused is None:
                            raise  # nobody can drop what the refused entries carried: fail-stop
                        self._refused(exc)
                        continue
                    self.batches_written += 1
                    self._release(durable_end)
                    continue
                due_ms = log.sync_due_ms()
                if due_ms is not None:
                    delay_ms = due_ms - _now_ms(loop)
                    if delay_ms > 0 and not self._closing:
                        await self._wait_for_wakeup(delay_ms / 1000)
                        continue  # new entries may have arrived: write them first
                    durable_end = await self._disk.run(log.sync, _now_ms(loop))
                    self.syncs += 1
                    self._release(durable_end)
                    continue
                if self._closing:
                    return
                await self._wait_for_wakeup(None)
        except Exception as exc:
            self._fail(exc)

    async def _wait_for_wakeup(self, timeout_s: float | None) -> None:
        # Clearing right before waiting is race-free: nothing else runs on this loop between
        # our last check of the log and the wait.
        self._wakeup.clear()
        if timeout_s is None:
            await self._wakeup.wait()
            return
        # A timer that sets the event, rather than asyncio.timeout: no cancellation and exception
        # per linger, which is once per batch.
        timer = asyncio.get_running_loop().call_later(timeout_s, self._wakeup.set)
        try:
            await self._wakeup.wait()
        finally:
            timer.cancel()

    def _release(self, durable_end: int) -> None:
        waiters = self._waiters
        while waiters and waiters[0][0] < durable_end:
            offset, future = waiters.popleft()
            if not future.done():  # the awaiting handler may have been cancelled
                future.set_result(offset)
        released = durable_end - self._released_end  # offsets count entries
        if released > 0:
            self._released_end = durable_end
            if self.on_released is not None:
                self.on_released(released)
            if self.on_durable is not None:
                self.on_durable(durable_end)

    def _refused(self, exc: WriteRefused) -> None:
        self.refused_batches += 1
        self._log.rewind()
        kept: collections.deque[tuple[int, asyncio.Future[int]]] = collections.deque()
        for offset, future in self._waiters:
            if offset < exc.first_offset:
                kept.append((offset, future))
            elif not future.done():
                future.set_exception(exc)
        self._waiters = kept
        if self.on_refused is not None:
            self.on_refused(exc)
        end = self._log.durable_end
        if end > self._released_end:  # the unused offsets: nothing was made durable, not counted
            self._released_end = end
            if self.on_durable is not None:
                self.on_durable(end)

    def _fail(self, exc: BaseException) -> None:
        self._failed = exc
        error = LogFailed(f"record log {self._log.directory} failed: {exc!r}")
        error.__cause__ = exc
        while self._waiters:
            _, future = self._waiters.popleft()
            if not future.done():
                future.set_exception(error)
        self._on_fatal(exc)

    def _check_open(self) -> None:
        if self._failed is not None:
            raise LogFailed(f"record log {self._log.directory} failed") from self._failed
        if self._closing:
            raise LogFailed(f"record log {self._log.directory} is closing")


def _now_ms(loop: asyncio.AbstractEventLoop) -> int:
    """Monotonic milliseconds for the fsync interval (not written to the log)."""
    return int(loop.time() * 1000)
