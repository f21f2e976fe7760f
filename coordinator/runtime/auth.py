"""What a connection asks of authentication and authorization, as interfaces the security feature
implements (`security/gate.py`, `security/sasl.py`, `security/authorizer.py`, `security/failures.py`):
the connection drives a listener's SASL exchange and waits for the ACLs without knowing security.
"""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any, Protocol

from protocol.errors import ProtocolError

from ..api.registry import RequestContext


class UnexpectedRequest(ProtocolError):
    """A request other than ApiVersions/SaslHandshake/SaslAuthenticate before authentication."""

    reason = "unauthenticated_request"


class Authenticator(Protocol):
    """One connection's SASL exchange while it is not authenticated."""

    mechanism: str
    principal: str | None
    """Set once the exchange succeeded: the connection's principal from then on."""
    failure: str
    """Why it failed (logged, never sent)."""
    raw_tokens: bool
    """After SaslHandshake v0: every frame is a bare SASL token (`token`), not a Kafka request."""

    @property
    def max_receive_size(self) -> int:
        """`sasl.server.max.receive.size`: the largest frame before authentication."""
        ...

    @property
    def allowed_keys(self) -> frozenset[int]:
        """The api keys a frame may carry now; any other closes the connection."""
        ...

    @property
    def failed(self) -> bool: ...

    def handle(self, ctx: RequestContext, request: Any) -> Any:
        """SaslHandshake or SaslAuthenticate answered (or an awaitable of the answer)."""
        ...

    def token(self, message: bytes) -> bytes | Coroutine[Any, Any, bytes | None] | None:
        """A bare token's answer (None: failed, nothing is sent), or an awaitable of it."""
        ...

    def count(self) -> None:
        """The exchange settled (succeeded or failed): count it once."""
        ...


class Gate(Protocol):
    """What a listener asks of its connections."""

    name: str

    def principal_of(self, transport: Any) -> str:
        """The principal a connection starts with (its client certificate's on TLS)."""
        ...

    def authenticator(self) -> Authenticator | None:
        """A new connection's SASL exchange (None: the listener does not authenticate)."""
        ...


class Authorizing(Protocol):
    """The node's authorizer as a connection sees it (handlers get it as `ctx.authz`)."""

    @property
    def ready(self) -> bool:
        """The ACLs are loaded: until then requests wait."""
        ...

    def allowed(self, ctx: RequestContext, operation: int, resource_type: int, name: str) -> bool: ...


class FailedAuthentications(Protocol):
    """Where a failed authentication is reported, and how long its answer is held."""

    @property
    def delay(self) -> float:
        """Seconds (`connection.failed.authentication.delay.ms`)."""
        ...

    def failed(self, host: str, listener: str, mechanism: str, detail: str) -> None: ...
