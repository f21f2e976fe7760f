"""The compose profile `sidecar` runs the coordinator in front of the profile's Kafka broker:
its upstream is the broker's in-network listener, and the ports it publishes are its own listener
and the one the port rule gives the broker (base port + KAFKA_NODE_ID)."""

from __future__ import annotations

from coordinator.settings import parse_host_port
from tests.ops.test_compose import interpolate, published, services


def test_sidecar_profile_fronts_the_kafka_broker() -> None:
    sidecar, kafka = services()["sidecar"], services()["kafka"]
    assert sidecar["profiles"] == ["sidecar"] and "sidecar" in kafka["profiles"]
    env = {k: interpolate(str(v)) for k, v in sidecar["environment"].items()}
    broker_env = kafka["environment"]
    inside = next(a for a in broker_env["KAFKA_ADVERTISED_LISTENERS"].split(",") if a.startswith("PLAINTEXT://"))
    assert env["COORDINATOR_UPSTREAM_BOOTSTRAP_SERVERS"] == inside.removeprefix("PLAINTEXT://")
    own = parse_host_port(env["COORDINATOR_LISTENERS"])[1]
    broker = int(env["COORDINATOR_SIDECAR_LISTENER_BASE_PORT"]) + int(broker_env["KAFKA_NODE_ID"])
    metrics = parse_host_port(env["COORDINATOR_METRICS_LISTEN"])[1]
    assert published("sidecar") == {own: own, broker: broker, metrics: 9645}
    assert parse_host_port(env["COORDINATOR_ADVERTISED_LISTENERS"])[1] == own
    assert sidecar["depends_on"]["kafka"]["condition"] == "service_healthy"
