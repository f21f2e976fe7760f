"""The upstream connection of one client connection: forwarded requests out, their responses back
to the client as they arrive.

Theory of operation. A `ResponsePump` is opened by a `Route` on the first forwarded frame and lives
as long as the client connection. Requests go out under the pump's own correlation ids (size
prefix and patched header, then the client's bytes uncopied), whole (`send`) or as they arrive
(`begin` with the first part, `more` with the rest); the caller keeps those bytes unchanged while
`holding`. When the upstream socket is full (`pause_writing`), `flow(True)` tells the client
connection to stop reading; `flow(False)` once it drains. A broker answers a connection's
requests in order, so the requests waiting for an answer are a FIFO; the response at the head of
the stream belongs to the oldest one, and it must carry that request's id (anything else is a
broken stream: everything waiting fails). Produce with acks=0 gets no answer and is not queued.

With `upstream.security.protocol` set, the connection is opened, TLS-wrapped and authenticated by
`UpstreamConnection` and then handed over to the pump (`hand_over`), so TLS and SASL live in one
place.

Reading is `asyncio.BufferedProtocol`: between responses the socket is read into a small scratch
buffer; once a response's size is known, a buffer of exactly that size is allocated and the rest of
the response is read straight into it (`recv_into`, no intermediate copy, reads never cross its
end). As soon as its header is in, the correlation id is put back to the client's and the
response goes to the client's transport in one of three ways:

- streamed (`STREAM`): every chunk is written to the client as it lands, when nothing in the
  response can need rewriting. A large Fetch response reaches the client while the upstream is
  still sending it, so a fetch through the sidecar takes about as long as a direct one rather
  than twice as long (store and forward), and the client's next Fetch leaves sooner;
- streamed up to the top-level tagged fields (`UNTIL_TAGS`, Fetch v16+ larger than
  `STREAM_AFTER`): those fields come last and may hold KIP-951 leader hints (NodeEndpoints) whose
  addresses must never reach the client. The bytes before them (the partitions and their records)
  are streamed as they come, found by a walk over the partition headers (`fetch_tags_offset`);
  the tail is checked when the response is complete. Hints come with NOT_LEADER_OR_FOLLOWER
  partitions, which carry no records, so such responses are small and are handled whole; if a
  large one does carry hints, its size is already on the wire, so the hints are blanked in place
  (renamed to an unknown tag and zeroed, which a client skips: it falls back to a Metadata
  refresh as before KIP-951);
- whole (`WHOLE`): responses that may carry endpoints (Metadata, DescribeCluster, Produce v10+,
  small Fetch v16+) are read completely and passed to `rewrite`.

Responses are written in the order they arrive, which is request order; the client connection
writes nothing of its own while forwarded requests are outstanding, so nothing interleaves. Each
request's future resolves (to None) once its response has been handed to the client's transport.

Backpressure: the client's transport pauses its protocol when more than `CLIENT_HIGH_WATER`
bytes wait to be sent; the connection then pauses the pump (`pause`), which stops reading from
the upstream until the client has caught up (`resume`).

Failures fail every waiting request: `ForwardError` when the upstream goes away,
`UpstreamProtocolError` (and one log line) when its stream breaks or holds a response we cannot
read. The client connection is then closed, as a broker going away closes it, including when half
a response had been streamed.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import struct
from collections.abc import Callable
from typing import cast

from .. import metrics
from ..logging import get_logger
from ..security.upstream import UpstreamSecurity
from .rewrite import FETCH, NODE_ENDPOINTS_TAG, Endpoints, TopicsSeen, needs_rewrite, rewrite
from .upstream import UpstreamConnection
from .wire import ForwardError, UpstreamProtocolError, fetch_tags_offset, find_tag, reframe_request

log = get_logger("coordinator.sidecar.pump")

MAX_RESPONSE_BYTES = 1 << 30
SCRATCH_BYTES = 64 * 1024
STREAM_AFTER = 64 * 1024  # Fetch v16+ responses up to this size are rewritten whole
CLIENT_HIGH_WATER = 4 * 1024 * 1024
CLIENT_LOW_WATER = 1024 * 1024
BLANK_TAG = 0x7F  # the largest one-byte tag: same length as tag 0, known to no client

STREAM, UNTIL_TAGS, WHOLE = 0, 1, 2

_SIZE = struct.Struct(">i")
_STATS = metrics.REQUEST_STATS


class _Request:
    """A forwarded request waiting for (or receiving) its response."""

    __slots__ = ("api_key", "client_id", "future", "upstream_id", "version")

    def __init__(self, upstream_id: int, client_id: int, api_key: int, version: int,
                 future: asyncio.Future[None]) -> None:
        self.upstream_id = upstream_id
        self.client_id = client_id
        self.api_key = api_key
        self.version = version
        self.future = future


def mode_for(api_key: int, version: int, size: int) -> int:
    if not needs_rewrite(api_key, version):
        return STREAM
    if api_key == FETCH and size > STREAM_AFTER:
        return UNTIL_TAGS
    return WHOLE


class ResponsePump(asyncio.BufferedProtocol):
    def __init__(self, address: str, client: asyncio.Transport, endpoints: Endpoints,
                 flow: Callable[[bool], None] | None = None, seen: TopicsSeen | None = None) -> None:
        self.address = address
        self._flow = flow
        self._client = client
        self._endpoints = endpoints
        self._seen = seen
        self._transport: asyncio.Transport | None = None
        self._waiting: collections.deque[_Request] = collections.deque()
        self._ids = itertools.count(1)
        self._scratch = bytearray(SCRATCH_BYTES)
        self._scratch_view = memoryview(self._scratch)
        self._held = 0  # bytes at the start of the scratch buffer not yet taken (a partial size)
        self._frame: bytearray | None = None  # the response being received, size prefix included
        self._filled = 0
        self._sent = 0  # bytes of `_frame` handed to the client
        self._mode = STREAM
        self._head: _Request | None = None  # the request `_frame` answers, once its header is in
        self._paused = False
        self._full = False  # the transport's write buffer is over its high-water mark
        self.closed = False

    @classmethod
    async def open(cls, host: str, port: int, client: asyncio.Transport, endpoints: Endpoints,
                   timeout_s: float = 10.0, security: UpstreamSecurity | None = None,
                   flow: Callable[[bool], None] | None = None, seen: TopicsSeen | None = None) -> ResponsePump:
        """`flow(True)` when the upstream's socket is full (the client connection stops reading),
        `flow(False)` when it has room again; `seen` is told the topics of every Metadata answer."""
        if security is not None:  # TLS and SASL happen in one place
            secured = await UpstreamConnection.open(host, port, timeout_s, security)
            pump = cls(f"{host}:{port}", client, endpoints, flow, seen)
            secured.hand_over(pump)
            return pump
        loop = asyncio.get_running_loop()
        try:
            _, protocol = await asyncio.wait_for(
                loop.create_connection(lambda: cls(f"{host}:{port}", client, endpoints, flow, seen), host, port), timeout_s)
        except (TimeoutError, OSError) as exc:
            raise ForwardError(f"cannot connect to upstream {host}:{port}: {exc!r}") from exc
        return protocol

    # -- requests -----------------------------------------------------------------------------
    def send(self, frame: bytes | bytearray | memoryview, api_key: int, version: int, client_id: int,
             expect_response: bool) -> asyncio.Future[None] | None:
        """Send a client's whole request frame (size prefix removed): `begin` with all of it."""
        return self.begin(frame, len(frame), api_key, version, client_id, expect_response)

    def begin(self, head: bytes | bytearray | memoryview, size: int, api_key: int, version: int, client_id: int,
              expect_response: bool) -> asyncio.Future[None] | None:
        """Send the start of a client's request of `size` bytes (size prefix removed; `head` holds
        at least its header) under a new correlation id; the rest follows through `more`, before
        any other request. The future resolves once the response has been written to the client
        (None for acks=0). The bytes are not copied: the caller keeps them unchanged until
        `holding` says the transport has sent them."""
        if self.closed or self._transport is None:
            raise ForwardError(f"upstream {self.address} connection is closed")
        upstream_id = next(self._ids) & 0x7FFFFFFF
        future: asyncio.Future[None] | None = None
        if expect_response:
            future = asyncio.get_running_loop().create_future()
            self._waiting.append(_Request(upstream_id, client_id, api_key, version, future))
        self._transport.writelines(reframe_request(head, size, upstream_id))
        return future

    def more(self, part: memoryview) -> None:
        """The next bytes of the request `begin` started (dropped once the connection is closed:
        its request has failed)."""
        if not self.closed and self._transport is not None:
            self._transport.write(part)

    @property
    def holding(self) -> bool:
        """Bytes handed to `begin`/`more` may still wait in the transport (not sent yet)."""
        return self._transport is not None and not self.closed and self._transport.get_write_buffer_size() > 0

    def pause_writing(self) -> None:
        """The upstream is not taking requests as fast as the client sends them: the client
        connection stops reading until it catches up (bounded memory for a forwarded stream)."""
        self._full = True
        if self._flow is not None:
            self._flow(True)

    def resume_writing(self) -> None:
        self._full = False
        if self._flow is not None:
            self._flow(False)

    def pause(self) -> None:
        """The client is not reading: stop reading its responses from the upstream."""
        if not self._paused and self._transport is not None and not self.closed:
            self._paused = True
            self._transport.pause_reading()

    def resume(self) -> None:
        if self._paused and self._transport is not None and not self.closed:
            self._paused = False
            self._transport.resume_reading()

    # -- asyncio.BufferedProtocol -------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._frame is not None:
            return memoryview(self._frame)[self._filled:]
        return self._scratch_view[self._held:]

    def buffer_updated(self, nbytes: int) -> None:
        try:
            if self._frame is not None:
                self._filled += nbytes
                self._advance()
            else:
                self._held += nbytes
                self._split()
        except Exception as exc:  # whatever the upstream sent: this connection ends, the process does not
            detail = str(exc) if isinstance(exc, UpstreamProtocolError) else f"{type(exc).__name__}: {exc}"
            log.warning("upstream_stream_broken", upstream=self.address, detail=detail)
            self.close(UpstreamProtocolError(f"upstream {self.address}: {detail}"))

    def eof_received(self) -> bool | None:
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self.close(ForwardError(f"upstream {self.address} closed the connection"))

    # -- responses ----------------------------------------------------------------------------
    def _split(self) -> None:
        """Take the responses out of the scratch buffer: whole ones are handled at once, the
        first partial one moves into its own buffer (later reads go straight there)."""
        scratch, end, position = self._scratch, self._held, 0
        while end - position >= 4 and not self.closed:
            (size,) = _SIZE.unpack_from(scratch, position)
            if size < 4 or size > MAX_RESPONSE_BYTES:
                raise UpstreamProtocolError(f"upstream response size {size} is out of range")
            total = 4 + size
            take = min(total, end - position)
            if take == total:
                frame = bytearray(self._scratch_view[position:position + total])
            else:
                frame = bytearray(total)
                frame[:take] = self._scratch_view[position:end]
            self._frame, self._filled = frame, take
            position += take
            self._advance()
        if self.closed:
            return
        left = end - position
        if left and position:
            scratch[:left] = scratch[position:end]
        self._held = left

    def _advance(self) -> None:
        """New bytes of `_frame` arrived: start it (match its request) once its header is in,
        hand what may go to the client, finish it when complete."""
        frame = self._frame
        assert frame is not None
        request = self._head
        if request is None:
            if self._filled < 8:
                return  # the correlation id is not here yet
            if not self._waiting:
                raise UpstreamProtocolError("upstream sent a response nobody asked for")
            request = self._head = self._waiting.popleft()
            got = _SIZE.unpack_from(frame, 4)[0]
            if got != request.upstream_id:
                raise UpstreamProtocolError(f"upstream answered correlation id {got}, expected {request.upstream_id}")
            _SIZE.pack_into(frame, 4, request.client_id)
            self._sent = 0
            self._mode = mode_for(request.api_key, request.version, len(frame))
        complete = self._filled == len(frame)
        mode = self._mode
        if mode == STREAM:
            self._write_to(self._filled)
        elif mode == UNTIL_TAGS:
            if complete:
                self._finish_fetch(frame, request)
            else:
                tags_at = fetch_tags_offset(memoryview(frame)[:self._filled])
                self._write_to(self._filled if tags_at is None else tags_at)
        elif complete:
            self._write_whole(rewrite(request.api_key, request.version, frame, request.client_id, self._endpoints,
                                      self._seen))
        if complete:
            self._frame = None
            self._head = None
            if not request.future.done():
                request.future.set_result(None)

    def _finish_fetch(self, frame: bytearray, request: _Request) -> None:
        tags_at = fetch_tags_offset(frame)
        found = None if tags_at is None else find_tag(frame, tags_at, NODE_ENDPOINTS_TAG)
        if found is None:
            raise UpstreamProtocolError(f"cannot read the upstream's Fetch v{request.version} response")
        tag_at, payload_at, payload_end = found
        if tag_at < 0:
            self._write_to(len(frame))
        elif self._sent == 0:
            self._write_whole(rewrite(request.api_key, request.version, frame, request.client_id, self._endpoints,
                                      self._seen))
        else:
            frame[tag_at] = BLANK_TAG
            frame[payload_at:payload_end] = bytes(payload_end - payload_at)
            log.debug("sidecar_leader_hints_blanked", upstream=self.address, bytes=len(frame))
            self._write_to(len(frame))

    def _write_to(self, end: int) -> None:
        sent = self._sent
        if end > sent:
            assert self._frame is not None
            if not self._client.is_closing():
                self._client.write(memoryview(self._frame)[sent:end])
            _STATS.bytes_out += end - sent
            self._sent = end

    def _write_whole(self, data: bytes | bytearray) -> None:
        if not self._client.is_closing():
            self._client.write(data)
        _STATS.bytes_out += len(data)
        self._sent = len(data)

    def close(self, reason: Exception | None = None) -> None:
        if self.closed:
            return
        self.closed = True
        error = reason or ForwardError(f"upstream {self.address} connection closed")
        waiting = list(self._waiting)
        if self._head is not None:
            waiting.insert(0, self._head)
        self._waiting.clear()
        self._head = None
        self._frame = None
        for request in waiting:
            if not request.future.done():
                request.future.set_exception(error)
                request.future.exception()  # retrieved: a client that went away must not log "never retrieved"
        if self._full:  # nothing more will be sent: the client connection may read again
            self.resume_writing()
        if self._transport is not None:
            self._transport.abort()
