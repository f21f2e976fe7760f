"""Wall-clock time and timers for the shard, in int milliseconds.

The core never reads a clock; the runtime passes `now_ms` in and arms the timers the core asks
for. `Timers` keeps at most one asyncio timer handle per key: arming a key again replaces it, a
`None` deadline cancels it. A firing posts the key and its deadline back to the shard, which ignores
it if the deadline is no longer current (so races are harmless).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Hashable


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class Timers:
    def __init__(self, loop: asyncio.AbstractEventLoop, fire: Callable[[Hashable, int], None],
                 clock: Callable[[], int] = now_ms) -> None:
        self._loop = loop
        self._fire = fire
        self._clock = clock
        self._handles: dict[Hashable, asyncio.TimerHandle] = {}

    def __len__(self) -> int:
        return len(self._handles)

    def arm(self, key: Hashable, deadline_ms: int | None) -> None:
        handle = self._handles.pop(key, None)
        if handle is not None:
            handle.cancel()
        if deadline_ms is None:
            return
        delay = max(0.0, (deadline_ms - self._clock()) / 1000)
        self._handles[key] = self._loop.call_later(delay, self._expired, key, deadline_ms)

    def _expired(self, key: Hashable, deadline_ms: int) -> None:
        self._handles.pop(key, None)
        self._fire(key, deadline_ms)

    def cancel_all(self) -> None:
        for handle in self._handles.values():
            handle.cancel()
        self._handles.clear()
