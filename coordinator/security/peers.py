"""How the coordinator's own processes reach one another: `PeerLink`, Kafka's inter-broker listener.

Shards, or instances sharing the log upstream, forward share requests to the process holding the
group (`share/forward.py`), and an embedded shard k >= 1 reads shard 0's data plane for its share
groups (`share/shard_zero.py`). As Kafka's brokers do with `inter.broker.listener.name` and
`sasl.mechanism.inter.broker.protocol`, they connect to one named listener of the holder with that
listener's own settings, every process being configured alike:

- **Which listener.** `inter.broker.listener.name`; empty: the first PLAINTEXT listener (none: no
  forwarding, said once at start by the caller). A name that is not a listener stops start-up.
- **TLS** (SSL, SASL_SSL). The peer's certificate is checked against the listener's
  `ssl.truststore.*`; without one, against the certificates of the listener's own key store (the
  peer presents the same one), as a trust anchor even when it is a leaf. The host name is checked
  unless the listener's `ssl.endpoint.identification.algorithm` is empty. The key store is sent as
  the client certificate (its DN is the principal on an SSL listener asking for one).
- **SASL** (SASL_PLAINTEXT, SASL_SSL). The mechanism is `sasl.mechanism.inter.broker.protocol`,
  else the listener's first enabled one, and must be enabled there; the credentials are the
  `username` and `password` options of the listener's JAAS configuration for it (Kafka's
  `listener.name.<l>.<mechanism>.sasl.jaas.config`, whose PlainLoginModule also lists the users
  PLAIN accepts). Missing ones stop start-up.

The holder then sees the forwarding process's principal and checks CLUSTER_ACTION on the cluster
for it: the operator grants that to the coordinator's user (or makes it a super user).
"""

from __future__ import annotations

import ssl
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from . import jaas, tls
from .gate import SecurityConfigError
from .listeners import Listener
from .settings import InterBrokerConfig, ListenerSecurityConfig
from .upstream import UpstreamSecurity


@dataclass(frozen=True, slots=True)
class PeerLink:
    listener: str
    """The listener name peers are reached on (each process's advertised address for it)."""
    security: UpstreamSecurity | None
    """TLS and SASL of the connection (None: plain TCP)."""


def peer_link(listeners: Sequence[Listener], settings: InterBrokerConfig,
              listener_settings: Callable[[Listener], ListenerSecurityConfig],
              jaas_config: Callable[[Listener, str], str]) -> PeerLink | None:
    """The link to peers; None when no listener is named and none is PLAINTEXT. Raises
    `SecurityConfigError` (one line) for a setting that cannot work."""
    name = settings.inter_broker_listener_name
    if not name:
        plain = next((listener for listener in listeners if not listener.tls and not listener.sasl), None)
        return PeerLink(plain.name, None) if plain is not None else None
    listener = next((listener for listener in listeners if listener.name == name), None)
    if listener is None:
        raise SecurityConfigError(f"inter.broker.listener.name: {name} is not a listener "
                                  f"(listeners: {', '.join(listener.name for listener in listeners)})")
    if not listener.tls and not listener.sasl:
        return PeerLink(listener.name, None)
    config = listener_settings(listener)
    context = _client_context(listener, config) if listener.tls else None
    security = UpstreamSecurity(listener.protocol, context)
    if listener.sasl:
        security.mechanism = settings.sasl_mechanism_inter_broker_protocol or config.sasl_enabled_mechanisms[0]
        if security.mechanism not in config.sasl_enabled_mechanisms:
            raise SecurityConfigError(
                f"sasl.mechanism.inter.broker.protocol: {security.mechanism} is not enabled on listener "
                f"{listener.name} (sasl.enabled.mechanisms: {', '.join(config.sasl_enabled_mechanisms)})")
        security.username, security.password = _credentials(listener, security.mechanism,
                                                            jaas_config(listener, security.mechanism))
    return PeerLink(listener.name, security)


def _credentials(listener: Listener, mechanism: str, text: str) -> tuple[str, str]:
    key = f"{listener.prefix}{mechanism.lower()}.sasl.jaas.config"
    options: dict[str, str] = {}
    if text:
        try:
            options = jaas.parse(text).options
        except jaas.JaasError as exc:
            raise SecurityConfigError(f"{key}: {exc}") from exc
    username, password = options.get("username", ""), options.get("password", "")
    if not username or not password:
        raise SecurityConfigError(
            f"inter.broker.listener.name={listener.name} is {listener.protocol}: {key} (or sasl.jaas.config) needs "
            f"username and password, the user the coordinator's processes forward to one another as")
    return username, password


def _client_context(listener: Listener, config: ListenerSecurityConfig) -> ssl.SSLContext:
    prefix = f"{listener.prefix}ssl."
    try:
        context = tls.client_context(
            truststore_location=config.ssl_truststore_location,
            truststore_certificates=config.ssl_truststore_certificates,
            keystore_location=config.ssl_keystore_location, keystore_key=config.ssl_keystore_key,
            keystore_certificate_chain=config.ssl_keystore_certificate_chain, key_password=config.ssl_key_password,
            check_hostname=config.ssl_endpoint_identification_algorithm == "https", prefix=prefix,
            who=listener.name)
        if not config.ssl_truststore_location and not config.ssl_truststore_certificates:
            # Every process presents this same key store: its certificates are the peers' anchors
            # (a self-signed or CA-issued leaf alone included, hence the partial chain).
            if config.ssl_keystore_location:
                context.load_verify_locations(cafile=config.ssl_keystore_location)
            elif config.ssl_keystore_certificate_chain:
                context.load_verify_locations(cadata=tls.pem(config.ssl_keystore_certificate_chain))
            context.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN
    except tls.TlsConfigError as exc:
        raise SecurityConfigError(str(exc)) from exc
    except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError: a key store without certificates
        raise SecurityConfigError(f"listener {listener.name}: {prefix}keystore: no certificate to trust the "
                                  f"peers with, set {prefix}truststore.location ({exc})") from exc
    return context
