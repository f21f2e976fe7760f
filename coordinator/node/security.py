"""Security installed into a node: what each listener asks of its connections (TLS, SASL), the
connection limits and failed-authentication delays, the authorizer (`install`, at construction, so
a bad key file or mechanism stops start-up before anything is opened). The feature itself is
`coordinator/security`; with several shards, the shards' part of it (the copy of shard 0's
credentials and ACLs, the channel for the other shards' writes) installs through `node/shards.py`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..config import Config
from ..runtime.startup_checks import StartupError
from ..security.authorizer import Authorizer
from ..security.failures import AuthenticationFailures
from ..security.gate import SecurityConfigError, build_gates
from ..security.settings import AuthorizerConfig, ConnectionLimits, ListenerSecurityConfig

if TYPE_CHECKING:
    from .server import CoordinatorServer


def install(server: CoordinatorServer, config: Config) -> None:
    """The node's gates, limits and authorizer (the shards' part is `node/shards.install`)."""
    # What each listener asks of its connections (TLS, SASL); a bad key file or mechanism
    # stops start-up here, before anything is opened.
    try:
        server.gates = build_gates(
            [(listener, config.for_listener(ListenerSecurityConfig, listener), config.jaas_config(listener, "PLAIN"))
             for listener in config.listeners], server._security_store, server.wait_loaded)
    except SecurityConfigError as exc:
        raise StartupError(str(exc)) from exc
    server.limits = config.build(ConnectionLimits)
    server.auth_failures = AuthenticationFailures(server.limits.connection_failed_authentication_delay_ms)
    if server.sidecar is not None:  # its per-broker listeners serve as the first listener does
        server.sidecar.listeners.ssl_context = server.gates[server.listeners[0].name].ssl_context
    authorization = config.build(AuthorizerConfig)
    server.authorizer = Authorizer(authorization, server._security_store) if authorization.enabled else None

