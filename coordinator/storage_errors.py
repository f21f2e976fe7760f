"""Storage failures as the operator sees them: one log line per failure kind per interval.

A full disk fails every write that reaches it: every Produce, every group change. Logging each one
(with its traceback, as an unexpected exception would be) buries everything else and costs a
line per request. `StorageLog` writes the first failure of a kind (say `("produce", "ENOSPC")`)
at once, then at most one line per kind per `interval_s`, carrying how many were not logged in
between, and no traceback: the kind and the error's text say what happened.

`error_kind(exc)` names an `OSError` by its errno (`ENOSPC`, `EDQUOT`, `EIO`), the word both the
log and the metrics use.
"""

from __future__ import annotations

import errno
import threading
import time
from collections.abc import Callable
from typing import Any

from .logging import get_logger

DEFAULT_INTERVAL_S = 10.0


def error_kind(exc: BaseException) -> str:
    """`ENOSPC` for a full disk, the errno's name for another OSError, else the type's name."""
    if isinstance(exc, OSError) and exc.errno is not None:
        return errno.errorcode.get(exc.errno, str(exc.errno))
    return type(exc).__name__


class StorageLog:
    """Rate-limited warning lines for storage failures, per (where, kind). Thread-safe: the
    record log reports from its event loop, the data plane from its own."""

    def __init__(self, name: str, *, interval_s: float = DEFAULT_INTERVAL_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._log = get_logger(name)
        self._interval_s = interval_s
        self._clock = clock
        self._mutex = threading.Lock()
        self._last: dict[tuple[str, str], float] = {}
        self._suppressed: dict[tuple[str, str], int] = {}

    def failed(self, event: str, where: str, exc: BaseException, **fields: Any) -> bool:
        """Report one failure of `where` (e.g. "produce"); returns whether a line was written."""
        kind = error_kind(exc)
        key = (where, kind)
        now = self._clock()
        with self._mutex:
            last = self._last.get(key)
            if last is not None and now - last < self._interval_s:
                self._suppressed[key] = self._suppressed.get(key, 0) + 1
                return False
            self._last[key] = now
            suppressed = self._suppressed.pop(key, 0)
        self._log.warning(event, where=where, kind=kind, error=str(exc), suppressed=suppressed, **fields)
        return True
