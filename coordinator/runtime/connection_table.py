"""The server's open client connections: who may stay, and who has been idle too long.

- `admit(connection)` counts a new connection in, or names the limit it would break: Kafka's
  `max.connections` over every connection, `max.connections.per.ip` (with its per-address
  overrides) per client address. The connection closes itself when refused.
- `release(connection)` counts it out again (once; True the first time), and tells every
  listener in `closed` its connection id (a feature that keeps state per connection, as share
  sessions are, forgets it there).
- `request_bytes` is the budget every connection's held request bytes count against
  (`queued.max.request.bytes`, `runtime/request_bytes.py`).
- `close_idle()` runs for the server's life: every tenth of `connections.max.idle.ms` it looks at
  every connection, and one with no traffic and no request in flight for ten looks in a row is
  closed (Kafka's idle expiry; a parked JoinGroup is waiting, not idle).
- Iterating gives the connections open now (a copy: a connection may close meanwhile).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Protocol

from .request_bytes import RequestBytes

if TYPE_CHECKING:
    from .connection import KafkaConnection

_SWEEPS = 10
"""Looks per `connections.max.idle.ms`: an idle connection closes within 1.1 times the setting."""


class ConnectionLimits(Protocol):
    """The per-address and idle limits (`security.settings.ConnectionLimits` from the settings)."""

    @property
    def connections_max_idle_ms(self) -> int: ...

    def limit_for(self, host: str) -> int: ...


class ConnectionTable:
    def __init__(self, max_connections: int, limits: ConnectionLimits, queued_max_request_bytes: int = -1) -> None:
        self._max_connections = max_connections
        self._limits = limits
        self.request_bytes = RequestBytes(queued_max_request_bytes)
        self._open: set[KafkaConnection] = set()
        self._per_host: dict[str, int] = {}
        self.closed: list[Callable[[int], None]] = []
        """Called with the id of every connection that closes (once each, from `release`)."""

    def __iter__(self) -> Iterator[KafkaConnection]:
        return iter(list(self._open))

    def __len__(self) -> int:
        return len(self._open)

    def admit(self, connection: KafkaConnection) -> tuple[str, int] | None:
        """None when the connection may stay (it is counted from now on), else the limit it breaks
        (key, value)."""
        if len(self._open) >= self._max_connections:
            return "max.connections", self._max_connections
        host = connection.client_host
        per_ip = self._limits.limit_for(host)
        if self._per_host.get(host, 0) >= per_ip:
            return "max.connections.per.ip", per_ip
        self._open.add(connection)
        self._per_host[host] = self._per_host.get(host, 0) + 1
        return None

    def release(self, connection: KafkaConnection) -> bool:
        if connection not in self._open:
            return False
        self._open.remove(connection)
        host = connection.client_host
        left = self._per_host.get(host, 1) - 1
        if left:
            self._per_host[host] = left
        else:
            self._per_host.pop(host, None)
        for listener in self.closed:
            listener(connection.connection_id)
        return True

    async def close_idle(self) -> None:
        idle_ms = self._limits.connections_max_idle_ms
        while True:
            await asyncio.sleep(idle_ms / _SWEEPS / 1000)
            for connection in list(self._open):
                if connection.active or connection.waiting:
                    connection.active = False
                    connection.idle_sweeps = 0
                    continue
                connection.idle_sweeps += 1
                if connection.idle_sweeps >= _SWEEPS:
                    connection.close_idle(idle_ms)
