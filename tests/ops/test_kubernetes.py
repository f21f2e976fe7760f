"""deploy/kubernetes/coordinator.yaml, rendered as Kubernetes would and checked for what every
instance with the log upstream needs: a Deployment of several stateless pods (no volume that
outlives a pod) and a Service selecting them; each pod's node id computed from its pod name by the
container's own command (run here with sh, for several pod names: distinct, stable, in range), its
advertised listener from the pod IP through the downward API; and the environment, with the
downward API's values substituted, resolved by the coordinator's own configuration (unknown keys and
bad values are refused there) into upstream storage in sidecar mode."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any

import yaml

from coordinator import config
from tests.ops.lockfile import ROOT

MANIFEST = ROOT / "deploy" / "kubernetes" / "coordinator.yaml"
POD_IP = "10.1.2.3"


def documents() -> dict[str, dict[str, Any]]:
    loaded = [d for d in yaml.safe_load_all(MANIFEST.read_text()) if d]
    by_kind = {d["kind"]: d for d in loaded}
    assert len(by_kind) == len(loaded), "one document of each kind"
    return by_kind


def container() -> dict[str, Any]:
    [only] = documents()["Deployment"]["spec"]["template"]["spec"]["containers"]
    return dict(only)


def env_entries() -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in container()["env"]}


def rendered_env(pod_name: str, node_id: str) -> dict[str, str]:
    """The container's environment as the kubelet gives it: downward API fields filled in, `$(VAR)`
    references to earlier variables expanded; plus the node id the command exports."""
    fields = {"metadata.name": pod_name, "status.podIP": POD_IP}
    env: dict[str, str] = {}
    for name, entry in env_entries().items():
        if "valueFrom" in entry:
            env[name] = fields[entry["valueFrom"]["fieldRef"]["fieldPath"]]
        else:
            env[name] = re.sub(r"\$\((\w+)\)", lambda m: env[m.group(1)], str(entry["value"]))
    return env | {"COORDINATOR_SIDECAR_NODE_ID": node_id}


def node_id_of(pod_name: str, tmp_path: Path) -> str:
    """Run the container's command with sh; `coordinator` stands in as a script printing the id it got."""
    stand_in = tmp_path / "coordinator"
    stand_in.write_text('#!/bin/sh\necho "$COORDINATOR_SIDECAR_NODE_ID $*"\n')
    stand_in.chmod(0o755)
    command = container()["command"]
    env = {"PATH": f"{tmp_path}:{os.environ['PATH']}", "POD_NAME": pod_name}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=10, check=False)
    assert done.returncode == 0, done.stderr
    node_id, _, args = done.stdout.strip().partition(" ")
    assert args == "serve", "the command ends by exec'ing `coordinator serve`"
    return node_id


def test_a_deployment_of_several_pods_and_a_service_selecting_them() -> None:
    docs = documents()
    assert set(docs) == {"Deployment", "Service"}
    deployment, service = docs["Deployment"], docs["Service"]
    assert deployment["spec"]["replicas"] >= 3
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert service["spec"]["selector"].items() <= labels.items()
    ports = {p["name"]: p["containerPort"] for p in container()["ports"]}
    assert {p["targetPort"] for p in service["spec"]["ports"]} <= set(ports)
    assert {p["name"]: p["port"] for p in service["spec"]["ports"]}["kafka"] == ports["kafka"]


def test_pods_keep_nothing_that_outlives_them_and_stop_after_handing_over() -> None:
    pod = documents()["Deployment"]["spec"]["template"]["spec"]
    assert all(set(v) == {"name", "emptyDir"} for v in pod.get("volumes", [])), "no shared or persistent volume"
    assert "volumeClaimTemplates" not in documents()["Deployment"]["spec"]
    shutdown_s = int(config.resolve(environ=rendered_env("coordinator-a", "1001")).get("shutdown.timeout.ms")) / 1000
    assert pod["terminationGracePeriodSeconds"] > shutdown_s
    probe = container()["readinessProbe"]["httpGet"]
    assert probe["path"] == "/readyz" and probe["port"] == "metrics"


def test_each_pod_gets_its_own_stable_node_id_from_its_name(tmp_path: Path) -> None:
    names = [f"coordinator-7d9f8c6b5-{suffix}" for suffix in ("x2k9p", "b7qzl", "m4n8r", "t5w2c")]
    ids = [node_id_of(name, tmp_path) for name in names]
    assert len(set(ids)) == len(ids), ids
    assert node_id_of(names[0], tmp_path) == ids[0], "a restarted pod keeps its id"
    assert all(1000 <= int(i) <= 2**31 - 1 for i in ids), ids


def test_the_advertised_address_is_the_pod_ip_from_the_downward_api() -> None:
    entries = env_entries()
    assert entries["POD_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    assert entries["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    names = list(entries)
    assert names.index("POD_IP") < names.index("COORDINATOR_ADVERTISED_LISTENERS"), \
        "$(POD_IP) expands only after POD_IP is defined"
    assert "$(POD_IP)" in entries["COORDINATOR_ADVERTISED_LISTENERS"]["value"]


def test_the_environment_resolves_to_the_log_upstream_in_sidecar_mode(tmp_path: Path) -> None:
    node_id = node_id_of("coordinator-7d9f8c6b5-x2k9p", tmp_path)
    resolved = config.resolve(environ=rendered_env("coordinator-7d9f8c6b5-x2k9p", node_id))
    assert resolved.get("coordinator.log.storage") == "upstream"
    assert resolved.get("upstream.bootstrap.servers")
    assert str(resolved.get("sidecar.node.id")) == node_id
    assert tuple(resolved.advertised) == (POD_IP, container()["ports"][0]["containerPort"])
    base = int(resolved.get("sidecar.listener.base.port"))
    taken = {p["containerPort"] for p in container()["ports"]}
    assert not taken & set(range(base, base + 16)), "upstream brokers 0-15 get ports of their own"
