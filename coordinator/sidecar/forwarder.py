"""Forwarding one client connection's requests to the upstream broker its listener stands for.

A `Route` belongs to one client connection. Frames whose api key is not served here are handed to
`forward` by the connection in request order and sent upstream at once (pipelined: the upstream
broker answers a connection's requests in order, and the connection writes the answers back in the
order it forwarded them). The route opens its own upstream
connection on the first forwarded frame (one upstream connection per client connection: a broker
serves one request per connection at a time, so sharing one would put every client's long-poll
Fetch in one queue) and closes it with the client connection.

The listener of upstream broker N forwards to N's current address; the coordinator's own listener
(the bootstrap address clients start from) forwards to any upstream broker, trying them in node-id
order. Only the correlation id of a request changes; a response is rewritten only when it carries
broker endpoints (`rewrite`). A failure (upstream gone, refused, broken stream) surfaces as
`ForwardError`: the client connection is closed, as a broker going away closes it.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from .rewrite import needs_rewrite, rewrite
from .upstream import UpstreamConnection
from .wire import ForwardError, expects_response, peek_header, set_correlation_id

if TYPE_CHECKING:
    from .sidecar import Sidecar


class Route:
    __slots__ = ("_connecting", "_sidecar", "_upstream", "local_keys", "node_id")

    def __init__(self, sidecar: Sidecar, node_id: int | None) -> None:
        self._sidecar = sidecar
        self.node_id = node_id
        self.local_keys = sidecar.local_keys
        self._upstream: UpstreamConnection | None = None
        self._connecting: asyncio.Task[UpstreamConnection] | None = None

    def forward(self, frame: bytes) -> asyncio.Future[bytes | bytearray | None]:
        """Send the frame upstream now (in call order) and return a future of the client's response
        frame (None for Produce with acks=0). Only the first frame of a connection waits for the
        upstream connection to open; the frames behind it wait on the same opening, in order."""
        upstream = self._upstream
        if upstream is not None and not upstream.closed:
            return self._send(upstream, frame)
        if self._connecting is None or (upstream is not None and upstream.closed):
            self._connecting = asyncio.ensure_future(self._connect())
        return asyncio.ensure_future(self._send_when_connected(self._connecting, frame))

    async def _send_when_connected(self, connecting: asyncio.Task[UpstreamConnection], frame: bytes
                                   ) -> bytes | bytearray | None:
        upstream = await asyncio.shield(connecting)
        self._upstream = upstream
        return await self._send(upstream, frame)

    def _send(self, upstream: UpstreamConnection, frame: bytes) -> asyncio.Future[bytes | bytearray | None]:
        api_key, version, correlation_id = peek_header(frame)
        out: asyncio.Future[bytes | bytearray | None] = asyncio.get_running_loop().create_future()
        try:
            pending = upstream.send_frame(frame, expects_response(frame))
        except ForwardError as exc:
            out.set_exception(exc)
            return out
        if pending is None:
            out.set_result(None)
            return out
        endpoints = self._sidecar.listeners

        def done(answer: asyncio.Future[bytearray]) -> None:
            if out.done():
                return
            if answer.cancelled():
                out.cancel()
            elif (exc := answer.exception()) is not None:
                out.set_exception(exc)
            else:
                body = answer.result()
                try:
                    if needs_rewrite(api_key, version):
                        out.set_result(rewrite(api_key, version, body, correlation_id, endpoints))
                    else:
                        out.set_result(set_correlation_id(body, correlation_id))
                except Exception as error:  # an upstream response we cannot read closes the client
                    out.set_exception(error)

        pending.add_done_callback(done)
        return out

    async def _connect(self) -> UpstreamConnection:
        cluster = self._sidecar.cluster
        await cluster.ready.wait()
        if self.node_id is not None:
            address = cluster.brokers.get(self.node_id)
            if address is None:
                raise ForwardError(f"upstream broker {self.node_id} is not in the cluster's metadata")
            return await UpstreamConnection.open(*address)
        errors = []
        for node_id in sorted(cluster.brokers):
            try:
                return await UpstreamConnection.open(*cluster.brokers[node_id])
            except ForwardError as exc:
                errors.append(str(exc))
        raise ForwardError("; ".join(errors) or "no upstream broker known")

    def close(self) -> None:
        if self._connecting is not None and not self._connecting.done():
            self._connecting.cancel()
        if self._upstream is not None:
            self._upstream.close()
            self._upstream = None
