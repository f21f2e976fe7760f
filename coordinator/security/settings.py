"""The security settings, declared once with Kafka's names (see `coordinator.settings`).

`ListenerSecurityConfig` holds the keys Kafka lets a listener override with
`listener.name.<name>.<key>`: build it with `Config.for_listener(ListenerSecurityConfig, listener)`.
The others are server-wide. Where we depart from Kafka's default the doc line says why: only PEM
key material is read (`ssl.keystore.type` defaults to PEM, not JKS), and GSSAPI is not served
(`sasl.enabled.mechanisms` defaults to the two SCRAM mechanisms).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..settings import Check, at_least, setting

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
AUTHORIZERS = ("", STANDARD_AUTHORIZER, "kafka.security.authorizer.AclAuthorizer")


def _pem_only(value: str) -> str | None:
    return None if value.upper() == "PEM" else f"only PEM key material is supported, got {value}"


def _mechanisms(value: tuple[str, ...]) -> str | None:
    unknown = [m for m in value if m not in MECHANISMS]
    if unknown:
        return f"unsupported SASL mechanism {', '.join(unknown)} (supported: {', '.join(MECHANISMS)})"
    return None


def _one_of(*choices: str) -> Check:
    return lambda v: None if v in choices else f"must be one of {', '.join(c or '(empty)' for c in choices)}"


def _principals(raw: str) -> tuple[str, ...]:
    """`super.users`: principals separated by semicolons (User:alice;User:bob), as Kafka."""
    principals = tuple(p.strip() for p in raw.split(";") if p.strip())
    for principal in principals:
        kind, sep, name = principal.partition(":")
        if not sep or not kind or not name:
            raise ValueError(f"expected a principal as Type:name (User:alice), got {principal!r}")
    return principals


def _host_counts(raw: str) -> tuple[tuple[str, int], ...]:
    """`max.connections.per.ip.overrides`: host:count,host:count."""
    result = []
    for item in raw.split(","):
        if not item.strip():
            continue
        host, sep, count = item.strip().rpartition(":")
        if not sep or not count.strip().isdigit():
            raise ValueError(f"expected host:count, got {item.strip()!r}")
        result.append((host.strip("[] "), int(count)))
    return tuple(result)


@dataclass(frozen=True, slots=True)
class ListenerSecurityConfig:
    """TLS and SASL settings of one listener (each may be set as listener.name.<name>.<key>)."""

    ssl_keystore_type: str = setting(
        "ssl.keystore.type", "PEM",
        "File format of the key store; only PEM is read (Kafka's default is JKS).", check=_pem_only)
    ssl_keystore_location: str = setting(
        "ssl.keystore.location", "",
        "PEM file holding this listener's private key and certificate chain.")
    ssl_keystore_key: str = setting(
        "ssl.keystore.key", "",
        "The private key in PEM, inline (instead of ssl.keystore.location).")
    ssl_keystore_certificate_chain: str = setting(
        "ssl.keystore.certificate.chain", "",
        "The certificate chain in PEM, inline (with ssl.keystore.key).")
    ssl_key_password: str = setting(
        "ssl.key.password", "", "Password of an encrypted private key.")
    ssl_truststore_type: str = setting(
        "ssl.truststore.type", "PEM",
        "File format of the trust store; only PEM is read (Kafka's default is JKS).", check=_pem_only)
    ssl_truststore_location: str = setting(
        "ssl.truststore.location", "",
        "PEM file of the CA certificates client certificates are checked against.")
    ssl_truststore_certificates: str = setting(
        "ssl.truststore.certificates", "", "The trusted CA certificates in PEM, inline.")
    ssl_client_auth: str = setting(
        "ssl.client.auth", "none",
        "Client certificates: required, requested (checked when sent) or none.",
        check=_one_of("required", "requested", "none"))
    ssl_enabled_protocols: tuple[str, ...] = setting(
        "ssl.enabled.protocols", ("TLSv1.2", "TLSv1.3"), "TLS versions accepted.",
        check=lambda v: None if set(v) <= {"TLSv1.2", "TLSv1.3"} and v else "TLSv1.2 and/or TLSv1.3")
    ssl_endpoint_identification_algorithm: str = setting(
        "ssl.endpoint.identification.algorithm", "https",
        "Where a process connects to this listener itself (a peer's inter.broker.listener.name): https "
        "checks that its certificate names the advertised host; empty does not.", check=_one_of("https", ""))
    ssl_cipher_suites: tuple[str, ...] = setting(
        "ssl.cipher.suites", (), "TLS 1.2 cipher suites in OpenSSL names (empty: OpenSSL's defaults).")
    sasl_enabled_mechanisms: tuple[str, ...] = setting(
        "sasl.enabled.mechanisms", ("SCRAM-SHA-256", "SCRAM-SHA-512"),
        "SASL mechanisms served on SASL listeners: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (GSSAPI, "
        "Kafka's default, and OAUTHBEARER are not).", check=_mechanisms)
    sasl_jaas_config: str = setting(
        "sasl.jaas.config", "",
        "JAAS login configuration; PLAIN users come from PlainLoginModule's user_NAME=\"password\" "
        "options (usually set per listener and mechanism: listener.name.<l>.plain.sasl.jaas.config).")
    sasl_server_max_receive_size: int = setting(
        "sasl.server.max.receive.size", 524288,
        "Largest frame accepted before and during SASL authentication; a larger one closes the connection.",
        check=at_least(8))


def _mechanism_or_default(value: str) -> str | None:
    return None if not value else _mechanisms((value,))


@dataclass(frozen=True, slots=True)
class InterBrokerConfig:
    """Where and as whom the coordinator's own processes (shards, instances sharing the log upstream)
    reach one another: Kafka's inter-broker listener and mechanism."""

    inter_broker_listener_name: str = setting(
        "inter.broker.listener.name", "",
        "Several shards (either mode) or instances: the listener they forward share requests to one "
        "another on (embedded mode: also where a shard k >= 1 reads shard 0's data plane for its share "
        "groups); empty: the first PLAINTEXT listener. On an SSL or SASL listener a process connects "
        "with that listener's own settings: its trust store (else its key store's certificates) and key "
        "store, and the username and password of its JAAS configuration for "
        "sasl.mechanism.inter.broker.protocol (a user with CLUSTER_ACTION, as Kafka's brokers are super users).",
        parse=lambda v: v.strip().upper())
    sasl_mechanism_inter_broker_protocol: str = setting(
        "sasl.mechanism.inter.broker.protocol", "",
        "SASL mechanism of that connection: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512; empty: the listener's "
        "first enabled one (Kafka's default, GSSAPI, is not served).",
        parse=lambda v: v.strip().upper(), check=_mechanism_or_default)


@dataclass(frozen=True, slots=True)
class AuthorizerConfig:
    authorizer_class_name: str = setting(
        "authorizer.class.name", "",
        f"Authorization: empty (none: every principal may do everything) or {STANDARD_AUTHORIZER} "
        "(ACLs kept in the record log).", check=_one_of(*AUTHORIZERS))
    super_users: tuple[str, ...] = setting(
        "super.users", (), "Principals allowed everything, separated by semicolons (User:admin;User:ops).",
        parse=_principals)
    allow_everyone_if_no_acl_found: bool = setting(
        "allow.everyone.if.no.acl.found", False,
        "With an authorizer: allow an action on a resource no ACL names at all.")

    @property
    def enabled(self) -> bool:
        return bool(self.authorizer_class_name)


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    connections_max_idle_ms: int = setting(
        "connections.max.idle.ms", 600000,
        "A connection with no traffic and no request in flight for this long is closed.", check=at_least(1))
    max_connections_per_ip: int = setting(
        "max.connections.per.ip", 1000,
        "Most connections open at once from one client address; further ones are closed on accept "
        "(Kafka's default is unbounded; ours is finite, raise it or use the overrides for a busy address).",
        check=at_least(0))
    max_connections_per_ip_overrides: tuple[tuple[str, int], ...] = setting(
        "max.connections.per.ip.overrides", (),
        "Per-address exceptions to max.connections.per.ip, as host:count,...", parse=_host_counts)
    connection_failed_authentication_delay_ms: int = setting(
        "connection.failed.authentication.delay.ms", 100,
        "A failed SASL authentication is answered, and its connection closed, this much later (keep it "
        "below connections.max.idle.ms); 0 answers at once.", check=at_least(0))

    def limit_for(self, host: str) -> int:
        for address, count in self.max_connections_per_ip_overrides:
            if address == host:
                return count
        return self.max_connections_per_ip


def _upstream_protocol(value: str) -> str | None:
    from .listeners import PROTOCOLS

    return None if value in PROTOCOLS else f"must be one of {', '.join(PROTOCOLS)}"


@dataclass(frozen=True, slots=True)
class UpstreamSecurityConfig:
    """How the sidecar reaches its upstream cluster: a Kafka client's `security.protocol`,
    `sasl.*` and `ssl.*` under `upstream.` (the coordinator's own credentials)."""

    security_protocol: str = setting(
        "upstream.security.protocol", "PLAINTEXT",
        "Sidecar mode: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL to the upstream cluster (Kafka's security.protocol).",
        check=_upstream_protocol)
    sasl_mechanism: str = setting(
        "upstream.sasl.mechanism", "SCRAM-SHA-512",
        "Sidecar mode: SASL mechanism upstream: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (Kafka's sasl.mechanism).",
        check=_one_of(*MECHANISMS))
    sasl_jaas_config: str = setting(
        "upstream.sasl.jaas.config", "",
        "Sidecar mode: the coordinator's upstream credentials as a client's JAAS line (PlainLoginModule or "
        "ScramLoginModule with username and password).")
    sasl_username: str = setting(
        "upstream.sasl.username", "",
        "Sidecar mode: the upstream user, as librdkafka's sasl.username (instead of upstream.sasl.jaas.config; ours).")
    sasl_password: str = setting(
        "upstream.sasl.password", "", "Sidecar mode: the upstream user's password (librdkafka's sasl.password; ours).")
    ssl_truststore_location: str = setting(
        "upstream.ssl.truststore.location", "",
        "Sidecar mode: PEM CA certificates the upstream brokers' certificates are checked against (default: the system's).")
    ssl_truststore_certificates: str = setting(
        "upstream.ssl.truststore.certificates", "", "Sidecar mode: the same CA certificates in PEM, inline.")
    ssl_keystore_location: str = setting(
        "upstream.ssl.keystore.location", "",
        "Sidecar mode: PEM file with the coordinator's client key and certificate chain (mutual TLS upstream).")
    ssl_keystore_key: str = setting(
        "upstream.ssl.keystore.key", "", "Sidecar mode: the client private key in PEM, inline.")
    ssl_keystore_certificate_chain: str = setting(
        "upstream.ssl.keystore.certificate.chain", "", "Sidecar mode: the client certificate chain in PEM, inline.")
    ssl_key_password: str = setting(
        "upstream.ssl.key.password", "", "Sidecar mode: password of an encrypted client key.")
    ssl_endpoint_identification_algorithm: str = setting(
        "upstream.ssl.endpoint.identification.algorithm", "https",
        "Sidecar mode: https checks that an upstream certificate names the broker's host; empty does not.",
        check=_one_of("https", ""))
