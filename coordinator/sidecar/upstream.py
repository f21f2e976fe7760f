"""Connections to upstream brokers.

`UpstreamConnection` is one TCP connection to one upstream broker for the sidecar's own requests
(client requests are forwarded by a `pump.ResponsePump`). Requests go out with this connection's
own correlation ids; a broker answers a connection's requests in order, so in-flight requests wait
in a FIFO and each response must carry the id at its head (anything else is a broken stream: the
connection is failed). When the connection drops, every waiting request fails with
`ForwardError`; nothing is retried here (the caller retries).

With `upstream.security.protocol` set, every connection opens over TLS and/or authenticates with
SASL before it is handed out (`security/upstream.py`: the `UpstreamSecurity` of the sidecar that
opens it, passed to `open`); a refused authentication is a `ForwardError` like an unreachable
broker.

`UpstreamClient` is the sidecar's own client (metadata refresh, offset import and mirror, transaction
coordinator lookups): kio-encoded requests to the bootstrap servers (then, when none answers, to
the brokers last read) or to a broker by node id, one pipelined connection per target, re-opened on
demand.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
from collections.abc import Callable, Iterable, Sequence
from typing import Any, cast

from protocol.client import encode_request

from ..logging import get_logger
from ..security.scram import SaslFailed
from ..security.upstream import UpstreamSecurity
from .wire import (
    ForwardError,
    ResponseSplitter,
    UpstreamProtocolError,
    decode_response,
    response_correlation_id,
)

log = get_logger("coordinator.sidecar.upstream")

MAX_RESPONSE_BYTES = 1 << 30
CLIENT_ID = "coordinator-sidecar"


class UpstreamConnection(asyncio.Protocol):
    def __init__(self, address: str) -> None:
        self.address = address
        self._transport: asyncio.Transport | None = None
        self._splitter = ResponseSplitter(MAX_RESPONSE_BYTES)
        self._waiting: collections.deque[tuple[int, asyncio.Future[bytearray]]] = collections.deque()
        self._ids = itertools.count(1)
        self.closed = False

    @classmethod
    async def open(cls, host: str, port: int, timeout_s: float = 10.0,
                   security: UpstreamSecurity | None = None) -> UpstreamConnection:
        """Connect; with `security` (the sidecar's upstream credentials), over TLS and/or SASL."""
        loop = asyncio.get_running_loop()
        context = security.ssl_context if security is not None else None
        try:
            _, protocol = await asyncio.wait_for(
                loop.create_connection(lambda: cls(f"{host}:{port}"), host, port, ssl=context,
                                       server_hostname=host if context is not None else None), timeout_s)
        except (TimeoutError, OSError) as exc:  # ssl.SSLError and certificate errors are OSErrors
            raise ForwardError(f"cannot connect to upstream {host}:{port}: {exc!r}") from exc
        if security is not None and security.sasl:
            try:
                await asyncio.wait_for(security.authenticate(protocol), timeout_s)
            except (TimeoutError, ForwardError, SaslFailed) as exc:
                protocol.close()
                raise ForwardError(f"upstream {host}:{port}: SASL authentication as {security.username} "
                                   f"({security.mechanism}) failed: {exc or 'timed out'}") from exc
        return protocol

    def hand_over(self, protocol: asyncio.BaseProtocol) -> None:
        """Give this opened (and, when configured, TLS-wrapped and authenticated) connection to
        another protocol, which reads it from now on: how a client's response pump gets a secured
        upstream connection without a second TLS/SASL implementation. Nothing may be in flight."""
        if self._transport is None or self._waiting or self.closed:
            raise ForwardError(f"upstream {self.address} connection cannot be handed over")
        transport, self._transport = self._transport, None
        self.closed = True
        transport.set_protocol(protocol)
        protocol.connection_made(transport)

    # -- asyncio.Protocol ---------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        try:
            for frame in self._splitter.feed(data):
                if not self._waiting:
                    raise UpstreamProtocolError("upstream sent a response nobody asked for")
                expected, future = self._waiting.popleft()
                got = response_correlation_id(frame)
                if got != expected:
                    raise UpstreamProtocolError(f"upstream answered correlation id {got}, expected {expected}")
                if not future.done():
                    future.set_result(frame)
        except UpstreamProtocolError as exc:
            log.warning("upstream_stream_broken", upstream=self.address, detail=str(exc))
            self.close(ForwardError(f"upstream {self.address}: {exc}"))

    def connection_lost(self, exc: Exception | None) -> None:
        self.close(ForwardError(f"upstream {self.address} closed the connection"))

    # -- requests -----------------------------------------------------------------------------
    async def call(self, api_key: int, request: Any) -> Any:
        """Send one kio request entity; return the decoded response entity."""
        if self.closed or self._transport is None:
            raise ForwardError(f"upstream {self.address} connection is closed")
        correlation_id = next(self._ids) & 0x7FFFFFFF
        future: asyncio.Future[bytearray] = asyncio.get_running_loop().create_future()
        self._waiting.append((correlation_id, future))
        self._transport.write(encode_request(api_key, correlation_id, CLIENT_ID, request))
        body = await future
        return decode_response(api_key, type(request).__version__, body)

    def close(self, reason: Exception | None = None) -> None:
        if self.closed:
            return
        self.closed = True
        error = reason or ForwardError(f"upstream {self.address} connection closed")
        while self._waiting:
            _, future = self._waiting.popleft()
            if not future.done():
                future.set_exception(error)
                future.exception()  # retrieved: a client that went away must not log "never retrieved"
        if self._transport is not None:
            self._transport.abort()


Address = tuple[str, int]


class UpstreamClient:
    """The sidecar's own requests to the upstream cluster."""

    def __init__(self, bootstrap: Sequence[Address], broker_address: Callable[[int], Address | None],
                 timeout_s: float = 10.0, security: UpstreamSecurity | None = None,
                 brokers: Callable[[], Iterable[int]] = tuple) -> None:
        """`broker_address` finds a broker by node id; `brokers` are the node ids last read."""
        self._bootstrap = list(bootstrap)
        self._security = security
        self._broker_address = broker_address
        self._brokers = brokers
        self._timeout_s = timeout_s
        self._connections: dict[object, UpstreamConnection] = {}
        self._locks: dict[object, asyncio.Lock] = collections.defaultdict(asyncio.Lock)
        self._next_bootstrap = 0

    async def call_any(self, api_key: int, request: Any) -> tuple[Any, str]:
        """Send to a bootstrap server (the next one after a failure), or when none answers to a
        broker last read that is not one of them (as a Kafka client, which asks any node it knows
        once it has metadata: the bootstrap servers down is not the cluster down); returns
        (response, address)."""
        errors = []
        for _ in range(len(self._bootstrap)):
            index = self._next_bootstrap % len(self._bootstrap)
            try:
                connection = await self._connection(("bootstrap", index), self._bootstrap[index])
                return await asyncio.wait_for(connection.call(api_key, request), self._timeout_s), connection.address
            except (TimeoutError, ForwardError) as exc:
                self._drop(("bootstrap", index))
                errors.append(f"{self._bootstrap[index][0]}:{self._bootstrap[index][1]}: {exc or 'timed out'}")
                self._next_bootstrap += 1
        for node_id in sorted(self._brokers()):
            address = self._broker_address(node_id)
            if address is None or address in self._bootstrap:
                continue
            try:
                return await self.call_node(node_id, api_key, request), f"{address[0]}:{address[1]}"
            except ForwardError as exc:
                errors.append(str(exc))
        raise ForwardError("; ".join(errors))

    async def call_node(self, node_id: int, api_key: int, request: Any) -> Any:
        address = self._broker_address(node_id)
        if address is None:
            raise ForwardError(f"upstream broker {node_id} is not known")
        try:
            connection = await self._connection(("node", node_id), address)
            return await asyncio.wait_for(connection.call(api_key, request), self._timeout_s)
        except (TimeoutError, ForwardError) as exc:
            self._drop(("node", node_id))
            raise ForwardError(f"upstream broker {node_id} at {address[0]}:{address[1]}: {exc or 'timed out'}") from exc

    async def _connection(self, key: object, address: Address) -> UpstreamConnection:
        async with self._locks[key]:
            connection = self._connections.get(key)
            if connection is None or connection.closed or connection.address != f"{address[0]}:{address[1]}":
                if connection is not None:
                    connection.close()
                connection = await UpstreamConnection.open(address[0], address[1], self._timeout_s, self._security)
                self._connections[key] = connection
            return connection

    def _drop(self, key: object) -> None:
        connection = self._connections.pop(key, None)
        if connection is not None:
            connection.close()

    def close(self) -> None:
        for key in list(self._connections):
            self._drop(key)
