"""Log lines that would repeat while the upstream is away, rate-limited: one line per kind per
interval, carrying how many were held back since the previous one.

An upstream that is down makes the same thing fail over and over (every metadata retry, every
mirror round, every client connection); one line a second per failure would bury everything else
in the log. The first line of a kind leaves at once, so an outage is seen when it starts.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

INTERVAL_S = 10.0


class RateLimitedLog:
    def __init__(self, logger: Any, interval_s: float = INTERVAL_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._log = logger
        self._interval_s = interval_s
        self._clock = clock
        self._last: dict[str, float] = {}
        self._held: dict[str, int] = {}

    def warning(self, event: str, **fields: Any) -> bool:
        """Log `event` unless a line of the same kind left less than the interval ago (then it is
        counted, and the next line says how many were held back). True when it was logged."""
        now = self._clock()
        last = self._last.get(event)
        if last is not None and now - last < self._interval_s:
            self._held[event] = self._held.get(event, 0) + 1
            return False
        self._last[event] = now
        held = self._held.pop(event, 0)
        if held:
            fields["repeated"] = held
        self._log.warning(event, **fields)
        return True

    def reset(self, event: str) -> int:
        """The condition behind `event` is over: its next line leaves at once. Returns how many
        were held back since the last line."""
        self._last.pop(event, None)
        return self._held.pop(event, 0)
