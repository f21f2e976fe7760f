"""How a shard runtime survives a write its log refuses (`ShardRuntime`'s methods, a mixin): it
answers what depended on the refused entries and replaces its core by one loaded from the log.

A write the disk refuses (full: the sink's ``on_refused(first_offset, code)``; the log has cut the
refused bytes off and rewound) is not fatal. Kafka answers a coordinator append that failed with
KAFKA_STORAGE_ERROR as NOT_COORDINATOR (``GroupCoordinatorService``'s normalisation), and reverts
its in-memory state to the last written offset; this shard does the same in two steps: every
reply that waited for a refused entry, and every request parked in the core, is answered
NOT_COORDINATOR (the core's own error response for the request), publications of refused entries
are dropped; then the core is replaced by one loaded from the log (``reload``, given by the
server: the state of the entries that were written, exactly what clients were told), with fresh
timers, at most once per ``RELOAD_INTERVAL_S``. Meanwhile ``loaded`` is false (adapters answer
COORDINATOR_LOAD_IN_PROGRESS, retriable) and queued requests wait for the new core. Without
``reload`` a refusal is fatal. Any other log failure (a failed fsync) is fatal: ``on_fatal`` is
called and the process exits (fail-stop, no undo). The log on the upstream cluster refuses a
round the same way (a fenced or failed transaction; COORDINATOR_NOT_AVAILABLE when the cluster
could not be reached), and ``reload_from_log`` rebuilds the core without a refusal when the log
partitions it holds change (``clusterlog/owner.py``).

The state is the runtime's (declared here for the type checker only: `ShardRuntime` must not
grow an instance attribute, see its `__init__`).
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable, Sequence
from time import perf_counter
from typing import TYPE_CHECKING, Any

from protocol.errors import ErrorCode

from ..core.result import Reply
from ..core.shard import CoordinatorShard
from ..logging import get_logger
from .clock import Timers
from .shard_contract import LogSink, Reload, Unload

log = get_logger("coordinator.shard")

RELOAD_INTERVAL_S = 0.5
"""Reloads after refused writes are at least this far apart: a disk that stays full costs a replay
of the log at most twice a second, however many clients retry their writes."""

RELOAD_LOG_INTERVAL_S = 10.0
"""At most one `shard_reloaded` line this often (it carries the count of reloads so far)."""


class RefusedWrites:
    """`ShardRuntime`'s methods for a refused write and a reload of its core from the log."""

    core: CoordinatorShard
    sink: LogSink
    loaded: bool
    reloads: int
    _reload_core: Reload | None
    _reload_due: bool
    _last_reload: float
    _reload_logged: float
    _idle: bool
    _queue: collections.deque[Any]
    _queued_at: collections.deque[float]
    _waiters: dict[int, tuple[asyncio.Future[Any], Any]]
    _timers: Timers | None
    _task: asyncio.Task[None] | None
    _wake: asyncio.Event
    _unflushed: int | None
    _group_points: dict[str, int]
    _barrier: int | None
    _carried: collections.deque[tuple[int, Sequence[Reply] | None, Callable[[], None] | None]]

    if TYPE_CHECKING:
        def _on_loaded(self) -> None: ...

    def _refused(self, first_offset: int, code: ErrorCode = ErrorCode.NOT_COORDINATOR) -> None:
        """The log refused the entries from `first_offset` on (see the module docstring): answer
        what depended on them (`code`), forget what the core holds in memory only, and reload."""
        self.loaded = False
        self._idle = False  # `submit` queues: nothing is handled before the new core
        self._reload_due = True
        kept: collections.deque[tuple[int, Sequence[Reply] | None, Callable[[], None] | None]] = \
            collections.deque()
        refused: list[int] = []
        for item in self._carried:
            if item[0] < first_offset:
                kept.append(item)  # written: it becomes durable as usual
            elif item[1] is not None:
                refused.extend(reply.ref for reply in item[1])
        self._carried = kept
        waiting = {reply.ref for _, replies, _ in kept if replies is not None for reply in replies}
        self._drop_events()
        queued = {event.ref for event in self._queue if not isinstance(event, Unload)}
        # Parked requests (a join waiting for its group) live in the core being replaced.
        refused.extend(ref for ref in self._waiters if ref not in waiting and ref not in queued)
        for ref in refused:
            waiter = self._waiters.pop(ref, None)
            if waiter is not None and not waiter[0].done():
                waiter[0].set_result(self.core.error_response(waiter[1], code))
        if self._timers is not None:
            self._timers.cancel_all()
        # What is still unflushed was written (below `first_offset`): record-less replies wait for
        # all of it, whatever their group (the per-group points may name refused entries).
        last = first_offset - 1
        self._unflushed = last if last >= self.sink.durable_end else None
        self._group_points.clear()
        self._barrier = self._unflushed
        self._wake.set()

    def reload_from_log(self) -> None:
        """Replace the core by one loaded from the log, nothing refused: the log partitions this
        core holds changed (the cluster log's ownership, `clusterlog/owner.py`). Replies waiting for
        entries already appended still wait for them; requests parked in the core are answered
        NOT_COORDINATOR and timers are re-armed by the new core, as after a takeover."""
        if self._reload_core is None or self._task is None:
            return
        self._refused(self.sink.durable_end if self._unflushed is None else self._unflushed + 1)

    def _drop_events(self) -> None:
        """Forget queued timer firings and topic changes (keep requests and unloads): the new core
        arms its own timers and starts from a topic snapshot taken after them."""
        queue = [(event, at) for event, at in zip(self._queue, self._queued_at, strict=True)
                 if isinstance(event, Unload) or hasattr(event, "ref")]
        self._queue = collections.deque(event for event, _ in queue)
        self._queued_at = collections.deque(at for _, at in queue)

    async def _reload(self) -> None:
        """Replace the core by one loaded from the log (after refused writes)."""
        assert self._reload_core is not None
        loop = asyncio.get_running_loop()
        wait = self._last_reload + RELOAD_INTERVAL_S - loop.time()
        if wait > 0:
            await asyncio.sleep(wait)
        self._reload_due = False
        started = loop.time()
        core, first = await self._reload_core()
        self._drop_events()  # queued while the log was read: older than the snapshot in `first`
        self._last_reload = loop.time()
        self.core = core
        self.reloads += 1
        for event in reversed(first):
            self._queue.appendleft(event)
            self._queued_at.appendleft(perf_counter())
        if self._last_reload - self._reload_logged >= RELOAD_LOG_INTERVAL_S:  # a full disk: every write
            log.info("shard_reloaded", reason="log write refused", seconds=round(self._last_reload - started, 3),
                     reloads=self.reloads)
            self._reload_logged = self._last_reload
        self._on_loaded()
        self.loaded = True
        self._wake.set()
