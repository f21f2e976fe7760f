"""Forwarding one client connection's requests to the upstream broker its listener stands for.

A `Route` belongs to one client connection. Frames whose api key is not served here are handed to
`forward` by the connection, one at a time and in order (the connection keeps one request in
flight, as a broker does), so responses go back in request order. The route opens its own upstream
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
    __slots__ = ("_sidecar", "_upstream", "local_keys", "node_id")

    def __init__(self, sidecar: Sidecar, node_id: int | None) -> None:
        self._sidecar = sidecar
        self.node_id = node_id
        self.local_keys = sidecar.local_keys
        self._upstream: UpstreamConnection | None = None

    def forward(self, frame: bytes) -> asyncio.Future[bytes | bytearray | None]:
        return asyncio.ensure_future(self._forward(frame))

    async def _forward(self, frame: bytes) -> bytes | bytearray | None:
        api_key, version, correlation_id = peek_header(frame)
        upstream = self._upstream
        if upstream is None or upstream.closed:
            upstream = self._upstream = await self._connect()
        pending = upstream.send_frame(frame, expects_response(frame))
        if pending is None:
            return None
        body = await pending
        if needs_rewrite(api_key, version):
            return rewrite(api_key, version, body, correlation_id, self._sidecar.listeners)
        return set_correlation_id(body, correlation_id)

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
        if self._upstream is not None:
            self._upstream.close()
            self._upstream = None
