"""The shard task: the one owner of a core shard's state, and the one submit contract.

The submit contract
===================

``submit(request) -> Completion`` for every core request (built with ``ref=new_ref()``): a
future-like object that resolves with the core response once the reply may leave (``done()``,
``result()``, ``exception()``, ``add_done_callback``, ``cancel()``, awaitable). ONE release rule,
whichever way the request was handled:

    A reply leaves when everything it depends on is durable: the log entry of the Result that
    carries it if that Result has records (the log is ordered, so that entry covers every earlier
    one); otherwise the unflushed entries of the group its request is about (coordinator-wide
    entries count for every group; a request about several groups or none waits for all of them).

That is Kafka's rule with a shard per group: in Kafka a read waits for the pending writes of its own
``__consumer_offsets`` partition, not of the other 49. A client never observes state a crash could
take back, and a steady heartbeat does not wait for the fsync of a join in another group. A
completion already done when ``submit`` returns means "answered at once": the caller may take its
result without a loop turn (``runtime/apis/group_api.py`` does).

A request is given an ``asyncio.Future`` (and a waiter entry) only if its reply cannot leave before
``submit`` returns; a reply the rule releases while ``submit`` is still handling its request in place
is handed back as an ``Answered``, a completion born done (the steady heartbeat's case: no future,
no waiter, no callback). Which of the two a caller gets follows from the rule, never the reverse.

Batching is the runtime's: the task drains its queue in batches and hands each to the pure core as
one call (``core.handle_batch(events, now_ms)``: one Result = one log entry per event; the core
shares work across the batch, e.g. one KIP-848 target assignment per group, see
``core/consumer/heartbeat.py``). An idle shard (its task waits with nothing queued) handles a
submitted request at once, in place, as a batch of one: no queue, no task wake-up, no loop turn.
Both paths run the same ``_handle``: append each Result's records as one entry, arm its timers, pass
its events to the observers, release its replies by the rule above. Replies wait by the offset of
the entry they need, and the sink's one call per write or fsync (``watch``: every entry below
``durable_end`` is durable) releases all those it covers, with no future per entry: a join makes
every member of its group write an entry. Handling never waits for the disk: while batch N is
being fsynced the shard already handles batch N+1 (so ``log.flush.policy=interval`` costs latency,
not throughput).

The same rule holds for what the edges decide with: state that the connections read outside the
shard (ACLs, SCRAM credentials: ``core.publishers``) changes in that view only when the entry
carrying the change is durable (``_settle`` asks each publisher for a ``mark()`` after appending and
calls ``publish(mark)`` once the entry is durable, before the entry's replies are released).

Timer firings and catalog changes enter through the same queue, never touching state directly.
While ``loaded`` is false (the log is being replayed) adapters answer COORDINATOR_LOAD_IN_PROGRESS.
A core bug fails the requests it concerns (``Result.failure``) and the shard keeps serving.
A write the log refuses is not fatal: ``runtime/shard_reload.py`` says what the shard does then.
The types this runtime speaks with the node (``Completion``, ``Answered``, ``LogSink``) are
``runtime/shard_contract.py``'s.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import itertools
from collections.abc import Callable, Hashable, Sequence
from time import perf_counter, perf_counter_ns
from typing import Any, cast

from ..core.record_codec import Record, group_of
from ..core.requests import TimerFired
from ..core.result import Reply, Result
from ..core.shard import CoordinatorShard
from ..logging import get_logger
from ..recordlog.errors import WriteRefused
from .clock import Timers, now_ms
from .kafka_metrics import STATS
from .shard_contract import Answered, Completion, LogSink, Observer, Reload, Unload
from .shard_reload import RELOAD_INTERVAL_S, RELOAD_LOG_INTERVAL_S, RefusedWrites

log = get_logger("coordinator.shard")

_queue_time = STATS.queue_ms.append
_processing_time = STATS.processing_ms.append

_NOT_CARRIED, _GROUP_ENTRY, _OWN_ENTRY = 0, 1, 2
"""How the request `submit` handles in place waits for the log (`ShardRuntime._in_place_carried`)."""


def _no_timers(key: Hashable, deadline_ms: int | None) -> None:
    """`_arm` until `start` gives the shard its timers: nothing to arm yet."""


def _done(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class ShardRuntime(RefusedWrites):
    def __init__(self, core: CoordinatorShard, sink: LogSink, *, clock: Callable[[], int] = now_ms,
                 on_fatal: Callable[[BaseException], None] | None = None, reload: Reload | None = None) -> None:
        self.core = core
        self.sink = sink
        self._clock = clock
        self._on_fatal = on_fatal
        self._reload_core = reload
        self._reload_due = False
        """The disk refused entries: the core must be replaced before anything else is handled."""
        self._last_reload = -RELOAD_INTERVAL_S
        self._reload_logged = -RELOAD_LOG_INTERVAL_S
        self._writer_id: str | None = None
        """This owner's `CoordinatorEpoch` writer id, until that record is durable (a reload
        writes it again if the disk refused it)."""
        self.reloads = 0
        self._queue: collections.deque[Any] = collections.deque()
        self._queued_at: collections.deque[float] = collections.deque()
        """perf_counter() of each queued item's arrival, in queue order (event-queue-time-ms)."""
        self._waiters: dict[int, tuple[asyncio.Future[Any], Any]] = {}
        """ref -> (the submitter's future, its request)."""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._refs = itertools.count(1)
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._timers: Timers | None = None
        self._arm: Callable[[Hashable, int | None], None] = _no_timers
        self._observers: list[Observer] = []
        self._idle = False
        """The task waits for work with nothing queued: a request may be handled at once."""
        self._in_place: Any = None
        """The request `submit` is handling in place, while it does."""
        self._in_place_carried = _NOT_CARRIED
        """Whether that request's reply waits for a log entry (it will be released: no clean-up
        needed if its requester goes away): `_NOT_CARRIED`, `_GROUP_ENTRY` (a record-less reply
        waiting for its group's) or `_OWN_ENTRY` (waiting for its own records')."""
        self._answer: Completion | None = None
        """That request's outcome if it got one during the call: an `Answered`, or a failed future."""
        self._unflushed: int | None = None
        """The offset of the last entry appended, until it is seen durable (None: every entry this
        shard appended is durable; the shard is its sink's only writer)."""
        self._group_points: dict[str, int] = {}
        """Per group: the offset of the last entry that touched it."""
        self._barrier: int | None = None
        """The offset of the last entry with a coordinator-wide record: every reply waits for it."""
        self._carried: collections.deque[tuple[int, Sequence[Reply] | None, Callable[[], None] | None]] = \
            collections.deque()
        """What waits for an entry to be durable, by its offset, mostly in log order: replies, and
        publications (`_settle`). `_durable` releases the ones the sink's durable end has passed:
        one call per write and fsync, not a future per entry (a join makes every member of its
        group write an entry). A record-less reply waiting for an older entry may queue behind a
        newer one: it can only leave later, never earlier."""
        self.loaded = False

    # -- lifecycle ----------------------------------------------------------------------------
    async def start(self, writer_id: str | None = None) -> None:
        """Arm timers and write the new owner's `CoordinatorEpoch` (durably), then serve."""
        loop = self._loop = asyncio.get_running_loop()
        self._timers = Timers(loop, self._timer_fired, self._clock)
        self._arm = self._timers.arm
        if self._reload_core is None:
            self.sink.watch(self._durable)  # a refused write is fatal (the sink's default)
        else:
            self.sink.watch(self._durable, self._refused)
        self._writer_id = writer_id
        self._on_loaded()
        point = self.sink.durable_point()
        if point is not None:
            with contextlib.suppress(WriteRefused):  # a full disk: `_run` reloads first, epoch again
                await point
        self.loaded = not self._reload_due
        self._task = loop.create_task(self._run(), name="shard")

    def _on_loaded(self) -> None:
        """The core's `on_loaded`, writing this owner's `CoordinatorEpoch` until it is durable."""
        writer_id = self._writer_id
        self._settle(self.core.on_loaded(self._clock(), writer_id=writer_id))
        if writer_id is not None:
            if self._unflushed is None:
                self._writer_id = None
            else:  # dropped with the entry if the disk refuses it, and the next reload writes it
                self._carried.append((self._unflushed, None, self._epoch_written))

    def _epoch_written(self) -> None:
        self._writer_id = None

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self._timers is not None:
            self._timers.cancel_all()
        for future, _ in self._waiters.values():
            if not future.done():
                future.cancel()
        self._waiters.clear()
        self._carried.clear()

    async def unload(self) -> None:
        """Hand the shard back: answer parked requests (NOT_COORDINATOR), cancel timers.

        Goes through the queue so it is ordered after every request already submitted."""
        if self._task is None:
            return
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._idle = False
        self._queue.append(Unload(done))
        self._queued_at.append(perf_counter())
        self._wake.set()
        await done

    def add_observer(self, observer: Observer) -> None:
        self._observers.append(observer)

    # -- requests -----------------------------------------------------------------------------
    @property
    def idle(self) -> bool:
        """The shard task waits for work with nothing queued: `submit` handles a request at once."""
        return self._idle

    # A property over `_in_place_carried`, not an attribute of its own: with a 30th instance
    # attribute this class lost CPython's shared-key layout and every steady heartbeat cost ~1 k
    # instructions more (BENCHMARKS.md, issue 31 point 5). A new field here should replace one.
    @property
    def written(self) -> bool:
        """Whether the future the last `submit` returned waits only for the entry of its own
        records: its reply is decided, and the connection may serve its next request meanwhile
        (`api.registry.Deferred`), whose records can then share the fsync. A record-less reply
        waiting for its group's entry (a member's heartbeat after a join) is not: the requests
        behind it on its connection are most likely its group's too, and answered in place once
        that entry is durable they cost less than each waiting for it."""
        return self._in_place_carried == _OWN_ENTRY

    def new_ref(self) -> int:
        return next(self._refs)

    def submit(self, request: Any) -> Completion:
        """Hand the shard a core request; the completion resolves with its response when the reply
        may leave (see the module docstring). Cancel it if the requester goes away."""
        if self._idle:
            _queue_time(0.0)
            self._idle = False  # anything submitted meanwhile (by an observer) queues behind it
            self._in_place = request
            self._in_place_carried = _NOT_CARRIED
            self._answer = None
            try:
                self._handle((request,))  # in place: a batch of one
            finally:
                self._in_place = None
                self._idle = not self._queue
            answer = self._answer
            if answer is not None:
                self._answer = None
                return answer
            # Not released yet (parked, or waiting for the log): a future, resolved by the release.
            carried = self._in_place_carried != _NOT_CARRIED
        else:
            carried = False
            self._in_place_carried = _NOT_CARRIED  # for `written`: this request was not handled in place
            self._queue.append(request)
            self._queued_at.append(perf_counter())
            self._wake.set()
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        ref = request.ref
        self._waiters[ref] = (future, request)
        if not carried:
            # A request whose connection went away is cancelled; forget it so parked refs never
            # leak. (A reply waiting for the log is released anyway, and its waiter with it.)
            future.add_done_callback(lambda f: self._waiters.pop(ref, None) if f.cancelled() else None)
        return future

    def post(self, event: Any) -> None:
        """Queue an event that has no reply (timer firings, catalog changes)."""
        self._idle = False  # later requests queue behind it
        self._queue.append(event)
        self._queued_at.append(perf_counter())
        self._wake.set()

    @property
    def queue_size(self) -> int:
        return len(self._queue)

    def _timer_fired(self, key: Hashable, deadline_ms: int) -> None:
        self.post(TimerFired(key, deadline_ms))  # type: ignore[arg-type]

    # -- the loop -----------------------------------------------------------------------------
    async def _run(self) -> None:
        while True:
            if self._reload_due:
                try:
                    await self._reload()
                except Exception as exc:  # the log cannot be read back: no state to serve from
                    self._fatal(exc)
                    return
            self._idle = not self._queue
            await self._wake.wait()
            self._idle = False
            self._wake.clear()
            while self._queue and not self._reload_due:
                batch = list(self._queue)
                self._queue.clear()
                taken = perf_counter()
                STATS.queue_ms.extend([(taken - t) * 1000 for t in self._queued_at])
                self._queued_at.clear()
                start = 0
                for index, event in enumerate(batch):
                    if isinstance(event, Unload):
                        self._handle(batch[start:index])
                        self._unload(event)
                        start = index + 1
                self._handle(batch[start:])
                # Let the committer and the connections run before the next batch.
                await asyncio.sleep(0)

    def _handle(self, events: Sequence[Any]) -> None:
        """One batch through the core; every Result through the same append-and-release path."""
        count = len(events)
        if not count:
            return
        started = perf_counter_ns()  # the int clock: cheaper to read than perf_counter()
        results = self.core.handle_batch(events, self._clock())
        if count == 1:  # the common case (an idle shard handles in place): no repeat object, no zip
            _processing_time((perf_counter_ns() - started) / 1e6)
            result = results[0]
            if result.failure is not None:
                self._core_failed(events[0], result)
            self._settle(result)
            return
        STATS.processing_ms.extend(itertools.repeat((perf_counter_ns() - started) / 1e6 / count, count))
        for event, result in zip(events, results, strict=True):
            if result.failure is not None:
                self._core_failed(event, result)
            self._settle(result)

    def _unload(self, unload: Unload) -> None:
        self.loaded = False
        self._settle(self.core.on_unloaded(self._clock()))
        point = self.sink.durable_point()
        if point is None:
            unload.done.set_result(None)
        else:
            point.add_done_callback(lambda p: self._after(p, lambda: _done(unload.done)))

    def _settle(self, result: Result) -> None:
        """Append the Result's records as one entry, arm its timers, tell the observers, and release
        its replies by the one release rule."""
        records = result.records
        offset = self._append(records) if records else None
        if records:
            for publisher in self.core.publishers:  # before the replies: they see what they caused
                mark = publisher.mark()
                if mark is not None:
                    publish = functools.partial(publisher.publish, mark)
                    if offset is None:
                        publish()
                    else:
                        self._carried.append((offset, None, publish))
        if result.timers:
            arm = self._arm
            for op in result.timers:
                arm(op.key, op.deadline_ms)
        if result.events:
            for event in result.events:
                for observer in self._observers:
                    observer(event)
        replies = result.replies
        if not replies:
            return
        in_place = self._in_place
        if records:
            if offset is None:
                self._deliver(replies)
                return
            self._carried.append((offset, replies, None))
            if in_place is not None:
                ref = in_place.ref
                self._in_place_carried = _OWN_ENTRY if any(reply.ref == ref for reply in replies) else _NOT_CARRIED
            return
        for reply in replies:  # record-less: each waits for its own group's entries
            if in_place is not None and reply.ref == in_place.ref:
                if self._unflushed is None:  # every entry is durable: `_deliver` inlined (steady heartbeats)
                    self._answer = Answered(reply.response)
                    continue
                offset = self._pending_point(getattr(in_place, "group_id", None))
                self._in_place_carried = _NOT_CARRIED if offset is None else _GROUP_ENTRY
            else:
                waiter = self._waiters.get(reply.ref)
                offset = self._pending_point(None if waiter is None else getattr(waiter[1], "group_id", None))
            self._release(offset, (reply,))

    def _append(self, records: list[Record]) -> int | None:
        """One log entry; returns its offset (None if already durable)."""
        sink = self.sink
        encode = self.core.codec.encode_record  # the shard's codec: every type it was given
        offset = sink.append([encode(r) for r in records], self._clock())
        if offset < sink.durable_end:
            return None
        self._unflushed = offset
        for record in records:
            group = group_of(record.key)
            if group is None:
                self._barrier = offset
            else:
                self._group_points[group] = offset
        return offset

    def _pending_point(self, group_id: str | None) -> int | None:
        """The entry a record-less reply about `group_id` (None: several groups or none) must wait
        for; None if it may leave now."""
        unflushed = self._unflushed
        if unflushed is None:  # everything appended is durable (known without asking the sink)
            return None
        end = self.sink.durable_end
        if unflushed < end:  # everything appended is durable
            self._unflushed = None
            if self._group_points:
                self._group_points.clear()
            self._barrier = None
            return None
        if group_id is None:
            return unflushed
        own = self._group_points.get(group_id)
        barrier = self._barrier
        if barrier is not None and (own is None or barrier > own):
            own = barrier
        if own is None or own < end:
            return None
        return own

    def _release(self, offset: int | None, replies: Sequence[Reply]) -> None:
        if offset is None:
            self._deliver(replies)
        else:
            self._carried.append((offset, replies, None))

    def _durable(self, durable_end: int) -> None:
        """The sink made every entry below `durable_end` durable: release what waited for them."""
        carried = self._carried
        while carried and carried[0][0] < durable_end:
            _, replies, publish = carried.popleft()
            if publish is not None:
                publish()
            elif replies is not None:
                self._deliver(replies)

    def _after(self, point: asyncio.Future[Any], then: Callable[[], None]) -> None:
        if not point.cancelled() and isinstance(point.exception(), WriteRefused):
            then()  # what the refused entries carried was answered by `_refused`
            return
        if point.cancelled() or point.exception() is not None:
            self._fatal(point.exception() or RuntimeError("durable point cancelled"))
            return
        then()

    def _deliver(self, replies: Sequence[Reply]) -> None:
        waiters = self._waiters
        in_place = self._in_place
        for reply in replies:
            if in_place is not None and reply.ref == in_place.ref:
                self._answer = Answered(reply.response)  # `submit` hands it back
                continue
            waiter = waiters.pop(reply.ref, None)
            if waiter is not None and not waiter[0].done():
                waiter[0].set_result(reply.response)

    def _core_failed(self, event: Any, result: Result) -> None:
        log.error("core_handler_failed", event_type=type(event).__name__, exc_info=result.failure)
        in_place = self._in_place
        for ref in result.failed:
            if in_place is not None and ref == in_place.ref:
                failed: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
                failed.set_exception(cast(Exception, result.failure))
                self._answer = failed
                continue
            waiter = self._waiters.pop(ref, None)
            if waiter is not None and not waiter[0].done():
                waiter[0].set_exception(cast(Exception, result.failure))

    def _fatal(self, exc: BaseException) -> None:
        log.critical("record_log_failed", error=repr(exc))
        if self._on_fatal is not None:
            self._on_fatal(exc)

