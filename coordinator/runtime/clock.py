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
    """Deadlines by key, with as few event-loop timers as possible.

    Heartbeats re-arm their member's session deadline on every request, always later. Cancelling and
    creating an asyncio timer each time cost ~10 % of a steady heartbeat, so a later deadline only
    updates a table; the timer already scheduled fires at the earlier time, sees the new deadline
    and re-schedules itself once. An earlier deadline replaces the scheduled timer.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, fire: Callable[[Hashable, int], None],
                 clock: Callable[[], int] = now_ms) -> None:
        self._loop = loop
        self._fire = fire
        self._clock = clock
        self._deadlines: dict[Hashable, int] = {}
        self._handles: dict[Hashable, tuple[asyncio.TimerHandle, int]] = {}

    def __len__(self) -> int:
        return len(self._deadlines)

    def arm(self, key: Hashable, deadline_ms: int | None) -> None:
        if deadline_ms is None:
            self._deadlines.pop(key, None)
            scheduled = self._handles.pop(key, None)
            if scheduled is not None:
                scheduled[0].cancel()
            return
        self._deadlines[key] = deadline_ms
        scheduled = self._handles.get(key)
        if scheduled is not None:
            if scheduled[1] <= deadline_ms:
                return  # fires first, then finds the later deadline
            scheduled[0].cancel()
        self._schedule(key, deadline_ms)

    def _schedule(self, key: Hashable, deadline_ms: int) -> None:
        delay = max(0.0, (deadline_ms - self._clock()) / 1000)
        self._handles[key] = (self._loop.call_later(delay, self._expired, key, deadline_ms), deadline_ms)

    def _expired(self, key: Hashable, scheduled_ms: int) -> None:
        self._handles.pop(key, None)
        deadline = self._deadlines.get(key)
        if deadline is None:
            return
        if deadline > scheduled_ms and deadline > self._clock():
            self._schedule(key, deadline)
            return
        del self._deadlines[key]
        self._fire(key, deadline)

    def cancel_all(self) -> None:
        for handle, _ in self._handles.values():
            handle.cancel()
        self._handles.clear()
        self._deadlines.clear()
