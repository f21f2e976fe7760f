"""Three sidecar instances sharing the coordinator's log on an Apache Kafka 4.0
(`coordinator.log.storage=upstream`), as the instance tests start them, and what those tests ask
the instances: the log partitions each owns (from its log), who coordinates a group
(FindCoordinator), the brokers each presents (Metadata), and a classic group's generations as its
coordinator holds them (the private DescribeGroupGenerations).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import uuid
from collections.abc import Iterator
from pathlib import Path

from kio.schema.find_coordinator.v3.request import FindCoordinatorRequest
from kio.schema.metadata.v12.request import MetadataRequest
from kio.static.primitive import i8

from protocol.build import build
from protocol.private import DESCRIBE_GROUP_GENERATIONS
from protocol.schemas import request_schema
from tests.clusterlog.test_upstream_storage import LOG_PARTITIONS, ensure_topic, upstream_instance
from tests.durability.test_failover import PARTITIONS, TOPIC
from tests.sidecar.conftest import free_base_port
from tests.support.kafka import KafkaBroker
from tests.support.server import ServerProcess, free_port, wait_until
from tests.support.wire import WireClient


def owned(server: ServerProcess) -> frozenset[int]:
    """The partitions the instance's last instance-group assignment gave it (from its log)."""
    last: frozenset[int] = frozenset()
    for line in server.log().splitlines():
        if line.startswith("{") and '"instance_group_assignment"' in line:
            last = frozenset(json.loads(line)["owned"])
    return last


def divided(servers: list[ServerProcess]) -> bool:
    shares = [owned(s) for s in servers]
    return all(shares) and sum(len(s) for s in shares) == LOG_PARTITIONS \
        and frozenset().union(*shares) == frozenset(range(LOG_PARTITIONS))


async def _find(port: int, group: str) -> tuple[int, int, int]:
    client = await WireClient.connect(port)
    try:
        response = await client.request(FindCoordinatorRequest(key=group, key_type=i8(0)))
    finally:
        await client.close()
    return int(response.error_code), int(response.node_id), int(response.port)


def coordinator_of(servers: list[ServerProcess], group: str, asked: ServerProcess) -> ServerProcess | None:
    code, _, port = asyncio.run(_find(asked.port, group))
    return next((s for s in servers if s.port == port), None) if code == 0 else None


async def _brokers(port: int) -> dict[int, tuple[str, int]]:
    client = await WireClient.connect(port)
    try:
        response = await client.request(MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                                        include_topic_authorized_operations=False))
    finally:
        await client.close()
    return {int(b.node_id): (b.host, int(b.port)) for b in response.brokers}


def brokers(server: ServerProcess) -> dict[int, tuple[str, int]]:
    """node id -> (host, port) in the instance's Metadata answer."""
    return asyncio.run(_brokers(server.port))


def presented_alike(servers: list[ServerProcess]) -> bool:
    """Every instance's Metadata names the same brokers: the upstream broker at the one shared
    address, and every instance's own node (so losing one leaves a client other brokers it knows)."""
    everyone = {1: ("127.0.0.1", int(servers[0].overrides["sidecar.listener.base.port"]) + 1)} | {
        int(s.overrides["sidecar.node.id"]): ("127.0.0.1", s.port) for s in servers}
    return all(brokers(s) == everyone for s in servers)


async def _generations(port: int, group: str) -> tuple[int, str, int, dict[str, int]]:
    client = await WireClient.connect(port)
    try:
        answer = await client.request(build(request_schema(DESCRIBE_GROUP_GENERATIONS, 0), {"groups": [group]}))
    finally:
        await client.close()
    [described] = answer.groups
    return (int(described.error_code), described.group_state, int(described.generation_id),
            {m.member_id: int(m.generation_id) for m in described.members})


def generations(server: ServerProcess, group: str) -> tuple[int, str, int, dict[str, int]]:
    """A classic group as its coordinator holds it: error, state, generation, each member's generation
    (the private DescribeGroupGenerations)."""
    return asyncio.run(_generations(server.port, group))


@contextlib.contextmanager
def three_instances(tmp_path: Path, kafka_broker: KafkaBroker, **overrides: str) -> Iterator[list[ServerProcess]]:
    """Three instances sharing a fresh log topic of the broker, each its own ports and data directory
    (and ``overrides`` as settings), running and the log partitions divided among them; stopped
    (resumed first, if paused) at the end."""
    ensure_topic(kafka_broker, TOPIC, PARTITIONS)
    log_topic = f"coordinator-log-{uuid.uuid4().hex[:8]}"
    # One base port for all: the instances share each broker's listener port (SO_REUSEPORT), as
    # instances on several machines share one advertised host behind a load balancer.
    base = free_base_port()
    servers = [upstream_instance(tmp_path / f"i{n}", kafka_broker, log_topic, base, free_port(),
                                 **{"sidecar.node.id": str(1000 + n), **overrides}) for n in (1, 2, 3)]
    try:
        for server in servers:
            server.start(wait=False)
        for server in servers:
            server.wait_ready(60)
        wait_until(lambda: divided(servers), timeout=60, message="the log partitions divided among three")
        yield servers
    finally:
        for server in servers:
            if server.proc is not None and server.proc.poll() is None:
                server.proc.send_signal(signal.SIGCONT)
            server.stop()
