"""The image and the compose stack, run: with no Docker Hub, a Python base and a Prometheus image are
built from Debian's packages (deploy/debian/build.sh), the coordinator image is built from the
Dockerfile on that base by Compose, and then, with each Compose implementation installed (v2 and
docker-compose 1.29), the stack's coordinator and Prometheus are started, a consumer group of real
clients commits through the published port, Prometheus scrapes the coordinator (up == 1, and sees
the group's members), the coordinator stops cleanly on `compose stop` and comes back with the
group's offsets from its volume, and everything is taken down.

Slow (minutes: debootstrap, apt and pip run). Skipped, saying why, without a Docker CLI, an engine
(or dockerd to start as root), debootstrap or any Compose."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.ops.docker_tools import (
    Compose,
    EngineUnavailable,
    compose_implementations,
    docker_engine,
)
from tests.ops.lockfile import ROOT
from tests.support.clients import make_member, owns_each_exactly_once, poll_until, produce
from tests.support.server import free_port, wait_until

pytestmark = pytest.mark.slow

BASE_IMAGE = "coordinator-base:bookworm"
PROMETHEUS_IMAGE = "coordinator-prometheus:bookworm"
IMAGES = (BASE_IMAGE, PROMETHEUS_IMAGE, "coordinator:local")
TOPIC, PARTITIONS, RECORDS = "orders", 3, 30


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    if not compose_implementations():
        pytest.skip("neither Compose v2 nor docker-compose is installed")
    if shutil.which("debootstrap") is None:
        pytest.skip("debootstrap is not installed (the local base image is built with it)")
    try:
        with docker_engine(tmp_path_factory.mktemp("dockerd")):
            yield
    except EngineUnavailable as reason:
        pytest.skip(str(reason))


@pytest.fixture(scope="module")
def images(engine: None) -> None:
    """The local base and Prometheus images from Debian's packages, and the coordinator image built
    by Compose from the Dockerfile on that base. The images they replace are removed."""
    previous = {image_id(name) for name in IMAGES}
    built = subprocess.run([str(ROOT / "deploy" / "debian" / "build.sh"), BASE_IMAGE, PROMETHEUS_IMAGE],
                           capture_output=True, text=True, timeout=900, check=False)
    assert built.returncode == 0, built.stdout + built.stderr
    compose = compose_implementations()[0]
    done = compose.run("build", "coordinator", env={**os.environ, "PYTHON_IMAGE": BASE_IMAGE},
                       cwd=ROOT, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    base_layers = inspect(BASE_IMAGE)["RootFS"]["Layers"]
    assert inspect("coordinator:local")["RootFS"]["Layers"][:len(base_layers)] == base_layers, \
        "the coordinator image is built on the Debian base"
    for replaced in previous - {image_id(name) for name in IMAGES}:
        if replaced:  # one still used by a container stays
            subprocess.run(["docker", "rmi", replaced], capture_output=True, timeout=60, check=False)


def image_id(name: str) -> str | None:
    done = subprocess.run(["docker", "image", "inspect", "--format", "{{.Id}}", name],
                          capture_output=True, text=True, timeout=30, check=False)
    return done.stdout.strip() if done.returncode == 0 else None


def inspect(name: str) -> dict[str, Any]:
    done = subprocess.run(["docker", "inspect", name], capture_output=True, text=True, timeout=30,
                          check=True)
    [found] = json.loads(done.stdout)
    assert isinstance(found, dict)
    return found


class Stack:
    """One compose project of the coordinator and Prometheus on free host ports."""

    def __init__(self, compose: Compose) -> None:
        self.compose = compose
        self.project = f"coordtest{os.getpid()}{compose.generation}"
        self.port, self.metrics_port, self.prometheus_port = free_port(), free_port(), free_port()
        self.env = {
            **os.environ,
            "PYTHON_IMAGE": BASE_IMAGE, "PROMETHEUS_IMAGE": PROMETHEUS_IMAGE,
            "COORDINATOR_PORT": str(self.port), "COORDINATOR_METRICS_PORT": str(self.metrics_port),
            "PROMETHEUS_PORT": str(self.prometheus_port), "COORDINATOR_ADVERTISED_HOST": "127.0.0.1",
        }

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def run(self, *args: str, timeout: float = 180) -> str:
        done = self.compose.run("-p", self.project, *args, env=self.env, cwd=ROOT, timeout=timeout)
        assert done.returncode == 0, f"compose {' '.join(args)}: {done.stdout}{done.stderr}"
        return done.stdout

    def container(self, service: str) -> dict[str, Any]:
        # By the labels both Compose generations set: `ps` of v2 leaves out stopped containers.
        done = subprocess.run(
            ["docker", "ps", "-a", "-q", "--filter", f"label=com.docker.compose.project={self.project}",
             "--filter", f"label=com.docker.compose.service={service}"],
            capture_output=True, text=True, timeout=30, check=True)
        return inspect(done.stdout.strip())

    def wait_healthy(self, service: str, timeout: float = 120) -> None:
        def healthy() -> bool:
            state = self.container(service)["State"]
            assert state["Status"] in ("created", "running"), state
            return bool(state["Health"]["Status"] == "healthy")

        wait_until(healthy, timeout=timeout, interval=1, message=f"{service} healthy")

    def prometheus(self, query: str) -> list[dict[str, Any]]:
        url = (f"http://127.0.0.1:{self.prometheus_port}/api/v1/query?"
               + urllib.parse.urlencode({"query": query}))
        with urllib.request.urlopen(url, timeout=5) as response:
            answer = json.load(response)
        assert answer["status"] == "success", answer
        result = answer["data"]["result"]
        assert isinstance(result, list)
        return result

    def scraped(self, query: str, expected: str) -> bool:
        try:
            return [sample["value"][1] for sample in self.prometheus(query)] == [expected]
        except OSError:  # Prometheus not listening yet
            return False


@pytest.fixture(params=["v2", "v1"])
def stack(request: pytest.FixtureRequest, images: None) -> Iterator[Stack]:
    found = {c.generation: c for c in compose_implementations()}
    if request.param not in found:
        pytest.skip(f"Compose {request.param} is not installed")
    stack = Stack(found[request.param])
    try:
        stack.run("up", "-d", "coordinator", "prometheus")
        yield stack
    finally:
        # Shown by pytest only when the test fails.
        print(stack.compose.run("-p", stack.project, "logs", "--no-color", env=stack.env,
                                cwd=ROOT).stdout[-20000:])
        stack.run("down", "-v", "--remove-orphans", "-t", "15")


def committed(bootstrap: str, group: str) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        offsets = consumer.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=20)
        return [tp.offset for tp in offsets]
    finally:
        consumer.close()


@pytest.mark.timeout(1800)  # the first parameter also builds the images
def test_a_consumer_group_runs_through_the_compose_stack_and_prometheus_scrapes_it(stack: Stack) -> None:
    stack.wait_healthy("coordinator")
    admin = AdminClient({"bootstrap.servers": stack.bootstrap})
    admin.create_topics([NewTopic(TOPIC, num_partitions=PARTITIONS, replication_factor=1)])[TOPIC].result(20)
    produce(stack.bootstrap, TOPIC, RECORDS, PARTITIONS)

    members = [make_member(stack.bootstrap, "billing", f"m{i}", [TOPIC]) for i in range(2)]
    try:
        poll_until(members, lambda: owns_each_exactly_once(members, PARTITIONS)
                   and sum(len(m.consumed) for m in members) == RECORDS,
                   timeout=90, message="two members sharing the topic and consuming every record")
        for member in members:
            member.consumer.commit(asynchronous=False)
        # Prometheus reaches the coordinator over the compose network and sees the group.
        wait_until(lambda: stack.scraped('up{job="coordinator"}', "1"), timeout=60, interval=1,
                   message="Prometheus scraping the coordinator")
        wait_until(lambda: stack.scraped("sum(coordinator_members)", "2"), timeout=60, interval=1,
                   message="Prometheus seeing the group's two members")
    finally:
        for member in members:
            member.close()

    assert committed(stack.bootstrap, "billing") == [RECORDS // PARTITIONS] * PARTITIONS
    # SIGTERM, drain, exit 0 within the grace period; the offsets survive in the volume.
    stack.run("stop", "coordinator")
    assert stack.container("coordinator")["State"]["ExitCode"] == 0
    stack.run("start", "coordinator")
    stack.wait_healthy("coordinator")
    assert committed(stack.bootstrap, "billing") == [RECORDS // PARTITIONS] * PARTITIONS
