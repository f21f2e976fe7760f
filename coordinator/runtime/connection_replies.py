"""How a connection's answers leave (`KafkaConnection`'s reply pipeline, a mixin of its methods):
a response written in request order (`_respond`), a reply queued behind one that waits for the
log (`QueuedReply`, `_replies`) and released, all that is due in one write, once its future is done
(`_release_replies`), the completion of a request that holds its connection (`_completion`), the
answers of forwarded requests (`_forwarded`, sidecar mode), and the close on a frame that cannot be
served or a handler that failed (`_fail`, `_crash`). The rules are `runtime/connection.py`'s
docstring; the state is the connection's (declared here for the type checker only, so a
connection stays one object with no extra attribute). Methods, not module functions: the per
request calls stay one attribute lookup on the connection."""

from __future__ import annotations

import asyncio
import collections
import functools
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from protocol.codec import DecodedRequest, EncodedResponse, encode_response
from protocol.errors import ProtocolError
from protocol.schemas import api_name

from .. import metrics
from ..logging import get_logger
from .errors_seen import error_names

log = get_logger("coordinator.connection")

cached_api_name = functools.cache(api_name)
"""An api key's name, as the request statistics file it (cached: called per request)."""

_STATS = metrics.REQUEST_STATS


class QueuedReply:
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



class ReplyPipeline:
    """`KafkaConnection`'s methods that write its answers, and close it when one cannot be given."""

    _transport: asyncio.Transport | None
    _busy: bool
    _closing: bool
    _in_flight: asyncio.Future[Any] | None
    _queue: collections.deque[bytes | bytearray]
    _out: list[bytes]
    _reading_paused: bool
    _replies: collections.deque[QueuedReply]
    _forwarding: collections.deque[tuple[asyncio.Future[Any], int, int, float]]
    connection_id: int
    peer: str
    client_id: str
    idle: asyncio.Event

    if TYPE_CHECKING:
        def _process(self) -> None: ...
        def _flush(self) -> None: ...
        def close(self) -> None: ...

    def _hold_failure(self, failure: QueuedReply) -> None:
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
            _STATS.observe(_STATS.api(cached_api_name(api_key)), time.perf_counter() - started)
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
