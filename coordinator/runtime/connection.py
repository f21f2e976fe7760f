"""One client connection: frames in, responses out, strictly in request order.

Reads go straight into the connection's receive buffer (an asyncio.BufferedProtocol over
`protocol.framing.FrameDecoder`): no read allocates, a request inside the buffer is copied out once.

Rules (as a Kafka broker's SocketServer, but for replies that only wait for the log):
- responses leave in request order. A request is served when the one before it has been answered,
  with one exception: a reply that is decided and waits only for its own records' log entry to be
  durable (a `Deferred` with `decided`: a commit, a revocation's acknowledgement; not a record-less
  heartbeat waiting for its group's entry) lets the next request be served meanwhile. Such replies queue in request order (`_replies`; with everything
  answered after them), at most `_PAUSE_AT` of them, and leave together once the fsync that covers
  them is done: one write for all of them, one wake-up for the connection, and the requests behind
  them handled in the same loop turn, so their records share the next fsync. A reply that waits
  for something else (a parked JoinGroup, an awaitable) holds its connection as in Kafka: nothing
  after it is served until it is answered. A frame the connection cannot serve behind pending
  replies closes it only after they have left (the earlier requests were answered, as in Kafka);
- frames that arrive meanwhile are queued; past 64 frames, or once the queued frames hold
  `socket.request.max.bytes` (Kafka reads one request per connection at a time, so that is what it
  buffers), the transport stops reading (backpressure) until the queue has drained;
- the request bytes it holds (a frame arriving, the frames queued) count against the server-wide
  `queued.max.request.bytes` (`runtime/request_bytes.py`): while that is spent, reads are cut to
  the room left and a connection holding more than `FREE_BYTES` stops reading until bytes are
  released elsewhere (it waits; it is not closed), but for the one the budget lets read its frame
  to the end (`RequestBytes.overdraft`);
- a frame that cannot be served (oversized, truncated, undecodable, unknown API key, unsupported
  version of anything but ApiVersions, or one a handler finds invalid by raising `ProtocolError`)
  closes this connection with one structured log line;
- a handler that fails unexpectedly, or whose response cannot be encoded, closes the connection too
  (logged with its traceback): a bug must not answer with made-up data, and the client reconnects
  and retries; no exception escapes a connection into the event loop.

On a SASL listener a connection serves only the authentication APIs until it is authenticated
(`runtime/connection_sasl.py` says how). How answers leave, in order, and how a connection
closes on a bad frame or a failed handler, is `runtime/connection_replies.py`.

Sidecar mode adds one routing rule (`route`): on a connection with a route, a frame whose api key
is not served here is handed to the route as bytes, before any decoding; the route writes its
response (from the upstream broker) to this transport in the same order, streaming large ones, and
stops reading from the upstream while this transport is paused. Forwarding is cut-through: a
frame to forward whose turn it is (nothing before it is queued or being served here, the upstream
connection is open, fewer than `_PAUSE_AT` are outstanding) is offered by the decoder as soon as
its header is in and goes upstream from the receive buffer part by part as it arrives (the
buffer is not reused while the upstream transport still holds those bytes); any other frame is
queued whole and forwarded from the queue when its turn comes. Consecutive forwarded frames are
pipelined (the upstream broker answers them in order); a frame served here waits until the
forwarded ones before it have been answered. While the upstream connection's socket is full, this
connection stops reading (`_upstream_flow`), so a client cannot pile requests up in the sidecar.
A forwarding failure closes the connection with one log line, as a broker going away would.

A connection sees its node only through `ConnectionServices` (the frame limit, the connection
table, the codec, the API registry, the authorizer, the authentication failures, the wait for the
loaded state), which the node builds once; its route is any `Route`.

Handlers return a kio response entity or an already framed `EncodedResponse`, an awaitable of one,
a `Deferred` (a future and the conversion of its result into the response, applied here when the
future resolves: the group APIs' replies that wait for the log), or None for "no response"
(Produce with acks=0).
"""

from __future__ import annotations

import asyncio
import collections
import struct
import time
from typing import Any, cast

from protocol.codec import API_VERSIONS_KEY, EncodedResponse
from protocol.errors import ProtocolError
from protocol.framing import FrameDecoder

from .. import metrics
from ..api.registry import ANONYMOUS, Deferred, RequestContext
from ..logging import get_logger
from .auth import Authenticator, Gate, UnexpectedRequest
from .connection_replies import QueuedReply, cached_api_name
from .connection_sasl import SaslSteps
from .connection_services import ConnectionServices, Route
from .request_bytes import FREE_BYTES, LEAST_READ

log = get_logger("coordinator.connection")

_PAUSE_AT = 64
_RESUME_AT = 8

_STATS = metrics.REQUEST_STATS
_API_KEY = struct.Struct(">h")


class KafkaConnection(SaslSteps, asyncio.BufferedProtocol):
    def __init__(self, services: ConnectionServices, connection_id: int, route: Route | None = None,
                 gate: Gate | None = None) -> None:
        self._services = services
        self._route = route
        self._gate = gate
        self.listener = gate.name if gate is not None else "PLAINTEXT"
        self.principal = ANONYMOUS
        self._sasl: Authenticator | None = None
        """Set while a SASL listener's connection is not authenticated yet."""
        self.connection_id = connection_id
        max_frame = services.max_request_bytes
        self._decoder = FrameDecoder(max_frame) if route is None else FrameDecoder(
            max_frame, offer=self._forward_now, more=route.more, holding=lambda: route.holding)
        self._upstream_full = False
        self._queue: collections.deque[bytes | bytearray] = collections.deque()
        self._out: list[bytes] = []
        self._transport: asyncio.Transport | None = None
        self._busy = False
        self._in_flight: asyncio.Future[Any] | None = None
        self._replies: collections.deque[QueuedReply] = collections.deque()
        """Replies not written yet, in request order, while the first of them waits for the log
        (empty otherwise: an answer at once is written without queueing)."""
        self._forwarding: collections.deque[tuple[asyncio.Future[Any], int, int, float]] = collections.deque()
        """Forwarded requests not answered yet: (future, api key, frame size, start time)."""
        self._reading_paused = False
        self._writing_paused = False
        self._buffer_cap = services.max_request_bytes
        self._budget = services.connections.request_bytes
        self._held = 0
        """Request bytes this connection has counted in `_budget` (a frame arriving, the queued ones)."""
        self._budget_wait = False
        """Reading stopped because `queued.max.request.bytes` is spent."""
        self.active = True
        """Traffic since the server's idle sweeper last looked (`connections.max.idle.ms`)."""
        self.idle_sweeps = 0
        self._closing = False
        self._draining = False
        self.peer = ""
        self.client_host = ""
        self.client_id = ""
        self.idle = asyncio.Event()
        self.idle.set()
        self._authz = services.authorizer

    # -- asyncio.Protocol ---------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it.
        self._transport = cast(asyncio.Transport, transport)
        peer = self._transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self.client_host = self.peer.rsplit(":", 1)[0]
        if self._gate is not None:
            self.principal = self._gate.principal_of(self._transport)
            self._sasl = self._gate.authenticator()
            if self._sasl is not None:
                self._decoder.max_size = self._sasl.max_receive_size
        refused = self._services.connections.admit(self)
        if refused is not None:
            key, limit = refused
            self._closing = True
            metrics.CONNECTIONS_CLOSED.labels(key.replace(".", "_")).inc()
            log.warning("connection_refused", reason=key, peer=self.peer, limit=limit)
            self._transport.abort()
            return
        metrics.CONNECTIONS_OPEN.inc()
        if self._route is not None:
            self._route.attach(self._transport, self._upstream_flow)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._services.connections.release(self):
            metrics.CONNECTIONS_OPEN.dec()
        self._closing = True
        self._queue.clear()
        self._recount()  # gives its bytes back to the budget
        self._budget.forget(self)
        if self._in_flight is not None and not self._in_flight.done():
            self._in_flight.cancel()  # e.g. a parked JoinGroup whose client went away
        while self._replies:
            waiting = self._replies.popleft().future
            if waiting is not None and not waiting.done():
                waiting.cancel()
        while self._forwarding:
            self._forwarding.popleft()[0].cancel()
        if self._route is not None:
            self._route.close()
        self.idle.set()

    def get_buffer(self, sizehint: int) -> memoryview:
        buffer = self._decoder.get_buffer()
        room = self._budget.limit - self._budget.held
        if room < len(buffer) and self._budget.overdraft is not self:
            return buffer[:max(room, LEAST_READ)]  # read no more than the budget has room for
        return buffer

    def buffer_updated(self, nbytes: int) -> None:
        if self._closing or self._draining:
            return
        self.active = True
        _STATS.bytes_in += nbytes
        try:
            frames = self._decoder.updated(nbytes)
        except ProtocolError as exc:
            self._fail(exc, None)
            return
        if frames:
            queue = self._queue
            queue.extend(frames)
            # Frames pile up only behind a request in flight: then bound them by count and bytes.
            if len(queue) > 1 and not self._reading_paused and self._transport and (
                    len(queue) >= _PAUSE_AT or sum(map(len, queue)) >= self._buffer_cap):
                self._reading_paused = True
                self._transport.pause_reading()
            self._process()
        else:
            self._recount()

    def _recount(self) -> None:
        """Report this connection's held request bytes to the budget; stop reading while the
        budget is spent and this connection holds more than its free share."""
        queue = self._queue
        held = 0 if self._closing else self._decoder.buffered + (sum(map(len, queue)) if queue else 0)
        delta = held - self._held
        budget = self._budget
        if delta:
            self._held = held
            budget.add(delta)
            if (delta > 0 and held > FREE_BYTES and budget.spent and not self._budget_wait
                    and not budget.may_hold(self, delta)):
                self._budget_wait = True
                if not self._reading_paused and self._transport is not None:
                    self._reading_paused = True
                    self._transport.pause_reading()
                self._decoder.shrink()  # while it waits, it holds its request bytes and no more
                budget.wait(self)  # after pausing: it may choose this connection to overdraw at once
        if budget.overdraft is self and (self._closing or not self._decoder.missing):
            budget.frame_in(self)

    @property
    def missing(self) -> int:
        return self._decoder.missing

    def budget_freed(self) -> None:
        """`queued.max.request.bytes` has room again."""
        self._budget_wait = False
        self._maybe_resume_reading()

    def data_received(self, data: bytes) -> None:
        """Bytes handed over rather than read into `get_buffer` (bench/hotpath.py): the same path."""
        view = memoryview(data)
        while view and not self._closing and not self._draining:
            room = self._decoder.get_buffer()
            count = min(len(room), len(view))
            room[:count] = view[:count]
            self.buffer_updated(count)
            view = view[count:]

    def _forward_now(self, head: memoryview, size: int) -> bool:
        """Hand a frame (`head`, all or the first part of its `size` bytes) to the route now, if it
        is one to forward and its turn: nothing before it is waiting here, and the upstream
        connection is open. Its bytes then stay where they are until the route has sent them."""
        route = self._route
        if (route is None or self._queue or self._busy or self._closing or self._writing_paused
                or self._sasl is not None or len(self._forwarding) >= _PAUSE_AT or not route.connected
                or (self._authz is not None and not self._authz.ready)):
            return False
        api_key = _API_KEY.unpack_from(head)[0]
        if api_key in route.local_keys:
            return False
        future = route.start(head, size)
        if future is None:
            return False  # a Produce request whose acks has not arrived yet
        self.idle.clear()
        self._forwarding.append((future, api_key, size, time.perf_counter()))
        future.add_done_callback(self._forwarded)
        return True

    def _upstream_flow(self, full: bool) -> None:
        """The route's upstream socket is full (stop reading: what is read would pile up in it) or
        has room again."""
        self._upstream_full = full
        if full:
            if not self._reading_paused and self._transport is not None and not self._closing:
                self._reading_paused = True
                self._transport.pause_reading()
        else:
            self._maybe_resume_reading()

    def _maybe_resume_reading(self) -> None:
        if (self._reading_paused and not self._draining and not self._upstream_full and not self._closing
                and not self._budget_wait and len(self._queue) <= _RESUME_AT and self._transport
                and sum(map(len, self._queue)) < self._buffer_cap):
            self._reading_paused = False
            self._transport.resume_reading()

    def eof_received(self) -> bool | None:
        return None

    def pause_writing(self) -> None:
        self._writing_paused = True
        if self._route is not None:
            self._route.pause()

    def resume_writing(self) -> None:
        self._writing_paused = False
        if self._route is not None:
            self._route.resume()
        self._process()

    # -- processing ---------------------------------------------------------------------------
    def drain(self) -> None:
        """Stop taking new requests; the one in flight may finish."""
        self._draining = True
        self._queue.clear()
        if self._transport is not None and not self._reading_paused:
            self._reading_paused = True
            self._transport.pause_reading()

    def close(self) -> None:
        self._closing = True
        if self._transport is not None:
            self._transport.close()

    @property
    def waiting(self) -> bool:
        """A request of this connection is being served (a parked JoinGroup, a forwarded Fetch)."""
        return self._busy or bool(self._forwarding) or bool(self._queue) or bool(self._replies)

    def close_idle(self, idle_ms: int) -> None:
        """`connections.max.idle.ms` passed without traffic: closed, as Kafka's selector does."""
        metrics.CONNECTIONS_CLOSED.labels("idle").inc()
        log.info("connection_closed", reason="idle", idle_ms=idle_ms, connection=self.connection_id, peer=self.peer,
                 listener=self.listener, client_id=self.client_id)
        self.close()

    def _process(self) -> None:
        try:
            self._process_queue()
        finally:
            self._flush()
            self._recount()

    def _flush(self) -> None:
        """Write the responses of this pass in one go (several when an idle shard answered
        queued requests at once): one syscall instead of one per response."""
        out = self._out
        if out:
            self._out = []
            if self._transport is not None and not self._closing:
                self._transport.write(out[0] if len(out) == 1 else b"".join(out))

    def _process_queue(self) -> None:
        replies = self._replies
        while self._queue and not self._busy and not self._closing and not self._writing_paused:
            self.idle.clear()
            if self._sasl is not None:
                if self._sasl.raw_tokens:  # after SaslHandshake v0: a frame is a token, not a request
                    self._sasl_token(self._queue.popleft())
                    continue
                key = _API_KEY.unpack_from(self._queue[0])[0]
                if key not in self._sasl.allowed_keys:
                    self._fail(UnexpectedRequest(f"api key {key} before SASL authentication completed"),
                               self._queue[0])
                    return
            if self._authz is not None and not self._authz.ready:
                self._await_authorizer()  # the ACLs are not loaded yet: nothing is known to be allowed
                return
            route = self._route
            if route is not None:
                frame = self._queue[0]
                if _API_KEY.unpack_from(frame)[0] not in route.local_keys:
                    if len(self._forwarding) >= _PAUSE_AT:
                        break
                    self._queue.popleft()
                    future = route.forward(frame)
                    self._forwarding.append((future, _API_KEY.unpack_from(frame)[0], len(frame), time.perf_counter()))
                    future.add_done_callback(self._forwarded)
                    continue
                if self._forwarding:
                    break  # served here, after the forwarded requests before it are answered
            frame = self._queue.popleft()
            started = time.perf_counter()
            try:
                request = self._services.codec.decode(frame if frame.__class__ is bytes else bytes(frame))
            except ProtocolError as exc:
                if replies:  # the replies before it leave first
                    self._hold_failure(QueuedReply(None, None, "", started, None, exc, frame))
                    return
                self._fail(exc, frame)
                return
            handler = self._services.registry.get(request.api_key)
            assert handler is not None  # the codec only decodes served keys
            self.client_id = request.client_id
            ctx = RequestContext(
                self.connection_id, request.client_id, self.client_host,
                request.api_key, request.api_version, request.correlation_id,
                self.listener, self.principal, self._authz, None if self._route is None else self._route.node_id,
            )
            if self._sasl is not None and request.api_key != API_VERSIONS_KEY:
                self._authenticate(request, ctx, started)
                continue
            try:
                result = handler.handle(ctx, request if request.unsupported_version else request.body)
            except ProtocolError as exc:  # a handler found the request invalid (Kafka closes too)
                if replies:
                    self._hold_failure(QueuedReply(None, None, "", started, None, exc, frame))
                    return
                self._fail(exc, frame)
                return
            except Exception as exc:
                if replies:
                    self._hold_failure(QueuedReply(None, request, "", started, None, exc))
                    return
                self._crash(request)
                return
            if result.__class__ is Deferred:
                future = result.pending
                if result.decided and self._route is None and self._sasl is None:
                    # Only the log is awaited: serve the next request meanwhile, reply in order.
                    replies.append(QueuedReply(future, request, cached_api_name(handler.api_key), started, result.convert))
                    if len(replies) == 1:
                        future.add_done_callback(self._reply_ready)
                    if len(replies) < _PAUSE_AT:
                        continue
                    break  # bounded: the frames queue behind them, and reading pauses as usual
                self._busy = True
                self._in_flight = future
                if replies:
                    replies.append(QueuedReply(future, request, cached_api_name(handler.api_key), started, result.convert))
                    return
                future.add_done_callback(self._completion(request, cached_api_name(handler.api_key), started, result.convert))
                return
            if result.__class__ is not EncodedResponse and (asyncio.isfuture(result) or asyncio.iscoroutine(result)):
                self._busy = True
                future = self._in_flight = asyncio.ensure_future(result)
                if replies:
                    replies.append(QueuedReply(future, request, cached_api_name(handler.api_key), started, None))
                    return
                future.add_done_callback(self._completion(request, cached_api_name(handler.api_key), started))
                return
            if replies:  # answered at once, but after the replies before it
                replies.append(QueuedReply(None, request, cached_api_name(handler.api_key), started, None, result))
                if len(replies) < _PAUSE_AT:
                    continue
                break
            self._respond(request, cached_api_name(handler.api_key), result, started)
        if not self._busy and not replies:
            if not self._forwarding:
                self.idle.set()
            self._maybe_resume_reading()
