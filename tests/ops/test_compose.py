"""docker-compose.yml and deploy/ without a Docker engine: every Compose implementation installed
(v2, docker-compose 1.29) accepts the file with each profile, the YAML loads, every mounted config
file exists, ports and the Prometheus scrape target agree with the coordinator's configuration,
declared volumes are used, Grafana's datasource points at the prometheus service and its dashboard
provider at the mounted dashboards. tests/ops/test_compose_stack.py runs the stack itself."""

from __future__ import annotations

import json
import re
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml

from coordinator.config import resolve
from coordinator.settings import parse_host_port
from tests.ops.docker_tools import compose_implementations
from tests.ops.lockfile import ROOT
from tests.ops.test_docker import global_args, image_env

COMPOSE = ROOT / "docker-compose.yml"
CLUSTER = ("cluster-1", "cluster-2", "cluster-3")


def compose() -> dict[str, Any]:
    loaded = yaml.safe_load(COMPOSE.read_text())
    assert isinstance(loaded, dict)
    return loaded


def services() -> dict[str, Any]:
    return compose()["services"]


def mounts(service: str) -> list[tuple[str, str]]:
    """(source, target) of a service's short-syntax volumes."""
    result = []
    for entry in services()[service].get("volumes", []):
        assert isinstance(entry, str), "use the short volume syntax"
        source, target = entry.split(":")[:2]
        result.append((source, target))
    return result


def host_path(service: str, container_path: str) -> Path:
    """The host file behind `container_path`, through the service's bind mounts."""
    for source, target in mounts(service):
        if source.startswith((".", "/")):
            try:
                rest = PurePosixPath(container_path).relative_to(target)
            except ValueError:
                continue
            return ROOT / source / rest
    raise AssertionError(f"{container_path} is not bind-mounted into {service}")


def published(service: str) -> dict[int, int]:
    """Container port → host port."""
    result = {}
    for entry in services()[service].get("ports", []):
        host, container = interpolate(str(entry)).rsplit(":", 2)[-2:]
        result[int(container)] = int(host)
    return result


def interpolate(value: str) -> str:
    """Compose's `${NAME:-default}` with NAME unset."""
    return re.sub(r"\$\{[A-Z_]+:-([^}]*)\}", r"\1", value)


def coordinator_env() -> dict[str, str]:
    compose_env = services()["coordinator"].get("environment", {})
    return {**image_env(), **{k: interpolate(str(v)) for k, v in compose_env.items()}}


def test_the_stack_has_the_coordinator_prometheus_grafana_and_kafka_behind_a_profile() -> None:
    assert set(services()) == {"coordinator", "prometheus", "grafana", "kafka", "sidecar", *CLUSTER}
    build = services()["coordinator"]["build"]
    assert build["context"] == "."
    # The Dockerfile's base image, overridable where Docker Hub cannot be reached.
    assert interpolate(build["args"]["PYTHON_IMAGE"]) == global_args()["PYTHON_IMAGE"]
    for name in ("coordinator", "prometheus", "grafana"):
        assert "profiles" not in services()[name], f"{name} starts by default"
    kafka = services()["kafka"]
    assert "kafka" in kafka["profiles"]
    assert kafka["image"].startswith("apache/kafka:4.")
    environment = kafka["environment"]
    assert set(environment["KAFKA_PROCESS_ROLES"].split(",")) == {"broker", "controller"}, "KRaft combined mode"
    assert environment["KAFKA_CONTROLLER_QUORUM_VOTERS"] == f"{environment['KAFKA_NODE_ID']}@kafka:9093"
    external = next(a for a in environment["KAFKA_ADVERTISED_LISTENERS"].split(",") if a.startswith("EXTERNAL://"))
    assert published("kafka")[parse_host_port(external.replace("EXTERNAL", "PLAINTEXT"))[1]] == 29092


def test_every_bind_mounted_file_exists() -> None:
    count = 0
    for name in services():
        for source, _ in mounts(name):
            if source.startswith((".", "/")):
                count += 1
                assert (ROOT / source).exists(), f"{name} mounts {source}, which does not exist"
    assert count >= 3


def test_declared_volumes_are_used_and_used_volumes_are_declared() -> None:
    declared = set(compose()["volumes"])
    used = {source for name in services() for source, _ in mounts(name) if not source.startswith((".", "/"))}
    assert declared == used
    assert ("coordinator-data", coordinator_env()["COORDINATOR_LOG_DIRS"]) in mounts("coordinator")


def test_published_ports_and_the_scrape_target_match_the_coordinator_configuration() -> None:
    env = coordinator_env()
    kafka_port = parse_host_port(env["COORDINATOR_LISTENERS"])[1]
    metrics_port = parse_host_port(env["COORDINATOR_METRICS_LISTEN"])[1]
    advertised_port = parse_host_port(env["COORDINATOR_ADVERTISED_LISTENERS"])[1]
    assert published("coordinator") == {kafka_port: advertised_port, metrics_port: metrics_port}

    config_file = next(a.split("=", 1)[1] for a in services()["prometheus"]["command"] if a.startswith("--config.file="))
    prometheus = yaml.safe_load(host_path("prometheus", config_file).read_text())
    [job] = prometheus["scrape_configs"]
    assert job.get("metrics_path", "/metrics") == "/metrics"
    targets = [t for c in job["static_configs"] for t in c["targets"]]
    assert targets == [f"coordinator:{metrics_port}"]


def test_grafana_provisions_the_prometheus_datasource_and_the_dashboard() -> None:
    provisioning = host_path("grafana", "/etc/grafana/provisioning")
    [source] = yaml.safe_load((provisioning / "datasources" / "prometheus.yml").read_text())["datasources"]
    prometheus_port = next(iter(published("prometheus")))
    assert source["type"] == "prometheus"
    assert source["url"] == f"http://prometheus:{prometheus_port}"

    [provider] = yaml.safe_load((provisioning / "dashboards" / "coordinator.yml").read_text())["providers"]
    dashboards = host_path("grafana", provider["options"]["path"])
    files = sorted(dashboards.glob("*.json"))
    assert [f.name for f in files] == ["coordinator.json"]
    home = services()["grafana"]["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert host_path("grafana", home) == files[0]
    dashboard = json.loads(files[0].read_text())
    uids = {p["datasource"]["uid"] for p in dashboard["panels"] if "datasource" in p}
    uids |= {t["datasource"]["uid"] for p in dashboard["panels"] for t in p.get("targets", [])}
    assert uids == {source["uid"]}


def test_the_file_has_no_top_level_name_which_docker_compose_1_29_refuses() -> None:
    assert set(compose()) == {"services", "volumes"}
    env_file = dict(line.split("=", 1) for line in (ROOT / ".env").read_text().splitlines()
                    if line and not line.startswith("#"))
    assert env_file == {"COMPOSE_PROJECT_NAME": "coordinator"}, "the project keeps its name through .env"


def test_every_installed_compose_implementation_accepts_the_file_with_each_profile() -> None:
    implementations = compose_implementations()
    if not implementations:
        pytest.skip("neither Compose v2 nor docker-compose is installed")
    for implementation in implementations:
        for profile in ("kafka", "sidecar", "cluster"):  # each adds to the default services
            done = implementation.run("--profile", profile, "config", "-q", cwd=ROOT, timeout=60)
            assert done.returncode == 0, f"compose {implementation.version}, {profile}: {done.stderr}"


def test_the_cluster_profile_runs_three_instances_sharing_their_log_on_the_kafka_container() -> None:
    kafka = services()["kafka"]
    assert "cluster" in kafka["profiles"]
    kafka_env = kafka["environment"]
    internal = next(a for a in kafka_env["KAFKA_ADVERTISED_LISTENERS"].split(",") if a.startswith("PLAINTEXT://"))
    broker_id = int(kafka_env["KAFKA_NODE_ID"])
    resolved = {}
    for name in CLUSTER:
        service = services()[name]
        assert service["profiles"] == ["cluster"] and service["image"] == "coordinator:local"
        assert "volumes" not in service, "an instance keeps nothing of its own: the log is upstream"
        assert service["depends_on"]["kafka"]["condition"] == "service_healthy"
        env = {**image_env(), **{k: interpolate(str(v)) for k, v in service["environment"].items()}}
        # The coordinator's own configuration resolves it (unknown keys and bad values are refused there).
        config = resolve(environ=env)
        resolved[name] = config
        assert config.get("coordinator.log.storage") == "upstream"
        assert config.get("upstream.bootstrap.servers") == (internal.removeprefix("PLAINTEXT://"),)
        listen_port = parse_host_port(env["COORDINATOR_LISTENERS"])[1]
        base = int(config.get("sidecar.listener.base.port"))
        metrics_port = parse_host_port(env["COORDINATOR_METRICS_LISTEN"])[1]
        # Clients reach the instance and the broker it presents at the ports it advertises.
        assert published(name) == {listen_port: config.advertised[1], base + broker_id: base + broker_id,
                                   metrics_port: published(name)[metrics_port]}
    shared = {(c.get("coordinator.log.topic"), c.get("coordinator.log.group.id")) for c in resolved.values()}
    assert len(shared) == 1, "one log topic and one instance group for all three"
    node_ids = {c.get("sidecar.node.id") for c in resolved.values()}
    assert len(node_ids) == len(CLUSTER) and broker_id not in node_ids
    host_ports = [p for name in (*CLUSTER, "kafka") for p in published(name).values()]
    assert len(host_ports) == len(set(host_ports)), "no host port published twice"
