"""Listeners as Kafka declares them: `listeners`, `advertised.listeners`, `listener.security.protocol.map`.

- `listeners` is a comma-separated list of `NAME://host:port`; a bare `host:port` is a PLAINTEXT
  listener (ours, kept for `--listen HOST:PORT`). Names are case-insensitive and normalised to upper
  case, as Kafka's `ListenerName.normalised`. Each listener needs a different name and a different
  port (port 0, "any free port", may repeat).
- `listener.security.protocol.map` maps each name to PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL
  (Kafka's default maps each protocol name to itself); a listener whose name it lacks is refused.
- `advertised.listeners` uses the same syntax; a listener it does not name is advertised as it is
  bound. Its names must be listeners (Kafka's rule). An empty host advertises this machine's
  canonical name; the meta-addresses 0.0.0.0 and :: cannot be advertised.
- Per-listener settings are `listener.name.<name lower-cased>.<key>` (`config.Config.for_listener`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL = "PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"
PROTOCOLS = (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)
DEFAULT_PROTOCOL_MAP = ",".join(f"{p}:{p}" for p in (SASL_SSL, PLAINTEXT, SSL, SASL_PLAINTEXT))
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_\-]*")
NON_ROUTABLE = ("0.0.0.0", "::")


@dataclass(frozen=True, slots=True)
class Endpoint:
    name: str
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class Listener:
    """One Kafka listener: where it binds, what it asks of clients, what clients are told."""

    name: str
    protocol: str
    host: str
    port: int
    advertised_host: str
    """Empty: this machine's canonical host name (resolved by the caller)."""
    advertised_port: int

    @property
    def tls(self) -> bool:
        return self.protocol in (SSL, SASL_SSL)

    @property
    def sasl(self) -> bool:
        return self.protocol in (SASL_PLAINTEXT, SASL_SSL)

    @property
    def prefix(self) -> str:
        """Kafka's per-listener config prefix: `listener.name.<name lower-cased>.`."""
        return f"listener.name.{self.name.lower()}."


def parse_endpoint(raw: str) -> Endpoint:
    """`NAME://host:port`, `NAME://[::1]:port` or bare `host:port` (PLAINTEXT)."""
    value = raw.strip()
    name = PLAINTEXT
    if "://" in value:
        name, value = value.split("://", 1)
        if not _NAME.fullmatch(name):
            raise ValueError(f"invalid listener name {name!r}")
        name = name.upper()
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"expected NAME://host:port, got {raw.strip()!r}")
    number = int(port)
    if not 0 <= number <= 65535:
        raise ValueError(f"port {number} out of range")
    return Endpoint(name, host.strip("[]"), number)


def parse_endpoints(raw: str) -> tuple[Endpoint, ...]:
    endpoints = tuple(parse_endpoint(part) for part in raw.split(",") if part.strip())
    names = [e.name for e in endpoints]
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        raise ValueError(f"each listener must have a different name; {', '.join(duplicated)} appears twice")
    ports = [e.port for e in endpoints if e.port]
    if len(set(ports)) != len(ports):
        raise ValueError("each listener must have a different port")
    return endpoints


def parse_protocol_map(raw: str) -> dict[str, str]:
    mapping: dict[str, str] = {}
    for item in raw.split(","):
        if not item.strip():
            continue
        name, sep, protocol = item.partition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not sep or not _NAME.fullmatch(name):
            raise ValueError(f"expected NAME:PROTOCOL, got {item.strip()!r}")
        if protocol not in PROTOCOLS:
            raise ValueError(f"unknown security protocol {protocol!r} for listener {name} "
                             f"(one of {', '.join(PROTOCOLS)})")
        mapping[name] = protocol
    return mapping


def resolve(listeners: str, advertised: str, protocol_map: Mapping[str, str]) -> tuple[Listener, ...]:
    """Every listener with its protocol and advertised address; ValueError("key: message") on a
    name the protocol map lacks or an advertised name that is not a listener."""
    bound = parse_endpoints(listeners)
    if not bound:
        raise ValueError("listeners: at least one listener is required")
    told = {e.name: e for e in parse_endpoints(advertised)} if advertised.strip() else {}
    unknown = sorted(set(told) - {e.name for e in bound})
    if unknown:
        raise ValueError(f"advertised.listeners: {', '.join(unknown)} is not a listener name in listeners")
    result = []
    for endpoint in bound:
        protocol = protocol_map.get(endpoint.name)
        if protocol is None:
            raise ValueError(f"listener.security.protocol.map: no security protocol defined for listener "
                             f"{endpoint.name}")
        shown = told.get(endpoint.name, endpoint)
        result.append(Listener(endpoint.name, protocol, endpoint.host, endpoint.port, shown.host, shown.port))
    return tuple(result)


def of(values: Mapping[str, Any]) -> tuple[Listener, ...]:
    """The listeners of resolved configuration values (`listeners`, `advertised.listeners`,
    `listener.security.protocol.map`)."""
    return resolve(values["listeners"], values["advertised.listeners"], values["listener.security.protocol.map"])
