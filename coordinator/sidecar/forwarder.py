"""Forwarding one client connection's requests to the upstream broker its listener stands for.

A `Route` belongs to one client connection. Frames whose api key is not served here are handed
over by the connection in request order and sent upstream at once (pipelined: the upstream broker
answers a connection's requests in order): as they arrive (`start` with the first part, `more`
with the rest, straight from the connection's receive buffer, which is not reused while
`holding`), or whole (`forward`) when they had to wait their turn. The route opens its own upstream connection, a
`ResponsePump`, on the first forwarded frame (one upstream connection per client connection: a
broker serves one request per connection at a time, so sharing one would put every client's
long-poll Fetch in one queue) and closes it with the client connection. The pump writes the
responses to the client's transport itself, in order, streaming the large ones as they arrive;
the future `forward` and `start` return resolves once a response has been written. When the
upstream socket is full the route tells the connection (`flow`), which stops reading the client.

The listener of upstream broker N forwards to N's current address; the coordinator's own listener
(the bootstrap address clients start from) forwards to any upstream broker, trying them in node-id
order. Only the correlation id of a request changes; a response is rewritten only when it carries
broker endpoints (`rewrite`). A failure (upstream gone, refused, broken stream) surfaces as
`ForwardError`: the client connection is closed, as a broker going away closes it.

While the upstream cannot be reached (`UpstreamCluster.reachable` false), a request with no open
upstream connection to go to is answered here when a broker would have an answer for it (`unreachable.Fallback`: Metadata without
leaders, NOT_LEADER_OR_FOLLOWER for data requests), so clients hear why they must wait instead of
hearing nothing; anything else fails with `UpstreamUnavailable` (the connection closes, one
rate-limited log line). A failed opening asks the cluster to check the upstream at once, and the
next request tries to open a connection again; while the rest of the upstream is still believed
reachable, it fails its requests as before (one broker away closes its connections). A forwarded
CreateTopics, DeleteTopics or CreatePartitions refreshes the upstream catalog once answered (every
shard's, with several shards).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .pump import CLIENT_HIGH_WATER, CLIENT_LOW_WATER, ResponsePump
from .unreachable import NO_RESPONSE
from .wire import ForwardError, UpstreamUnavailable, expects_response, peek_header

if TYPE_CHECKING:
    from .sidecar import Sidecar

TOPIC_ADMIN = frozenset({19, 20, 37})  # CreateTopics, DeleteTopics, CreatePartitions


class Route:
    __slots__ = ("_client", "_connecting", "_flow", "_paused", "_sidecar", "_streaming_on", "_unsent", "_upstream",
                 "local_keys", "node_id")

    def __init__(self, sidecar: Sidecar, node_id: int | None) -> None:
        self._sidecar = sidecar
        self.node_id = node_id
        self.local_keys = sidecar.local_keys
        self._client: asyncio.Transport | None = None
        self._upstream: ResponsePump | None = None
        self._connecting: asyncio.Task[ResponsePump] | None = None
        self._paused = False
        self._flow: Callable[[bool], None] | None = None
        self._unsent = 0  # frames waiting for the upstream connection to open
        self._streaming_on: ResponsePump | None = None  # the connection the last `start` went to

    def attach(self, client: asyncio.Transport, flow: Callable[[bool], None] | None = None) -> None:
        """The client connection's transport, which forwarded responses are written to. Its write
        buffer may hold a few large Fetch responses before the upstream is paused. `flow(True)`
        when the upstream's socket is full (stop reading the client), `flow(False)` when not."""
        self._client = client
        self._flow = flow
        client.set_write_buffer_limits(high=CLIENT_HIGH_WATER, low=CLIENT_LOW_WATER)

    def pause(self) -> None:
        """The client's transport is full: stop reading responses from the upstream."""
        self._paused = True
        if self._upstream is not None:
            self._upstream.pause()

    def resume(self) -> None:
        self._paused = False
        if self._upstream is not None:
            self._upstream.resume()

    @property
    def connected(self) -> bool:
        """The upstream connection is open and every frame before has been sent: a request can be
        sent at once (`start`)."""
        return self._upstream is not None and not self._upstream.closed and not self._unsent

    @property
    def holding(self) -> bool:
        """Request bytes handed over may still be waiting to be sent: they must stay unchanged."""
        return self._upstream is not None and self._upstream.holding

    def forward(self, frame: bytes | bytearray) -> asyncio.Future[Any]:
        """Send the whole frame upstream now (in call order) and return a future that resolves once
        its response has been written to the client (at once for Produce with acks=0), or with the
        response to write when it was answered here (the upstream unreachable). Only the first
        frame of a connection waits for the upstream connection to open; the frames behind it wait
        on the same opening, in order."""
        upstream = self._upstream
        if upstream is not None and not upstream.closed and not self._unsent:
            return self._send(upstream, frame, len(frame), expects_response(frame) is not False)
        if not self._sidecar.cluster.reachable and not self._unsent:
            return self._answered_here(frame)
        connecting = self._connecting
        if (connecting is None or (upstream is not None and upstream.closed)
                or (connecting.done() and (connecting.cancelled() or connecting.exception() is not None))):
            connecting = self._connecting = asyncio.ensure_future(self._connect())
        self._unsent += 1
        return asyncio.ensure_future(self._send_when_connected(connecting, frame))

    def _answered_here(self, frame: bytes | bytearray) -> asyncio.Future[Any]:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        try:
            future.set_result(self._answer_here(frame))
        except Exception as exc:  # refused (ProtocolError), or a bug: the connection closes and logs it
            future.set_exception(exc)
        return future

    def _answer_here(self, frame: bytes | bytearray, cause: Exception | None = None) -> bytes | None:
        """The answer a broker would give without the upstream (None: none goes back, acks=0), or
        `UpstreamUnavailable` when there is none to give."""
        answer = self._sidecar.fallback.answer(frame)
        if answer is None:
            api_key, version, _ = peek_header(frame)
            raise UpstreamUnavailable(f"upstream unreachable; api key {api_key} v{version} cannot be answered here"
                                      + (f" ({cause})" if cause is not None else ""))
        return None if answer is NO_RESPONSE else answer

    def start(self, head: memoryview, size: int) -> asyncio.Future[None] | None:
        """Send the first part (`head`, at least its header) of a frame of `size` bytes now, on the
        open upstream connection (`connected`); the rest follows through `more` as it arrives.
        Returns what `forward` returns, or None when `head` is too short to tell whether the
        request gets a response (a Produce's acks): nothing was sent then. The bytes of `head`
        and of the parts must stay unchanged while `holding`."""
        assert self._upstream is not None
        expect = expects_response(head, len(head) == size)
        if expect is None:
            return None
        self._streaming_on = self._upstream
        return self._send(self._upstream, head, size, expect)

    def more(self, part: memoryview) -> None:
        """The next bytes of the frame `start` began (dropped if its upstream connection is gone:
        that request has failed, and the rest of it must not reach a new connection)."""
        if self._streaming_on is not None and self._streaming_on is self._upstream:
            self._streaming_on.more(part)

    async def _send_when_connected(self, connecting: asyncio.Task[ResponsePump], frame: bytes | bytearray
                                   ) -> Any:
        try:
            try:
                upstream = await asyncio.shield(connecting)
            except ForwardError as exc:
                cluster = self._sidecar.cluster
                cluster.suspect()
                if cluster.reachable:
                    # As far as is known the rest of the cluster answers: this broker alone is
                    # away, and its connection closes as its own would (the client asks another).
                    raise
                return self._answer_here(frame, exc)
            self._upstream = upstream
            if self._paused:
                upstream.pause()
            sent = self._send(upstream, frame, len(frame), expects_response(frame) is not False)
        finally:
            self._unsent -= 1
        return await sent

    def _send(self, upstream: ResponsePump, head: bytes | bytearray | memoryview, size: int,
              expect_response: bool) -> asyncio.Future[Any]:
        api_key, version, correlation_id = peek_header(head)
        try:
            pending = upstream.begin(head, size, api_key, version, correlation_id, expect_response)
        except ForwardError as exc:
            failed: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            failed.set_exception(exc)
            return failed
        if pending is None:
            done: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            done.set_result(None)
            return done
        if api_key in TOPIC_ADMIN:
            pending.add_done_callback(self._topics_changed)
        return pending

    def _topics_changed(self, _: asyncio.Future[None]) -> None:
        """A CreateTopics, DeleteTopics or CreatePartitions went through: read the upstream's
        topics now rather than at the next periodic refresh, so groups (and regexes) follow."""
        self._sidecar.topics_changed()

    async def _connect(self) -> ResponsePump:
        cluster = self._sidecar.cluster
        if not cluster.ready.is_set():
            raise ForwardError("the upstream has not been reached yet")
        client = self._client
        if client is None:
            raise ForwardError("the client connection has no transport")
        endpoints = self._sidecar.listeners
        if self.node_id is not None:
            address = cluster.brokers.get(self.node_id)
            if address is None:
                raise ForwardError(f"upstream broker {self.node_id} is not in the cluster's metadata")
            return await ResponsePump.open(*address, client, endpoints, security=self._sidecar.security,
                                           flow=self._flow, seen=cluster.saw)
        errors = []
        for node_id in sorted(cluster.brokers):
            try:
                return await ResponsePump.open(*cluster.brokers[node_id], client, endpoints,
                                               security=self._sidecar.security, flow=self._flow, seen=cluster.saw)
            except ForwardError as exc:
                errors.append(str(exc))
        raise ForwardError("; ".join(errors) or "no upstream broker known")

    def close(self) -> None:
        if self._connecting is not None and not self._connecting.done():
            self._connecting.cancel()
        if self._upstream is not None:
            self._upstream.close()
            self._upstream = None
