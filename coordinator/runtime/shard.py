"""The shard task: the one owner of a core shard's state.

Adapters `submit()` version-free requests and await their replies. One asyncio task drains the
queue in batches:

1. for every event of the batch: `core.handle(event, now_ms, batched=True)`; the result's records
   become ONE log entry (so replay never sees half of a handler's effects), its timers are armed, its
   events go to the observers (metrics, history); then `core.flush(now_ms)`, one more entry: the
   KIP-848 heartbeats the core deferred so that a join storm runs the assignor once per group and
   batch instead of once per join (their replies come with the flush, see `core/shard.py`);
2. the batch's replies join a release queue behind the log's "durable point" at that moment (the
   future of the last entry appended); the committer makes entries durable in group commits;
3. replies are released in order as their durable points resolve. A reply with no records of its
   own still waits behind earlier unflushed entries, so a client never observes state that a
   crash could take back. Handling never waits for the disk: while batch N is being fsynced the
   shard already handles batch N+1 (so `log.flush.policy=interval` costs latency, not throughput).

A request answered at once by an idle shard (the common case) narrows rule 3 to what its reply can
reveal: a reply about one group, with no records of its own, waits only for the unflushed entries
that touched that group (and for coordinator-wide ones); a request about several groups or none
waits for every unflushed entry. That is Kafka's rule with a shard per group: in Kafka a read waits
for the pending writes of its own __consumer_offsets partition, not of the other 49. Without it,
every steady heartbeat of every group waited for the fsync of any join anywhere.

Timer firings and catalog changes enter through the same queue, never touching state directly.
While `loaded` is false (the log is being replayed) adapters answer COORDINATOR_LOAD_IN_PROGRESS.
A log failure is fatal: `on_fatal` is called and the process exits (fail-stop, no undo).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import itertools
from collections.abc import Callable, Hashable, Sequence
from typing import Any, Protocol

from ..core.records import encode_record, group_of
from ..core.requests import TimerFired
from ..core.result import Result
from ..core.shard import CoordinatorShard
from ..logging import get_logger
from .clock import Timers, now_ms

log = get_logger("coordinator.shard")

EncodedRecord = tuple[int, bytes, bytes | None]


class LogSink(Protocol):
    """Where the shard's entries go: the durable record log."""

    def append(self, records: Sequence[EncodedRecord], timestamp_ms: int) -> None: ...

    def durable_point(self) -> asyncio.Future[Any] | None:
        """A future resolved once every entry appended so far is durable (it fails if the log
        does); None when nothing appended is still waiting."""
        ...


Observer = Callable[[object], None]


_PARKED = object()
"""`_handle_now`: the core did not answer the request yet (a JoinGroup waiting for its rebalance)."""


class _Unload:
    """Queue marker: give the shard up (parked requests are answered NOT_COORDINATOR)."""

    def __init__(self, done: asyncio.Future[None]) -> None:
        self.done = done


class ShardRuntime:
    def __init__(self, core: CoordinatorShard, sink: LogSink, *, clock: Callable[[], int] = now_ms,
                 on_fatal: Callable[[BaseException], None] | None = None) -> None:
        self.core = core
        self.sink = sink
        self._clock = clock
        self._on_fatal = on_fatal
        self._queue: collections.deque[Any] = collections.deque()
        self._waiters: dict[int, asyncio.Future[Any]] = {}
        self._refs = itertools.count(1)
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._timers: Timers | None = None
        self._observers: list[Observer] = []
        self._idle = False
        """The task waits for work with nothing queued: a request may be handled at once."""
        self._releases: collections.deque[tuple[asyncio.Future[Any] | None, list[Any], list[_Unload]]] = (
            collections.deque())
        """Replies (and unload completions) waiting, in order, for their durable point."""
        self._entries = 0
        self._group_points: dict[str, tuple[int, asyncio.Future[Any]]] = {}
        """Per group: (entry number, durable point) of the last entry that touched it."""
        self._barrier: tuple[int, asyncio.Future[Any]] | None = None
        """The last entry with a coordinator-wide record: every reply waits for it."""
        self.loaded = False

    # -- lifecycle ----------------------------------------------------------------------------
    async def start(self, writer_id: str | None = None) -> None:
        """Arm timers and write the new owner's `CoordinatorEpoch` (durably), then serve."""
        loop = asyncio.get_running_loop()
        self._timers = Timers(loop, self._timer_fired, self._clock)
        if self._apply(self.core.on_loaded(self._clock(), writer_id=writer_id), []):
            point = self.sink.durable_point()
            if point is not None:
                await point
        self.loaded = True
        self._task = loop.create_task(self._run(), name="shard")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self._timers is not None:
            self._timers.cancel_all()
        for future in self._waiters.values():
            if not future.done():
                future.cancel()
        self._waiters.clear()

    async def unload(self) -> None:
        """Hand the shard back: answer parked requests (NOT_COORDINATOR), cancel timers.

        Goes through the queue so it is ordered after every request already submitted."""
        if self._task is None:
            return
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._idle = False
        self._queue.append(_Unload(done))
        self._wake.set()
        await done

    def add_observer(self, observer: Observer) -> None:
        self._observers.append(observer)

    # -- requests -----------------------------------------------------------------------------
    @property
    def idle(self) -> bool:
        """The shard task waits for work with nothing queued: `submit` handles a request at once."""
        return self._idle

    def new_ref(self) -> int:
        return next(self._refs)

    def submit(self, request: Any) -> Any:
        """Hand the shard a core request (built with `ref=new_ref()`).

        Returns the core response itself when an idle shard answered at once and nothing the answer
        could reveal is waiting to become durable (see the module docstring); otherwise a future."""
        if self._idle:
            return self._handle_now(request)
        future = self._waiter(request.ref)
        self._queue.append(request)
        self._wake.set()
        return future

    def _waiter(self, ref: int) -> asyncio.Future[Any]:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiters[ref] = future
        # A request whose connection went away is cancelled; forget it so parked refs never leak.
        future.add_done_callback(lambda f: self._waiters.pop(ref, None) if f.cancelled() else None)
        return future

    def _handle_now(self, event: Any) -> Any:
        """An idle shard handles a request at once, as a batch of one (same handle, apply and
        release queue); a steady heartbeat needs no future and no loop iteration."""
        ref = event.ref
        try:
            result = self.core.handle(event, self._clock())
        except Exception as exc:  # a core bug: fail this request, keep serving others
            failed = self._waiter(ref)
            self._core_failed(event, exc)
            return failed
        replies: list[Any] = []
        if self._apply(result, replies):  # its own entry: every reply waits for it
            future = self._waiter(ref)
            self._enqueue_release(replies, [])
            return future
        answer: Any = _PARKED
        others: list[Any] = []
        for reply in replies:
            if reply.ref == ref:
                answer = reply
            else:
                others.append(reply)
        if others:
            self._enqueue_release(others, [])
        if answer is _PARKED:
            return self._waiter(ref)
        point = self._pending_point(getattr(event, "group_id", None))
        if point is None:
            return answer.response
        future = self._waiter(ref)
        point.add_done_callback(functools.partial(self._release_one, answer))
        return future

    def _pending_point(self, group_id: str | None) -> asyncio.Future[Any] | None:
        """What a record-less reply about `group_id` (None: several groups or none) must wait for."""
        last = self.sink.durable_point()
        if last is None:  # everything appended is durable
            if self._group_points:
                self._group_points.clear()
            self._barrier = None
            return None
        if group_id is None:
            return last
        own = self._group_points.get(group_id)
        barrier = self._barrier
        if barrier is not None and (own is None or barrier[0] > own[0]):
            own = barrier
        if own is None:
            return None
        point = own[1]
        if point.done() and not point.cancelled() and point.exception() is None:
            return None
        return point  # pending, or failed: `_release_one` then stops the process

    def _release_one(self, reply: Any, point: asyncio.Future[Any]) -> None:
        if point.cancelled() or point.exception() is not None:
            self._fatal(point.exception() or RuntimeError("durable point cancelled"))
            return
        self._deliver(reply)

    def _flush(self, replies: list[Any]) -> None:
        """End of a batch: the core completes the consumer-group heartbeats it deferred (one target
        assignment per group for the whole batch); one more log entry, same release point."""
        refs = self.core.deferred_refs()
        try:
            result = self.core.flush(self._clock())
        except Exception as exc:  # a core bug: fail the deferred requests, keep serving others
            log.error("core_flush_failed", exc_info=exc)
            for ref in refs:
                waiter = self._waiters.pop(ref, None)
                if waiter is not None and not waiter.done():
                    waiter.set_exception(exc)
            return
        self._apply(result, replies)

    def _core_failed(self, event: Any, exc: Exception) -> None:
        log.error("core_handler_failed", event=type(event).__name__, exc_info=exc)
        waiter = self._waiters.pop(getattr(event, "ref", -1), None)
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)

    def _enqueue_release(self, replies: list[Any], unloads: list[_Unload]) -> None:
        """Release now if nothing appended is still waiting, else behind the current durable point."""
        if not replies and not unloads:
            return
        point = self.sink.durable_point()
        if point is None and not self._releases:
            self._release(replies, unloads)
            return
        self._releases.append((point, replies, unloads))
        if point is not None:
            point.add_done_callback(self._drain_releases)
        else:
            self._drain_releases()

    def _drain_releases(self, _: object = None) -> None:
        releases = self._releases
        while releases:
            point, replies, unloads = releases[0]
            if point is not None:
                if not point.done():
                    return
                if point.cancelled() or point.exception() is not None:
                    self._fatal(point.exception() or RuntimeError("durable point cancelled"))
                    return
            releases.popleft()
            self._release(replies, unloads)

    def _release(self, replies: list[Any], unloads: Sequence[_Unload] = ()) -> None:
        for reply in replies:
            self._deliver(reply)
        for unload in unloads:
            if not unload.done.done():
                unload.done.set_result(None)

    def _deliver(self, reply: Any) -> None:
        waiter = self._waiters.pop(reply.ref, None)
        if waiter is not None and not waiter.done():
            waiter.set_result(reply.response)

    def post(self, event: Any) -> None:
        """Queue an event that has no reply (timer firings, catalog changes)."""
        self._idle = False  # later requests queue behind it
        self._queue.append(event)
        self._wake.set()

    def _timer_fired(self, key: Hashable, deadline_ms: int) -> None:
        self.post(TimerFired(key, deadline_ms))  # type: ignore[arg-type]

    # -- the loop -----------------------------------------------------------------------------
    async def _run(self) -> None:
        while True:
            self._idle = not self._queue
            await self._wake.wait()
            self._idle = False
            self._wake.clear()
            while self._queue:
                batch = list(self._queue)
                self._queue.clear()
                replies: list[Any] = []
                unloads: list[_Unload] = []
                for event in batch:
                    if isinstance(event, _Unload):
                        self.loaded = False
                        self._apply(self.core.on_unloaded(self._clock()), replies)
                        unloads.append(event)
                        continue
                    try:
                        result = self.core.handle(event, self._clock(), batched=True)
                    except Exception as exc:  # a core bug: fail this request, keep serving others
                        self._core_failed(event, exc)
                        continue
                    self._apply(result, replies)
                self._flush(replies)
                self._enqueue_release(replies, unloads)
                # Let the committer and the connections run before the next batch.
                await asyncio.sleep(0)

    def _apply(self, result: Result, replies: list[Any]) -> bool:
        wrote = False
        if result.records:
            self.sink.append([encode_record(r) for r in result.records], self._clock())
            wrote = True
            point = self.sink.durable_point()
            if point is not None:
                self._entries += 1
                mark = (self._entries, point)
                for record in result.records:
                    group = group_of(record.key)
                    if group is None:
                        self._barrier = mark
                    else:
                        self._group_points[group] = mark
        replies.extend(result.replies)
        if self._timers is not None:
            for op in result.timers:
                self._timers.arm(op.key, op.deadline_ms)
        for event in result.events:
            for observer in self._observers:
                observer(event)
        return wrote

    def _fatal(self, exc: BaseException) -> None:
        log.critical("record_log_failed", error=repr(exc))
        if self._on_fatal is not None:
            self._on_fatal(exc)

