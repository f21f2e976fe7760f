"""Group configs in sidecar mode in front of Apache Kafka 4.0: one DescribeConfigs or
IncrementalAlterConfigs naming a group and a topic (and a broker) is split, the group answered by
the coordinator (its log, its groups), the topic and the broker by the upstream, and the answers
come back as one response; the upstream never sees the group's config."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from tests.sidecar.conftest import Upstream, free_base_port, sidecar_process
from tests.support.wire import WireClient, request

DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS, CREATE_TOPICS = 32, 44, 19
TOPIC, BROKER, GROUP = 2, 4, 32
SET = 0
DYNAMIC_TOPIC_CONFIG, DYNAMIC_GROUP_CONFIG = 1, 8


async def call(port: int, req: Any) -> Any:
    client = await WireClient.connect(port)
    try:
        return await client.request(req)
    finally:
        await client.close()


def describe(*resources: tuple[int, str]) -> Any:
    return request(DESCRIBE_CONFIGS, 4, include_synonyms=False, include_documentation=False, resources=[
        {"resource_type": t, "resource_name": n, "configuration_keys": None} for t, n in resources])


def configs(result: Any) -> dict[str, Any]:
    return {c.name: c for c in result.configs}


def test_config_requests_are_split_between_the_coordinator_and_the_upstream(tmp_path: Path,
                                                                           kafka_upstream: Upstream) -> None:
    upstream_port = int(kafka_upstream.bootstrap.rsplit(":", 1)[1])
    base = free_base_port(range(1, 2))
    server = sidecar_process(tmp_path / "sidecar", kafka_upstream.bootstrap, base).start()
    try:
        async def scenario() -> None:
            created = await call(server.port, request(CREATE_TOPICS, 7, timeout=10_000, validate_only=False, topics=[
                {"name": "gc-orders", "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}]))
            assert created.topics[0].error_code in (0, 36)  # created (or left by an earlier run)

            altered = await call(server.port, request(INCREMENTAL_ALTER_CONFIGS, 1, validate_only=False, resources=[
                {"resource_type": GROUP, "resource_name": "gc-group", "configs": [
                    {"name": "consumer.heartbeat.interval.ms", "config_operation": SET, "value": "6000"}]},
                {"resource_type": TOPIC, "resource_name": "gc-orders", "configs": [
                    {"name": "retention.ms", "config_operation": SET, "value": "123456"}]}]))
            assert [(r.resource_type, r.resource_name, r.error_code) for r in altered.responses] == [
                (GROUP, "gc-group", 0), (TOPIC, "gc-orders", 0)]

            described = await call(server.port, describe((TOPIC, "gc-orders"), (GROUP, "gc-group"), (BROKER, "1")))
            topic, group, broker = described.results
            assert (topic.resource_name, topic.error_code) == ("gc-orders", 0)
            retention = configs(topic)["retention.ms"]
            assert (retention.value, retention.config_source) == ("123456", DYNAMIC_TOPIC_CONFIG)  # the upstream's
            assert (group.resource_name, group.error_code) == ("gc-group", 0)
            heartbeat = configs(group)["consumer.heartbeat.interval.ms"]
            assert (heartbeat.value, heartbeat.config_source) == ("6000", DYNAMIC_GROUP_CONFIG)  # ours
            assert "streams.num.standby.replicas" in configs(group)  # served here, unknown to Kafka 4.0
            assert (broker.error_code, configs(broker)["node.id"].value) == (0, "1")  # broker 1 answered

            # The group's config stayed here: the upstream itself has none for it.
            (theirs,) = (await call(upstream_port, describe((GROUP, "gc-group")))).results
            assert theirs.error_code == 0
            upstream_value = configs(theirs)["consumer.heartbeat.interval.ms"]
            assert (upstream_value.value != "6000", upstream_value.config_source != DYNAMIC_GROUP_CONFIG) == (True, True)

        asyncio.run(scenario())
    finally:
        server.stop()
