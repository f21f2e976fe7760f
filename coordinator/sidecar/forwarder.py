"""Forwarding one client connection's requests to the upstream broker its listener stands for.

A `Route` belongs to one client connection. Frames whose api key is not served here are handed to
`forward` by the connection in request order and sent upstream at once (pipelined: the upstream
broker answers a connection's requests in order). The route opens its own upstream connection, a
`ResponsePump`, on the first forwarded frame (one upstream connection per client connection: a
broker serves one request per connection at a time, so sharing one would put every client's
long-poll Fetch in one queue) and closes it with the client connection. The pump writes the
responses to the client's transport itself, in order, streaming the large ones as they arrive;
the future `forward` returns resolves once a response has been written.

The listener of upstream broker N forwards to N's current address; the coordinator's own listener
(the bootstrap address clients start from) forwards to any upstream broker, trying them in node-id
order. Only the correlation id of a request changes; a response is rewritten only when it carries
broker endpoints (`rewrite`). A failure (upstream gone, refused, broken stream) surfaces as
`ForwardError`: the client connection is closed, as a broker going away closes it. A forwarded
CreateTopics, DeleteTopics or CreatePartitions refreshes the upstream catalog once answered (every
shard's, with several shards).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from .pump import CLIENT_HIGH_WATER, CLIENT_LOW_WATER, ResponsePump
from .wire import ForwardError, expects_response, peek_header

if TYPE_CHECKING:
    from .sidecar import Sidecar

TOPIC_ADMIN = frozenset({19, 20, 37})  # CreateTopics, DeleteTopics, CreatePartitions


class Route:
    __slots__ = ("_client", "_connecting", "_paused", "_sidecar", "_upstream", "local_keys", "node_id")

    def __init__(self, sidecar: Sidecar, node_id: int | None) -> None:
        self._sidecar = sidecar
        self.node_id = node_id
        self.local_keys = sidecar.local_keys
        self._client: asyncio.Transport | None = None
        self._upstream: ResponsePump | None = None
        self._connecting: asyncio.Task[ResponsePump] | None = None
        self._paused = False

    def attach(self, client: asyncio.Transport) -> None:
        """The client connection's transport, which forwarded responses are written to. Its write
        buffer may hold a few large Fetch responses before the upstream is paused."""
        self._client = client
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

    def forward(self, frame: bytes) -> asyncio.Future[None]:
        """Send the frame upstream now (in call order) and return a future that resolves once its
        response has been written to the client (at once for Produce with acks=0). Only the first
        frame of a connection waits for the upstream connection to open; the frames behind it
        wait on the same opening, in order."""
        upstream = self._upstream
        if upstream is not None and not upstream.closed:
            return self._send(upstream, frame)
        if self._connecting is None or (upstream is not None and upstream.closed):
            self._connecting = asyncio.ensure_future(self._connect())
        return asyncio.ensure_future(self._send_when_connected(self._connecting, frame))

    async def _send_when_connected(self, connecting: asyncio.Task[ResponsePump], frame: bytes) -> None:
        upstream = await asyncio.shield(connecting)
        self._upstream = upstream
        if self._paused:
            upstream.pause()
        await self._send(upstream, frame)

    def _send(self, upstream: ResponsePump, frame: bytes) -> asyncio.Future[None]:
        api_key, version, correlation_id = peek_header(frame)
        try:
            pending = upstream.send(frame, api_key, version, correlation_id, expects_response(frame))
        except ForwardError as exc:
            failed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            failed.set_exception(exc)
            return failed
        if pending is None:
            done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
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
        await cluster.ready.wait()
        client = self._client
        if client is None:
            raise ForwardError("the client connection has no transport")
        endpoints = self._sidecar.listeners
        if self.node_id is not None:
            address = cluster.brokers.get(self.node_id)
            if address is None:
                raise ForwardError(f"upstream broker {self.node_id} is not in the cluster's metadata")
            return await ResponsePump.open(*address, client, endpoints, security=self._sidecar.security)
        errors = []
        for node_id in sorted(cluster.brokers):
            try:
                return await ResponsePump.open(*cluster.brokers[node_id], client, endpoints,
                                               security=self._sidecar.security)
            except ForwardError as exc:
                errors.append(str(exc))
        raise ForwardError("; ".join(errors) or "no upstream broker known")

    def close(self) -> None:
        if self._connecting is not None and not self._connecting.done():
            self._connecting.cancel()
        if self._upstream is not None:
            self._upstream.close()
            self._upstream = None
