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

On a SASL listener a connection starts unauthenticated (`security/sasl.py`): until its
authenticator completes, only ApiVersions, SaslHandshake and SaslAuthenticate are served, frames
are limited to `sasl.server.max.receive.size`, and anything else closes the connection unanswered
(before any routing or decoding); after a SaslHandshake v0 every frame is a bare SASL token, and
so is each answer (`_sasl_token`). A failed authentication is answered and the connection closed
only after `connection.failed.authentication.delay.ms`, reading nothing meanwhile, as Kafka's
selector delays it; the node's `AuthenticationFailures` logs it (not a line per attempt).
Once authenticated, the principal (`User:<name>`) goes with every request (`ctx.principal`).

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
import dataclasses
import functools
import struct
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol, cast

from protocol.codec import API_VERSIONS_KEY, DecodedRequest, EncodedResponse, encode_response
from protocol.errors import ProtocolError
from protocol.framing import MIN_REQUEST_SIZE, FrameDecoder
from protocol.schemas import api_name

from .. import metrics
from ..api.registry import ANONYMOUS, Deferred, RequestContext
from ..logging import get_logger
from .auth import Authenticator, Authorizing, FailedAuthentications, Gate, UnexpectedRequest
from .errors_seen import error_names
from .request_bytes import FREE_BYTES, LEAST_READ

if TYPE_CHECKING:
    from protocol.codec import RequestCodec

    from ..api.registry import ApiRegistry
    from .connection_table import ConnectionTable

log = get_logger("coordinator.connection")

_PAUSE_AT = 64
_RESUME_AT = 8


_api_name = functools.cache(api_name)


_STATS = metrics.REQUEST_STATS
_API_KEY = struct.Struct(">h")
_SIZE = struct.Struct(">i")


class Route(Protocol):
    """What a connection asks of its route to an upstream broker (sidecar mode; the sidecar's
    `sidecar.forwarder.Route` is one): the connection drives it, it never knows the sidecar."""

    local_keys: frozenset[int]
    """The api keys served here; any other frame is forwarded."""
    node_id: int | None
    """The upstream broker the listener stands for (None: the coordinator's own listener)."""

    @property
    def connected(self) -> bool: ...
    @property
    def holding(self) -> bool: ...
    def attach(self, client: asyncio.Transport, flow: Callable[[bool], None] | None = None) -> None: ...
    def pause(self) -> None: ...
    def resume(self) -> None: ...
    def forward(self, frame: bytes | bytearray) -> asyncio.Future[Any]: ...
    def start(self, head: memoryview, size: int) -> asyncio.Future[None] | None: ...
    def more(self, part: memoryview) -> None: ...
    def close(self) -> None: ...


class _Reply:
    """A reply queued behind one that waits for the log (`KafkaConnection._replies`): a pending
    future and how to turn its result into the response, or an outcome known already (a response,
    or the error that closes the connection once the replies before it have left)."""

    __slots__ = ("api", "convert", "frame", "future", "outcome", "request", "started")

    def __init__(self, future: asyncio.Future[Any] | None, request: DecodedRequest | None, api: str, started: float,
                 convert: Callable[[Any], Any] | None, outcome: Any = None,
                 frame: bytes | bytearray | None = None) -> None:
        self.future = future
        self.request = request
        self.api = api
        self.started = started
        self.convert = convert
        self.outcome = outcome
        self.frame = frame


@dataclasses.dataclass(frozen=True, slots=True)
class ConnectionServices:
    """What a connection needs of the node it belongs to, and nothing more (never the server):
    the node builds it once and hands it to every connection."""

    max_request_bytes: int
    """`socket.request.max.bytes`: the largest frame, and what a connection buffers before it pauses."""
    connections: ConnectionTable
    """The node's open connections and its `queued.max.request.bytes` budget."""
    codec: RequestCodec
    registry: ApiRegistry
    authorizer: Authorizing | None
    """Handed to handlers as `ctx.authz`; None without `authorizer.class.name`."""
    auth_failures: FailedAuthentications
    wait_loaded: Callable[[], Awaitable[None]]
    """Resolves once the node's state is loaded: requests wait for it."""


class KafkaConnection(asyncio.BufferedProtocol):
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
        self._replies: collections.deque[_Reply] = collections.deque()
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
                    self._hold_failure(_Reply(None, None, "", started, None, exc, frame))
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
                    self._hold_failure(_Reply(None, None, "", started, None, exc, frame))
                    return
                self._fail(exc, frame)
                return
            except Exception as exc:
                if replies:
                    self._hold_failure(_Reply(None, request, "", started, None, exc))
                    return
                self._crash(request)
                return
            if result.__class__ is Deferred:
                future = result.pending
                if result.decided and self._route is None and self._sasl is None:
                    # Only the log is awaited: serve the next request meanwhile, reply in order.
                    replies.append(_Reply(future, request, _api_name(handler.api_key), started, result.convert))
                    if len(replies) == 1:
                        future.add_done_callback(self._reply_ready)
                    if len(replies) < _PAUSE_AT:
                        continue
                    break  # bounded: the frames queue behind them, and reading pauses as usual
                self._busy = True
                self._in_flight = future
                if replies:
                    replies.append(_Reply(future, request, _api_name(handler.api_key), started, result.convert))
                    return
                future.add_done_callback(self._completion(request, _api_name(handler.api_key), started, result.convert))
                return
            if result.__class__ is not EncodedResponse and (asyncio.isfuture(result) or asyncio.iscoroutine(result)):
                self._busy = True
                future = self._in_flight = asyncio.ensure_future(result)
                if replies:
                    replies.append(_Reply(future, request, _api_name(handler.api_key), started, None))
                    return
                future.add_done_callback(self._completion(request, _api_name(handler.api_key), started))
                return
            if replies:  # answered at once, but after the replies before it
                replies.append(_Reply(None, request, _api_name(handler.api_key), started, None, result))
                if len(replies) < _PAUSE_AT:
                    continue
                break
            self._respond(request, _api_name(handler.api_key), result, started)
        if not self._busy and not replies:
            if not self._forwarding:
                self.idle.set()
            self._maybe_resume_reading()

    def _hold_failure(self, failure: _Reply) -> None:
        """A frame that closes the connection, behind replies still waiting for the log: the
        connection reads and serves nothing more, and closes once they have left."""
        self._busy = True
        self._replies.append(failure)
        if self._transport is not None and not self._reading_paused:
            self._reading_paused = True
            self._transport.pause_reading()

    def _reply_ready(self, _: asyncio.Future[Any]) -> None:
        """The first waiting reply's future is done: write every reply now due, in request order
        (one write for all of them), then serve what queued behind them."""
        self._release_replies()
        if not self._closing:
            self._process()

    def _release_replies(self) -> None:
        replies = self._replies
        while replies:
            reply = replies[0]
            future = reply.future
            if future is not None and not future.done():
                future.add_done_callback(self._reply_ready)
                return
            replies.popleft()
            request = reply.request
            if future is None:
                outcome = reply.outcome
                if isinstance(outcome, ProtocolError):
                    self._fail(outcome, reply.frame)
                    return
                if isinstance(outcome, BaseException):
                    assert request is not None
                    self._crash(request, outcome)
                    return
                assert request is not None
                self._respond(request, reply.api, outcome, reply.started)
                continue
            assert request is not None
            if future is self._in_flight:  # a reply that held the connection
                self._busy = False
                self._in_flight = None
            if future.cancelled():
                self.close()
                self.idle.set()
                return
            exc = future.exception()
            if exc is not None:
                self._crash(request, exc)
                return
            response = future.result()
            if reply.convert is not None:
                try:
                    response = reply.convert(response)
                except Exception as error:  # a bug describing the response: as a failed handler
                    self._crash(request, error)
                    return
            self._respond(request, reply.api, response, reply.started)

    def _await_authorizer(self) -> None:
        self._busy = True
        waiting = self._in_flight = asyncio.ensure_future(self._services.wait_loaded())
        self.idle.set()  # no request is in flight yet

        def resumed(done: asyncio.Future[Any]) -> None:
            self._busy = False
            self._in_flight = None
            if not done.cancelled():
                self._process()

        waiting.add_done_callback(resumed)

    def _authenticate(self, request: DecodedRequest, ctx: RequestContext, started: float) -> None:
        """SaslHandshake or SaslAuthenticate on a connection not yet authenticated."""
        sasl = self._sasl
        assert sasl is not None
        api = _api_name(request.api_key)
        result = sasl.handle(ctx, request.body)
        if asyncio.iscoroutine(result):  # a SCRAM exchange waiting for the log to load
            self._busy = True
            future = self._in_flight = asyncio.ensure_future(result)
            respond = self._completion(request, api, started)

            def settled(done: asyncio.Future[Any]) -> None:
                if not done.cancelled() and done.exception() is None:
                    self._respond(request, api, done.result(), started)
                    self._busy = False
                    self._in_flight = None
                    self._sasl_settled()
                    self._process()
                else:
                    respond(done)

            future.add_done_callback(settled)
            return
        self._respond(request, api, result, started)
        self._sasl_settled()

    def _sasl_token(self, frame: bytes | bytearray) -> None:
        """A bare SASL token (after SaslHandshake v0): the server's token goes back size-prefixed."""
        sasl = self._sasl
        assert sasl is not None
        result = sasl.token(bytes(frame))
        if asyncio.iscoroutine(result):  # a SCRAM exchange waiting for the log to load
            self._busy = True
            future = self._in_flight = asyncio.ensure_future(result)

            def settled(done: asyncio.Future[Any]) -> None:
                self._busy = False
                self._in_flight = None
                if done.cancelled() or done.exception() is not None:
                    if not done.cancelled():
                        log.error("sasl_failed", connection=self.connection_id, peer=self.peer,
                                  exc_info=done.exception())
                    self._closing = True
                    if self._transport is not None:
                        self._transport.abort()
                    self.idle.set()
                    return
                self._answer_token(done.result())
                self._process()

            future.add_done_callback(settled)
            return
        self._answer_token(result)

    def _answer_token(self, token: bytes | None) -> None:
        if token is not None and not self._closing:
            self._out.append(_SIZE.pack(len(token)) + token)
            _STATS.bytes_out += len(token) + 4
        self._sasl_settled()

    def _sasl_settled(self) -> None:
        """After an authentication step: the principal on success, the connection closed on failure."""
        sasl = self._sasl
        if sasl is None:
            return
        if sasl.principal is not None:
            self.principal = sasl.principal
            self._sasl = None
            self._decoder.max_size = self._services.max_request_bytes
            self._decoder.min_size = MIN_REQUEST_SIZE
            sasl.count()
        elif sasl.failed:
            sasl.count()
            metrics.CONNECTIONS_CLOSED.labels("authentication_failed").inc()
            failures = self._services.auth_failures
            failures.failed(self.client_host, self.listener, sasl.mechanism, sasl.failure)
            # The answer and the close wait for the delay, and nothing is read meanwhile: a client
            # retrying a wrong password in a loop gets one try per delay, as from Kafka.
            held, self._out = self._out, []
            self._closing = True
            self._queue.clear()
            if self._transport is not None:
                if not self._reading_paused:
                    self._reading_paused = True
                    self._transport.pause_reading()
                asyncio.get_running_loop().call_later(failures.delay, self._close_failed, held)
            self.idle.set()
        elif sasl.raw_tokens:
            self._decoder.min_size = 0  # bare tokens from now on; a short PLAIN one is legal

    def _close_failed(self, held: list[bytes]) -> None:
        """`connection.failed.authentication.delay.ms` after a failed authentication."""
        transport = self._transport
        if transport is not None and not transport.is_closing():
            if held:
                transport.write(b"".join(held))
            transport.close()

    def _completion(self, request: DecodedRequest, api: str, started: float,
                    convert: Callable[[Any], Any] | None = None) -> Callable[[asyncio.Future[Any]], None]:
        def done(future: asyncio.Future[Any]) -> None:
            self._busy = False
            self._in_flight = None
            if future.cancelled():
                self.close()
                self.idle.set()
                return
            exc = future.exception()
            if exc is not None:
                self._crash(request, exc)
                return
            response = future.result()
            if convert is not None:
                try:
                    response = convert(response)
                except Exception as error:  # a bug describing the response: as a failed handler
                    self._crash(request, error)
                    return
            self._respond(request, api, response, started)
            self._process()

        return done

    def _forwarded(self, _: asyncio.Future[Any]) -> None:
        """A forwarded request was answered: write every response now due, in request order."""
        forwarding = self._forwarding
        while forwarding and forwarding[0][0].done():
            future, api_key, size, started = forwarding.popleft()
            if future.cancelled():
                self.close()
                self.idle.set()
                return
            exc = future.exception()
            if exc is not None:
                if not isinstance(exc, ProtocolError):
                    log.error("forward_failed", connection=self.connection_id, peer=self.peer, exc_info=exc)
                    exc = ProtocolError(f"forwarding failed: {type(exc).__name__}")
                self._fail(exc, size)
                return
            data = future.result()
            if data is not None and not self._closing:
                self._out.append(data)
                _STATS.bytes_out += len(data)
            _STATS.observe(_STATS.api(_api_name(api_key)), time.perf_counter() - started)
        self._process()

    def _respond(self, request: DecodedRequest, api: str, response: Any, started: float) -> None:
        if response is not None and not self._closing and self._transport is not None:
            try:
                data = response.data if response.__class__ is EncodedResponse else encode_response(
                    request.correlation_id, response)
            except Exception as exc:  # a handler described a response its version cannot carry
                self._crash(request, exc)
                return
            self._out.append(data)
            _STATS.bytes_out += len(data)
            for name in error_names(response):
                _STATS.error(api, name)
        stats = _STATS.apis.get(api)  # `api()` creates it at an API's first request only
        _STATS.observe(stats if stats is not None else _STATS.api(api), time.perf_counter() - started)

    def _fail(self, exc: ProtocolError, frame: bytes | bytearray | int | None) -> None:
        self._flush()  # answers to the requests before the bad one still leave
        metrics.CONNECTIONS_CLOSED.labels(exc.reason).inc()
        # An error that repeats with a cause outside this process (the sidecar's upstream away)
        # carries its own rate limit for this line.
        getattr(exc, "log_limit", log).warning(
            "connection_closed", reason=exc.reason, detail=str(exc), connection=self.connection_id,
            peer=self.peer, client_id=self.client_id,
            frame_bytes=frame if frame is None or isinstance(frame, int) else len(frame),
        )
        self._closing = True
        self._queue.clear()
        if self._transport is not None:
            self._transport.abort()
        self.idle.set()

    def _crash(self, request: DecodedRequest, exc: BaseException | None = None) -> None:
        self._flush()
        metrics.CONNECTIONS_CLOSED.labels("handler_error").inc()
        log.error(
            "handler_failed", connection=self.connection_id, peer=self.peer,
            client_id=request.client_id, api_key=request.api_key, version=request.api_version,
            exc_info=exc if exc is not None else True,
        )
        self._closing = True
        self._queue.clear()
        if self._transport is not None:
            self._transport.abort()
        self.idle.set()
