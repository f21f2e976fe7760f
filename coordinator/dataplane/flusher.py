"""Group commit for partition data: fsync what Produce wrote, then advance the high watermarks.

Theory of operation
-------------------
An append writes its batch into the partition's active segment at once (on the event loop, into
the page cache) and marks the partition dirty here. One task loops:

- while no partition is dirty, sleep until one is (or until `close`);
- under `log.flush.policy=interval`, wait until `log.flush.interval.ms` has passed since the last
  round began (appends meanwhile join this round);
- take every dirty partition's `SyncJob` (the handles and directories to fsync, and the offset
  they cover), run them all in the flusher's one worker thread (files of a topic deleted meanwhile
  are closed and removed only after the round: `when_idle`), then, back on the loop, advance
  each partition's durable end to the offset its job covered. That wakes long-polling fetches and
  resolves the Produce waiters whose batches are now covered, in offset order.

So under load one round covers many appends across many partitions (group commit); with a single
producer it costs one fsync per Produce request, which is what `always` promises.

Under `log.flush.policy=none` nothing runs here: written counts as durable at once (the bytes are
in the page cache; they survive a process kill, not a power cut).

A failed fsync is fail-stop, as for the group record log: `on_fatal(exc)` is called once (the
server logs a critical line and exits), waiters fail, and nothing is acknowledged. It cannot be
retried: the kernel may have dropped the pages it could not write (fsyncgate). A failed *write*
never reaches here: it happens at append, is cut back and answered KAFKA_STORAGE_ERROR
(`segments.PartitionFiles.append`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol

from coordinator.recordlog import FlushPolicy, LogFailed
from coordinator.recordlog.disk_thread import DiskThread

from .segments import PartitionFiles, SyncJob


class Flushable(Protocol):
    """A partition as the flusher sees it (`log.PartitionLog`)."""

    @property
    def files(self) -> PartitionFiles | None: ...

    @property
    def deleted(self) -> bool: ...

    def mark_durable(self, end_offset: int) -> None: ...


class Flusher:
    def __init__(
        self,
        policy: FlushPolicy,
        interval_ms: int,
        on_fatal: Callable[[BaseException], None],
    ) -> None:
        self.policy = policy
        self.interval_ms = interval_ms
        self._on_fatal = on_fatal
        self._dirty: dict[int, Flushable] = {}
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._disk: DiskThread | None = None
        self._closing = False
        self._in_flight = False
        self._after_round: list[Callable[[], None]] = []
        self.failed: BaseException | None = None
        self.rounds = 0

    @property
    def immediate(self) -> bool:
        """Written is durable at once (no task needed)."""
        return self.policy is FlushPolicy.NONE

    def start(self) -> None:
        if self.immediate or self._task is not None:
            return
        self._disk = DiskThread("dataplane-flush")
        self._task = asyncio.get_running_loop().create_task(self._run(), name="dataplane-flusher")

    def dirty(self, log: Flushable) -> None:
        if self.failed is not None:
            raise LogFailed("partition data flush failed earlier") from self.failed
        self._dirty[id(log)] = log
        self._wakeup.set()

    def when_idle(self, action: Callable[[], None]) -> None:
        """Run `action` (closing or deleting files) once no fsync round is using them: now, or
        right after the round in flight."""
        if self._in_flight:
            self._after_round.append(action)
        else:
            action()

    async def close(self) -> None:
        """Make everything written so far durable and stop."""
        self._closing = True
        self._wakeup.set()
        if self._task is not None:
            await self._task
        if self._disk is not None:
            self._disk.stop()

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        last_round = -float("inf")
        try:
            while True:
                if not self._dirty:
                    if self._closing:
                        return
                    self._wakeup.clear()
                    await self._wakeup.wait()
                    continue
                if self.policy is FlushPolicy.INTERVAL and not self._closing:
                    delay = last_round + self.interval_ms / 1000 - loop.time()
                    if delay > 0:
                        await asyncio.sleep(delay)
                last_round = loop.time()
                dirty, self._dirty = list(self._dirty.values()), {}
                jobs = []
                for log in dirty:
                    files = log.files
                    job = files.take_sync() if files is not None and not log.deleted else None
                    if job is not None:
                        jobs.append((log, job))
                if not jobs:
                    continue
                self._in_flight = True
                try:
                    assert self._disk is not None
                    await self._disk.run(_run_jobs, [job for _, job in jobs])
                finally:
                    self._in_flight = False
                    actions, self._after_round = self._after_round, []
                    for action in actions:
                        action()
                self.rounds += 1
                for log, job in jobs:
                    log.mark_durable(job.end_offset)
        except Exception as exc:
            self.failed = exc
            self._on_fatal(exc)


def _run_jobs(jobs: list[SyncJob]) -> None:
    for job in jobs:
        job.run()
