"""Sidecar mode's settings, declared once (`coordinator.settings`): `Config.build(SidecarConfig)`."""

from __future__ import annotations

from dataclasses import dataclass

from ..settings import INT32_MAX, at_least, between, parse_host_port, setting


def _routable(host: str) -> str | None:
    """A host clients can connect to: not a meta-address (Kafka refuses 0.0.0.0 as advertised)."""
    return f"{host} is not an address clients can connect to" if host in ("0.0.0.0", "::") else None


def _host_ports(raw: str) -> tuple[str, ...]:
    servers = tuple(part.strip() for part in raw.split(",") if part.strip())
    for server in servers:
        parse_host_port(server)
    return servers


@dataclass(frozen=True, slots=True)
class SidecarConfig:
    upstream_bootstrap_servers: tuple[str, ...] = setting(
        "upstream.bootstrap.servers", (),
        "Sidecar mode: the upstream cluster's host:port list; empty = embedded mode (ours).", parse=_host_ports)
    upstream_metadata_max_age_ms: int = setting(
        "upstream.metadata.max.age.ms", 300000,
        "Sidecar mode: how often upstream Metadata (brokers, topics) is re-read (Kafka's metadata.max.age.ms).",
        check=at_least(100))
    upstream_offsets_mirror_interval_ms: int = setting(
        "upstream.offsets.mirror.interval.ms", 1000,
        "Sidecar mode: how often committed offsets are mirrored to the upstream cluster (ours).", check=at_least(1))
    sidecar_listener_base_port: int = setting(
        "sidecar.listener.base.port", 19092,
        "Sidecar mode: upstream broker N is presented at this port + N (ours).", check=between(1, 65535))
    sidecar_listener_advertised_host: str = setting(
        "sidecar.listener.advertised.host", "",
        "Sidecar mode: the host clients are told for the per-broker listeners; empty = the host of "
        "advertised.listeners. With coordinator.log.storage=upstream, an address every instance answers "
        "(a load balancer or Service over all of them), so broker N's address survives any one instance (ours).",
        check=_routable)
    sidecar_node_id: int = setting(
        "sidecar.node.id", 1000000,
        "Sidecar mode: the coordinator's own node id (shard k: this + k); must differ from every upstream "
        "broker id (ours).",
        check=between(0, INT32_MAX))
