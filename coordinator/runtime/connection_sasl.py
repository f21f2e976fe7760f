"""A connection's authentication steps on a SASL listener (`KafkaConnection`'s methods, a mixin),
and its wait for the authorizer's ACLs to load.

On a SASL listener a connection starts unauthenticated (`security/sasl.py`): until its
authenticator completes, only ApiVersions, SaslHandshake and SaslAuthenticate are served, frames
are limited to `sasl.server.max.receive.size`, and anything else closes the connection unanswered
(before any routing or decoding); after a SaslHandshake v0 every frame is a bare SASL token, and
so is each answer (`_sasl_token`). A failed authentication is answered and the connection closed
only after `connection.failed.authentication.delay.ms`, reading nothing meanwhile, as Kafka's
selector delays it; the node's `AuthenticationFailures` logs it (not a line per attempt).
Once authenticated, the principal (`User:<name>`) goes with every request (`ctx.principal`).

The state is the connection's (declared here for the type checker only: no extra attribute).
"""

from __future__ import annotations

import asyncio
import struct
from typing import Any

from protocol.codec import DecodedRequest
from protocol.framing import MIN_REQUEST_SIZE, FrameDecoder

from .. import metrics
from ..api.registry import RequestContext
from ..logging import get_logger
from .auth import Authenticator
from .connection_replies import ReplyPipeline, cached_api_name
from .connection_services import ConnectionServices

log = get_logger("coordinator.connection")

_STATS = metrics.REQUEST_STATS
_SIZE = struct.Struct(">i")


class SaslSteps(ReplyPipeline):
    """`KafkaConnection`'s methods that authenticate it (SASL) and wait for the ACLs; they answer
    through its reply pipeline (the base class, which declares the state both share)."""

    _sasl: Authenticator | None
    _decoder: FrameDecoder
    client_host: str
    listener: str
    principal: str
    _services: ConnectionServices

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
        api = cached_api_name(request.api_key)
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
