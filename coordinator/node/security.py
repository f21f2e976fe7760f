"""Security installed into a node: what each listener asks of its connections (TLS, SASL), the
connection limits and failed-authentication delays, the authorizer (`install`, at construction, so
a bad key file or mechanism stops start-up before anything is opened), and with several shards the
copy of shard 0's credentials and ACLs a shard k >= 1 reads while it loads (`mirror_started`) and
the channel shard 0 serves the other shards' security writes through (`channel_opened`). The
feature itself is `coordinator/security` (and `shards/security_*` for the shards' part)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from ..config import Config
from ..runtime.startup_checks import StartupError
from ..security.authorizer import Authorizer
from ..security.failures import AuthenticationFailures
from ..security.gate import SecurityConfigError, build_gates
from ..security.settings import AuthorizerConfig, ConnectionLimits, ListenerSecurityConfig
from ..shards.placement import shard_data_dir
from ..shards.security_channel import SecurityChannel, SecurityForwarder
from ..shards.security_mirror import SecurityMirror

if TYPE_CHECKING:
    from .server import CoordinatorServer


def install(server: CoordinatorServer, config: Config) -> None:
    """The node's gates, limits and authorizer, and the shards' security mirror and forwarder."""
    # What each listener asks of its connections (TLS, SASL); a bad key file or mechanism
    # stops start-up here, before anything is opened.
    try:
        server.gates = build_gates(
            [(listener, config.for_listener(ListenerSecurityConfig, listener), config.jaas_config(listener, "PLAIN"))
             for listener in config.listeners], server._security_store, server.wait_loaded)
    except SecurityConfigError as exc:
        raise StartupError(str(exc)) from exc
    # SCRAM credentials and ACLs are records of shard 0's log alone: shard 0 serves the other
    # shards' writes (`security_channel`), and each of them reads a copy of them (`security_mirror`).
    if server.layout.shards > 1 and server.shard_index > 0:
        server.security_mirror = SecurityMirror(shard_data_dir(server.root, 0) / "log")
        server.security_forwarder = SecurityForwarder(server.root, server.shard_index, server.security_mirror,
                                                    server._security_store)
    server.limits = config.build(ConnectionLimits)
    server.auth_failures = AuthenticationFailures(server.limits.connection_failed_authentication_delay_ms)
    if server.sidecar is not None:  # its per-broker listeners serve as the first listener does
        server.sidecar.listeners.ssl_context = server.gates[server.listeners[0].name].ssl_context
    authorization = config.build(AuthorizerConfig)
    server.authorizer = Authorizer(authorization, server._security_store) if authorization.enabled else None


def mirror_started(server: CoordinatorServer) -> asyncio.Future[None] | None:
    """Shard k >= 1: shard 0's users and ACLs, read while this shard loads (awaited before it is
    loaded), and followed from then on."""
    if server.security_mirror is None:
        return None
    copied = asyncio.ensure_future(server.security_mirror.catch_up())
    server._background.append(asyncio.create_task(server.security_mirror.run(), name="security-mirror"))
    return copied


async def channel_opened(server: CoordinatorServer) -> None:
    """Shard 0 of several, once loaded: the channel the other shards' security writes come through."""
    if server.layout.shards > 1 and server.shard_index == 0:
        committer = server._committer
        assert committer is not None  # several shards never keep the log upstream
        server.security_channel = SecurityChannel(server.root, lambda: server.shard,
                                                  lambda: committer.log.durable_end)
        await server.security_channel.start()
