"""One worker thread for a log's disk calls, answered on the event loop: `DiskThread`.

The record log's committer and the data plane's flusher each own one, so that their writes and
fsyncs stay in order and nothing else (compaction, other executor work) delays an fsync that
replies wait on.

`run(fn, *args)` queues `fn(*args)` for the thread and returns an asyncio future of its result
(or exception); calls run one at a time, in the order they were queued. A plain thread and queue
rather than an executor: the thread hands each result back with one `call_soon_threadsafe`, where
`loop.run_in_executor` chains a `concurrent.futures` future to an asyncio one (about 30 µs more of
CPU per write and fsync round on this project's benchmark machine, most of a commit round's Python
cost). `stop()` lets the queued calls finish, then ends the thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

_Job = tuple[asyncio.AbstractEventLoop, asyncio.Future[Any], Callable[..., Any], tuple[Any, ...]]


class DiskThread:
    def __init__(self, name: str) -> None:
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._work, name=name, daemon=True)
        self._started = False

    def run(self, fn: Callable[..., T], *args: Any) -> asyncio.Future[T]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        if not self._started:
            self._started = True
            self._thread.start()
        self._jobs.put((loop, future, fn, args))
        return future

    def stop(self) -> None:
        """End the thread once the calls queued so far have run (blocks until then)."""
        if self._started:
            self._jobs.put(None)
            self._thread.join()
            self._started = False

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            loop, future, fn, args = job
            try:
                result = fn(*args)
            except BaseException as exc:  # the loop's side decides (the committer fails stop)
                _answer(loop, future, exc, error=True)
            else:
                _answer(loop, future, result, error=False)


def _answer(loop: asyncio.AbstractEventLoop, future: asyncio.Future[Any], value: Any, *, error: bool) -> None:
    def settle() -> None:
        if future.done():  # the awaiting task was cancelled
            return
        if error:
            future.set_exception(value)
        else:
            future.set_result(value)

    with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
        loop.call_soon_threadsafe(settle)
