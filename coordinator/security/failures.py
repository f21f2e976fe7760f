"""Failed authentications as Kafka's socket server treats them: slowed down, and not one log line each.

- `delay` is `connection.failed.authentication.delay.ms` in seconds (Kafka's default 100 ms): the
  connection whose authentication failed holds its answer and its close that long, reading nothing
  meanwhile (`runtime/connection.py` applies it). A client retrying a wrong password in a loop
  (librdkafka reconnects within 50 ms) gets one try per delay per connection, not as many as it can send.
- `failed(host, ...)` counts one failure from a client address. The first failure of an address is
  logged at once (`authentication_failed`, count 1); later ones are only counted, and when the
  interval (`LOG_INTERVAL_S`) that started with that line ends, one line per address reports how
  many came since (with the last reason); an address with no failure in a whole interval is
  forgotten. So a password-guessing loop costs at most one line per address and interval, and the
  table holds only the addresses that failed within the last interval.
- `close()` (the server stopping) writes the counts not logged yet, so no failure goes unreported.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from ..logging import get_logger

log = get_logger("coordinator.security.failures")

LOG_INTERVAL_S = 60.0
"""One line per client address and minute at most, whatever the rate of failures."""


@dataclass(slots=True)
class _Address:
    count: int
    """Failures since this address's last line."""
    listener: str
    mechanism: str
    detail: str
    timer: asyncio.TimerHandle | None = None


class AuthenticationFailures:
    def __init__(self, delay_ms: int, interval_s: float = LOG_INTERVAL_S) -> None:
        self.delay = delay_ms / 1000
        self.interval = interval_s
        self._addresses: dict[str, _Address] = {}

    def __len__(self) -> int:
        """Addresses with a failure in the current interval."""
        return len(self._addresses)

    def failed(self, host: str, listener: str, mechanism: str, detail: str) -> None:
        entry = self._addresses.get(host)
        if entry is not None:
            entry.count += 1
            entry.listener, entry.mechanism, entry.detail = listener, mechanism, detail
            return
        entry = self._addresses[host] = _Address(1, listener, mechanism, detail)
        self._report(host, entry)

    def close(self) -> None:
        for host, entry in list(self._addresses.items()):
            if entry.timer is not None:
                entry.timer.cancel()
            if entry.count:
                self._line(host, entry)
        self._addresses.clear()

    def _report(self, host: str, entry: _Address) -> None:
        """Log what came since the last line, then look again one interval later."""
        if not entry.count:
            del self._addresses[host]
            return
        self._line(host, entry)
        entry.count = 0
        entry.timer = asyncio.get_running_loop().call_later(self.interval, self._report, host, entry)

    def _line(self, host: str, entry: _Address) -> None:
        log.warning("authentication_failed", host=host, count=entry.count, interval_s=self.interval,
                    listener=entry.listener, mechanism=entry.mechanism or None, detail=entry.detail)
