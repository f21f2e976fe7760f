"""What one listener asks of the connections it accepts: `ListenerGate`.

A gate is built per listener at start-up from the listener's settings (`listener.name.<l>.<key>`
over `<key>`): the TLS context of SSL and SASL_SSL listeners, the SASL mechanisms of SASL_PLAINTEXT
and SASL_SSL ones. Each accepted connection asks its gate for its starting principal (`User:<DN>` of
a client certificate, else `User:ANONYMOUS`) and, on SASL listeners, for a fresh authenticator
(`security.sasl.SaslAuthenticator`): until it succeeds the connection serves nothing but
ApiVersions, SaslHandshake and SaslAuthenticate. A configuration the gate cannot serve (a missing
key file, an unknown mechanism, PLAIN without users) raises `SecurityConfigError` (one line).
"""

from __future__ import annotations

import ssl
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from . import tls
from .listeners import Listener
from .settings import ListenerSecurityConfig

if TYPE_CHECKING:
    from .sasl import SaslAuthenticator, SaslServerConfig
    from .store import SecurityStore


class SecurityConfigError(Exception):
    """The listener cannot be served as configured; the message is one line naming the key."""


class ListenerGate:
    def __init__(self, listener: Listener, settings: ListenerSecurityConfig, ssl_context: ssl.SSLContext | None,
                 sasl: SaslServerConfig | None) -> None:
        self.listener = listener
        self.name = listener.name
        self.settings = settings
        self.ssl_context = ssl_context
        self.sasl = sasl

    def principal_of(self, transport: Any) -> str:
        """The principal a connection starts with: its verified client certificate's on TLS."""
        if self.ssl_context is None:
            return tls.ANONYMOUS
        return tls.principal(transport.get_extra_info("peercert"))

    def authenticator(self) -> SaslAuthenticator | None:
        """A new connection's SASL state machine (None: the listener does not authenticate)."""
        if self.sasl is None:
            return None
        from .sasl import SaslAuthenticator

        return SaslAuthenticator(self.sasl)


def build_gates(listeners: Iterable[tuple[Listener, ListenerSecurityConfig, str]],
                store: Callable[[], SecurityStore | None], loaded: Callable[[], Any]) -> dict[str, ListenerGate]:
    """One gate per listener, given as (listener, its settings, the JAAS configuration of PLAIN on
    it). `store` reads the SCRAM credentials (the shard's security store), `loaded` is awaited
    before a SCRAM exchange while the log is still loading."""
    from .sasl import sasl_server_config

    gates = {}
    for listener, settings, plain_jaas in listeners:
        try:
            context = tls.server_context(settings, listener.name) if listener.tls else None
        except tls.TlsConfigError as exc:
            raise SecurityConfigError(str(exc)) from exc
        sasl = sasl_server_config(listener, settings, plain_jaas, store, loaded) if listener.sasl else None
        gates[listener.name] = ListenerGate(listener, settings, context, sasl)
    return gates
