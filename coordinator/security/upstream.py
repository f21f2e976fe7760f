"""The sidecar's own credentials towards its upstream cluster: `UpstreamSecurity`.

Built from `upstream.security.protocol`, `upstream.sasl.*` and `upstream.ssl.*` (a Kafka client's
settings under `upstream.`). Every upstream connection (forwarding routes, metadata, offset import
and mirror) opens with the TLS context when the protocol is SSL or SASL_SSL (the broker's certificate
checked against `upstream.ssl.truststore.*`, else the system's CAs; its host name checked unless
`upstream.ssl.endpoint.identification.algorithm` is empty) and, for SASL_*, authenticates before any
other request: SaslHandshake v1, then SaslAuthenticate v0 (served by every Kafka since 1.0) with
PLAIN or SCRAM (the server's signature is verified too). Upstream ACLs therefore see the
coordinator's principal, not the clients'.

SCRAM's PBKDF2 is paid once per (salt, iterations): every client connection opens its own upstream
connection, and each authenticates.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from typing import Any

from protocol.client import request_class

from . import jaas, scram, tls
from .gate import SecurityConfigError
from .scram import SaslFailed
from .settings import UpstreamSecurityConfig

SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
SaslHandshakeRequest = request_class(SASL_HANDSHAKE, 1)
SaslAuthenticateRequest = request_class(SASL_AUTHENTICATE, 0)


@dataclass
class UpstreamSecurity:
    protocol: str
    ssl_context: ssl.SSLContext | None
    mechanism: str = ""
    username: str = ""
    password: str = ""
    _salted: dict[tuple[str, bytes, int], bytes] = field(default_factory=dict)

    @property
    def sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    async def authenticate(self, connection: Any) -> None:
        """SASL on a fresh upstream connection (`connection.call(api_key, request)`); SaslFailed
        with the broker's message when it refuses."""
        handshake = await connection.call(SASL_HANDSHAKE, SaslHandshakeRequest(mechanism=self.mechanism))
        if handshake.error_code:
            raise SaslFailed(f"SASL mechanism {self.mechanism} is not enabled upstream "
                             f"(enabled: {', '.join(handshake.mechanisms) or 'none'})")
        if self.mechanism == "PLAIN":
            await self._step(connection, f"\0{self.username}\0{self.password}".encode())
            return
        client = scram.ScramClient(scram.BY_NAME[self.mechanism], self.username, self.password,
                                   salted_cache=self._salted)
        server_first = await self._step(connection, client.first())
        server_final = await self._step(connection, client.final(server_first))
        client.verify(server_final)

    @staticmethod
    async def _step(connection: Any, token: bytes) -> bytes:
        response = await connection.call(SASL_AUTHENTICATE, SaslAuthenticateRequest(auth_bytes=token))
        if response.error_code:
            raise SaslFailed(response.error_message or f"error code {int(response.error_code)}")
        return bytes(response.auth_bytes)


def upstream_security(settings: UpstreamSecurityConfig) -> UpstreamSecurity | None:
    """None for PLAINTEXT; SecurityConfigError (one line) for settings that cannot work."""
    protocol = settings.security_protocol
    if protocol == "PLAINTEXT":
        return None
    context = None
    if protocol in ("SSL", "SASL_SSL"):
        try:
            context = tls.client_context(
                truststore_location=settings.ssl_truststore_location,
                truststore_certificates=settings.ssl_truststore_certificates,
                keystore_location=settings.ssl_keystore_location, keystore_key=settings.ssl_keystore_key,
                keystore_certificate_chain=settings.ssl_keystore_certificate_chain,
                key_password=settings.ssl_key_password,
                check_hostname=settings.ssl_endpoint_identification_algorithm == "https", prefix="upstream.ssl.")
        except tls.TlsConfigError as exc:
            raise SecurityConfigError(str(exc)) from exc
    security = UpstreamSecurity(protocol, context)
    if security.sasl:
        username, password = settings.sasl_username, settings.sasl_password
        if settings.sasl_jaas_config:
            try:
                entry = jaas.parse(settings.sasl_jaas_config)
            except jaas.JaasError as exc:
                raise SecurityConfigError(f"upstream.sasl.jaas.config: {exc}") from exc
            username, password = entry.options.get("username", ""), entry.options.get("password", "")
        if not username or not password:
            raise SecurityConfigError(f"upstream.security.protocol={protocol} needs upstream.sasl.jaas.config "
                                      "(username and password) or upstream.sasl.username and upstream.sasl.password")
        security.mechanism, security.username, security.password = settings.sasl_mechanism, username, password
    return security
