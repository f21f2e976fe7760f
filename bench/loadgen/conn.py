"""A pipelined Kafka connection for the load generator.

Any number of requests may be outstanding; responses come back in request order (a Kafka broker
answers one request per connection at a time, in order), so a deque of (correlation id, send time,
callback) pairs them up. Sends made during one loop iteration leave in one write.
"""

from __future__ import annotations

import asyncio
import collections
import struct
import time
from collections.abc import Callable

from .wire import Template

Callback = Callable[[bytes, int], None]
"""callback(response payload without the size prefix, latency in ns)."""

_SIZE = struct.Struct(">i")
_perf_ns = time.perf_counter_ns


class ConnectionLost(Exception):
    pass


class Connection(asyncio.Protocol):
    def __init__(self) -> None:
        self._buf = bytearray()
        self._pending: collections.deque[tuple[int, int, Callback]] = collections.deque()
        self._out: list[bytes] = []
        self._cid = 0
        self._flush_scheduled = False
        self._transport: asyncio.Transport | None = None
        self._loop = asyncio.get_running_loop()
        self.lost: asyncio.Future[None] = self._loop.create_future()
        self.sent = 0

    @classmethod
    async def open(cls, host: str, port: int) -> Connection:
        loop = asyncio.get_running_loop()
        _, protocol = await loop.create_connection(cls, host, port)
        return protocol

    # -- asyncio.Protocol -----------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None
        if not self.lost.done():
            self.lost.set_result(None)
        pending, self._pending = self._pending, collections.deque()
        for _, _, callback in pending:
            callback(b"", -1)

    def data_received(self, data: bytes) -> None:
        buf = self._buf
        buf += data
        end = len(buf)
        pos = 0
        now = _perf_ns()
        pending = self._pending
        unpack = _SIZE.unpack_from
        while end - pos >= 4:
            (size,) = unpack(buf, pos)
            if end - pos - 4 < size:
                break
            payload = bytes(buf[pos + 4: pos + 4 + size])
            pos += 4 + size
            cid, sent, callback = pending.popleft()
            if unpack(payload, 0)[0] != cid:
                raise AssertionError(f"correlation id {unpack(payload, 0)[0]} != {cid}")
            callback(payload, now - sent)
        if pos:
            del buf[:pos]

    # -- sending --------------------------------------------------------------------------------
    @property
    def open_(self) -> bool:
        return self._transport is not None

    @property
    def outstanding(self) -> int:
        return len(self._pending)

    def send(self, template: Template, callback: Callback) -> None:
        """Queue a request; `callback` gets its response (or b"" with latency -1 if the
        connection is lost first)."""
        if self._transport is None:
            callback(b"", -1)
            return
        cid = self._cid = (self._cid + 1) & 0x7FFFFFFF
        self._pending.append((cid, _perf_ns(), callback))
        self._out.append(template.head + _SIZE.pack(cid) + template.tail)
        self.sent += 1
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        out, self._out = self._out, []
        if self._transport is not None and out:
            self._transport.write(b"".join(out))

    def call(self, template: Template) -> asyncio.Future[bytes]:
        """Send and return a future of the response payload."""
        future: asyncio.Future[bytes] = self._loop.create_future()

        def done(payload: bytes, latency: int) -> None:
            if future.done():
                return
            if latency < 0:
                future.set_exception(ConnectionLost())
            else:
                future.set_result(payload)

        self.send(template, done)
        return future

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()
