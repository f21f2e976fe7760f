"""SASL on one connection: Kafka's SaslServerAuthenticator as a small state machine.

    HANDSHAKE ──SaslHandshake(enabled mechanism)──▶ AUTHENTICATE ──SaslAuthenticate ... ──▶ COMPLETE
        │                                               │
        └── unknown mechanism: UNSUPPORTED_SASL_MECHANISM, then closed ─┴── bad credentials: SASL_AUTHENTICATION_FAILED, then closed

Rules (as Kafka's authenticator):
- Until COMPLETE the connection serves only ApiVersions and SaslHandshake (HANDSHAKE state) or
  SaslAuthenticate (AUTHENTICATE state); any other request closes the connection without an
  answer ("Unexpected Kafka request of type X during SASL handshake"), and frames larger than
  `sasl.server.max.receive.size` close it too (the connection enforces both).
- SaslHandshake v0–1, as Kafka 4.0 serves them. After v1 each SASL message is a SaslAuthenticate
  request. After v0 (librdkafka before it knew SaslAuthenticate, and any client whose broker
  advertises only v0) each SASL message is a bare token in a size-prefixed frame, with no request
  header, and so is each server message (`token`); a failed token exchange gets no answer, the
  connection just closes, as Kafka's does.
- A failed exchange is answered SASL_AUTHENTICATION_FAILED with Kafka's message, then the connection
  closes. Mechanism messages are shown as Kafka shows them: PLAIN's own ("Authentication failed:
  Invalid username or password"), SCRAM's generic one ("Authentication failed during authentication
  due to invalid credentials with SASL mechanism SCRAM-SHA-512"), so an unknown user and a wrong
  password look alike. The connection sends that answer and closes only after
  `connection.failed.authentication.delay.ms` (the connection applies it, `failures.py` logs it).
- The principal is `User:<user name>`. Sessions do not expire (session lifetime 0: re-authentication,
  KIP-368, is not needed because `connections.max.reauth.ms` is not served).
- SCRAM credentials are read from the log-backed store (its published view: a credential counts
  once the entry carrying it is durable); while the log is still loading, an exchange waits for
  it rather than failing a user the log knows.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from prometheus_client import Counter

from protocol.errors import ErrorCode
from protocol.schemas import api_snake_name

from ..api.registry import RequestContext
from ..api.respond import respond
from ..logging import get_logger
from . import jaas, scram
from .listeners import Listener
from .plain import PlainServer
from .scram import SaslFailed, ScramCredential, ScramMechanism, ScramServer
from .settings import ListenerSecurityConfig

if TYPE_CHECKING:
    from .store import SecurityStore

log = get_logger("coordinator.security.sasl")

SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36
API_VERSIONS = 18
HANDSHAKE, AUTHENTICATE, COMPLETE, FAILED = "HANDSHAKE", "AUTHENTICATE", "COMPLETE", "FAILED"
ALLOWED_KEYS = {HANDSHAKE: frozenset({API_VERSIONS, SASL_HANDSHAKE}),
                AUTHENTICATE: frozenset({SASL_AUTHENTICATE, SASL_HANDSHAKE, API_VERSIONS})}
"""What a connection may send in each state; in AUTHENTICATE anything but SaslAuthenticate is
answered ILLEGAL_SASL_STATE (Kafka's IllegalSaslStateException) and the connection closes."""

AUTHENTICATIONS = Counter("coordinator_sasl_authentications", "SASL authentications, by mechanism and result (ok, failed).",
                          ["mechanism", "result"])


@dataclass(frozen=True, slots=True)
class SaslServerConfig:
    listener: str
    mechanisms: tuple[str, ...]
    plain_users: Mapping[str, str]
    credential: Callable[[str, ScramMechanism], ScramCredential | None]
    """The user's SCRAM credential, from the store; None for an unknown user (or no store yet)."""
    loaded: Callable[[], bool]
    wait_loaded: Callable[[], Awaitable[None]]
    max_receive_size: int


def sasl_server_config(listener: Listener, settings: ListenerSecurityConfig, plain_jaas: str,
                       store: Callable[[], SecurityStore | None],
                       wait_loaded: Callable[[], Awaitable[None]]) -> SaslServerConfig:
    """The SASL settings of `listener` (`plain_jaas`: the JAAS configuration of PLAIN on it, most
    specific key first, as `Config.jaas_config` finds it); `SecurityConfigError` when they cannot
    be served."""
    from .gate import SecurityConfigError

    mechanisms = settings.sasl_enabled_mechanisms
    if not mechanisms:
        raise SecurityConfigError(f"listener {listener.name}: sasl.enabled.mechanisms is empty")
    users: dict[str, str] = {}
    if "PLAIN" in mechanisms:
        key = f"{listener.prefix}plain.sasl.jaas.config"
        text = plain_jaas
        if not text:
            raise SecurityConfigError(f"{key}: PLAIN on listener {listener.name} needs a PlainLoginModule "
                                      'with its users as user_<name>="<password>"')
        try:
            entry = jaas.parse(text)
        except jaas.JaasError as exc:
            raise SecurityConfigError(f"{key}: {exc}") from exc
        if entry.module != jaas.PLAIN_MODULE or not entry.plain_users:
            raise SecurityConfigError(f"{key}: PLAIN needs {jaas.PLAIN_MODULE} with user_<name>=\"<password>\" options")
        users = entry.plain_users

    def credential(user: str, mechanism: ScramMechanism) -> ScramCredential | None:
        current = store()
        return None if current is None else current.credential(user, mechanism.type_id)

    def loaded() -> bool:
        return store() is not None

    return SaslServerConfig(listener.name, mechanisms, users, credential, loaded, wait_loaded,
                            settings.sasl_server_max_receive_size)


class SaslAuthenticator:
    """One connection's authentication; `handle(ctx, request)` answers SaslHandshake and
    SaslAuthenticate (a response, or an awaitable of one while the log loads)."""

    def __init__(self, config: SaslServerConfig) -> None:
        self.config = config
        self.state = HANDSHAKE
        self.mechanism = ""
        self.principal: str | None = None
        self.failure = ""
        self.raw_tokens = False
        """After SaslHandshake v0: every frame is a bare SASL token (`token`), not a Kafka request."""
        self._server: PlainServer | ScramServer | None = None

    @property
    def allowed_keys(self) -> frozenset[int]:
        return ALLOWED_KEYS.get(self.state, frozenset())

    @property
    def max_receive_size(self) -> int:
        return self.config.max_receive_size

    def count(self) -> None:
        """The exchange settled: one authentication counted, ok or failed, by mechanism."""
        if self.principal is not None:
            AUTHENTICATIONS.labels(self.mechanism, "ok").inc()
        elif self.failed:
            AUTHENTICATIONS.labels(self.mechanism or "none", "failed").inc()

    @property
    def failed(self) -> bool:
        return self.state == FAILED

    def handle(self, ctx: RequestContext, request: Any) -> Any:
        if self.state == HANDSHAKE and ctx.api_key == SASL_HANDSHAKE:
            return self._handshake(ctx, request)
        if self.state == AUTHENTICATE and ctx.api_key == SASL_AUTHENTICATE:
            if isinstance(self._server, ScramServer) and not self.config.loaded():
                return self._after_load(ctx, request)
            return self._authenticate(ctx, request)
        # IllegalSaslStateException: answered, then the connection closes.
        self.state = FAILED
        self.failure = f"unexpected api key {ctx.api_key} during SASL authentication"
        message = f"Unexpected Kafka request of type {_name(ctx.api_key)} during SASL authentication."
        if ctx.api_key == SASL_HANDSHAKE:
            return respond(ctx, {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "mechanisms": list(self.config.mechanisms)})
        if ctx.api_key == SASL_AUTHENTICATE:
            return _failed(ctx, ErrorCode.ILLEGAL_SASL_STATE, message)
        return None  # ApiVersions after the handshake: closed without an answer

    def _handshake(self, ctx: RequestContext, request: Any) -> Any:
        mechanisms = list(self.config.mechanisms)
        mechanism = request.mechanism
        if mechanism not in self.config.mechanisms:
            self.state = FAILED
            self.failure = f"unsupported SASL mechanism {mechanism!r}"
            return respond(ctx, {"error_code": ErrorCode.UNSUPPORTED_SASL_MECHANISM, "mechanisms": mechanisms})
        self.mechanism = mechanism
        if mechanism == "PLAIN":
            self._server = PlainServer(self.config.plain_users)
        else:
            chosen = scram.BY_NAME[mechanism]
            self._server = ScramServer(chosen, lambda user: self.config.credential(user, chosen))
        self.state = AUTHENTICATE
        self.raw_tokens = ctx.api_version == 0
        return respond(ctx, {"error_code": ErrorCode.NONE, "mechanisms": mechanisms})

    def token(self, message: bytes) -> bytes | Coroutine[Any, Any, bytes | None] | None:
        """One bare client token after a v0 handshake: the server's token to send back framed (an
        empty one still goes: the client waits for it), None when the exchange failed (nothing is
        sent: Kafka just closes), or an awaitable of either while the log loads."""
        if isinstance(self._server, ScramServer) and not self.config.loaded():
            return self._token_after_load(message)
        return self._evaluate_token(message)

    async def _token_after_load(self, message: bytes) -> bytes | None:
        await self.config.wait_loaded()
        return self._evaluate_token(message)

    def _evaluate_token(self, message: bytes) -> bytes | None:
        server = self._server
        assert server is not None and self.state == AUTHENTICATE
        try:
            token = server.evaluate(message)
        except SaslFailed as exc:
            self.state = FAILED
            self.failure = str(exc)
            return None
        if server.complete:
            self.state = COMPLETE
            self.principal = f"User:{server.user}"
        return token

    async def _after_load(self, ctx: RequestContext, request: Any) -> Any:
        await self.config.wait_loaded()
        return self._authenticate(ctx, request)

    def _authenticate(self, ctx: RequestContext, request: Any) -> Any:
        server = self._server
        assert server is not None
        try:
            token = server.evaluate(bytes(request.auth_bytes))
        except SaslFailed as exc:
            self.state = FAILED
            self.failure = str(exc)
            message = str(exc) if exc.public else (
                f"Authentication failed during authentication due to invalid credentials with SASL mechanism "
                f"{self.mechanism}")
            return _failed(ctx, ErrorCode.SASL_AUTHENTICATION_FAILED, message)
        if server.complete:
            self.state = COMPLETE
            self.principal = f"User:{server.user}"
        return respond(ctx, {"error_code": ErrorCode.NONE, "error_message": None, "auth_bytes": token,
                             "session_lifetime": 0})


def _failed(ctx: RequestContext, code: int, message: str) -> Any:
    return respond(ctx, {"error_code": code, "error_message": message, "auth_bytes": b"", "session_lifetime": 0})


def _name(api_key: int) -> str:
    return str(api_snake_name(api_key) or api_key).upper()
