"""docker-compose.yml's `cluster` profile, run: three coordinator instances sharing their log on the
Kafka container (`coordinator.log.storage=upstream`, no volume of their own). Offsets committed
through them are fetched back after the instance that owned the group is SIGKILLed (`compose kill`):
its partitions moved to the other two, nothing acknowledged was lost.

Slow (the images of tests/ops/test_compose_stack.py are built first). Skipped, saying why, as that
test is, and also when the engine lacks apache/kafka:4.0.0 (it is pulled from Docker Hub, which a
test machine may not reach; `docker pull apache/kafka:4.0.0` where it can). The profile publishes
fixed host ports (41092-43093, 9646-9648, 29092): they must be free."""

from __future__ import annotations

import asyncio
import os
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.ops.docker_tools import compose_implementations
from tests.ops.lockfile import ROOT
from tests.ops.test_compose_stack import BASE_IMAGE, engine, images  # noqa: F401 - fixtures used here
from tests.support.server import wait_until
from tests.support.wire import call, request

pytestmark = pytest.mark.slow

KAFKA_IMAGE = "apache/kafka:4.0.0"
INSTANCES = ("cluster-1", "cluster-2", "cluster-3")
TOPIC, PARTITIONS, GROUP = "orders", 3, "billing"


def listen_port(service: str) -> int:
    services = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    return int(services[service]["environment"]["COORDINATOR_LISTENERS"].rsplit(":", 1)[1])


@pytest.fixture(scope="module")
def kafka_image(engine: None) -> None:  # noqa: F811 - the fixture imported above
    if subprocess.run(["docker", "image", "inspect", KAFKA_IMAGE], capture_output=True).returncode != 0:
        pytest.skip(f"the engine has no {KAFKA_IMAGE} (pulled from Docker Hub; `docker pull {KAFKA_IMAGE}`)")


@pytest.fixture
def cluster(kafka_image: None, images: None) -> Iterator[dict[str, Any]]:  # noqa: F811
    compose = compose_implementations()[0]
    project = f"coordcluster{os.getpid()}"
    env = {**os.environ, "PYTHON_IMAGE": BASE_IMAGE, "COORDINATOR_ADVERTISED_HOST": "127.0.0.1"}

    def run(*args: str) -> str:
        done = compose.run("-p", project, "--profile", "cluster", *args, env=env, cwd=ROOT, timeout=300)
        assert done.returncode == 0, f"compose {' '.join(args)}: {done.stdout}{done.stderr}"
        return done.stdout

    try:
        run("up", "-d", "kafka", *INSTANCES)
        yield {"run": run}
    finally:
        print(compose.run("-p", project, "--profile", "cluster", "logs", "--no-color", env=env, cwd=ROOT).stdout[-20000:])
        run("down", "-v", "--remove-orphans", "-t", "15")


def bootstrap(services: tuple[str, ...]) -> str:
    return ",".join(f"127.0.0.1:{listen_port(s)}" for s in services)


def topic_created() -> bool:
    admin = AdminClient({"bootstrap.servers": "127.0.0.1:29092"})
    try:
        if TOPIC not in admin.list_topics(timeout=10).topics:
            admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
    except KafkaException:  # the broker still starting
        return False
    return True


def commit(servers: str, offsets: dict[int, int]) -> bool:
    consumer = Consumer({"bootstrap.servers": servers, "group.id": GROUP, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(TOPIC, p, o) for p, o in offsets.items()], asynchronous=False)
        return True
    except KafkaException:  # the instances still dividing the log partitions
        return False
    finally:
        consumer.close()


def committed(servers: str) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": servers, "group.id": GROUP, "enable.auto.commit": False})
    try:
        found = consumer.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=20)
    except KafkaException:
        return {}
    finally:
        consumer.close()
    return {tp.partition: tp.offset for tp in found if tp.offset >= 0}


def owner_of_group() -> str:
    response = asyncio.run(call(listen_port(INSTANCES[0]), request(10, 3, key=GROUP, key_type=0)))
    assert int(response.error_code) == 0, response
    return next(s for s in INSTANCES if listen_port(s) == int(response.port))


@pytest.mark.timeout(1800)  # the images may be built first
def test_offsets_survive_the_sigkill_of_the_instance_that_owned_the_group(cluster: dict[str, Any]) -> None:
    wait_until(topic_created, timeout=120, interval=2, message="the topic created on the Kafka container")
    offsets = {0: 5, 1: 6, 2: 7}
    wait_until(lambda: commit(bootstrap(INSTANCES), offsets), timeout=180, interval=2,
               message="a commit acknowledged by the instances")
    owner = owner_of_group()
    cluster["run"]("kill", owner)  # SIGKILL: no hand-over
    survivors = tuple(s for s in INSTANCES if s != owner)
    wait_until(lambda: committed(bootstrap(survivors)) == offsets, timeout=120, interval=2,
               message="the offsets fetched back from the two survivors")
