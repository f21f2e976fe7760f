"""Sidecar mode over several shards, in front of this project's own embedded server as upstream:

- a CreateTopics forwarded by one shard reaches the groups of the other at once (a KIP-848 regex
  subscription on shard 1 is assigned a topic created through shard 0, with
  `upstream.metadata.max.age.ms` at its 5-minute default);
- node ids that cannot be served stop a shard with one line: an upstream broker with a shard's
  coordinator node id, and shard node ids past Kafka's int32.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from coordinator.shards.placement import ShardLayout
from coordinator.shards.reshard import ensure_layout
from protocol.build import build
from protocol.schemas import request_schema
from tests.shards.cluster import PARTITIONS, ShardCluster, group_on
from tests.sidecar.conftest import free_base_port
from tests.support.clients import make_member, poll_until
from tests.support.server import ServerProcess, free_port, free_port_block
from tests.support.wire import WireClient

pytestmark = pytest.mark.interop


def upstream_server(tmp_path: Path, topics: str, node_id: int = 1) -> ServerProcess:
    return ServerProcess(tmp_path / "upstream", port=free_port(), overrides={"node.id": str(node_id),
                                                                             "topics": topics})


def create_topic_at(port: int, name: str, partitions: int) -> None:
    """CreateTopics v5 on one listener (a shard's own: forwarded by that shard)."""

    async def run() -> None:
        client = await WireClient.connect(port)
        try:
            response = await client.request(build(request_schema(19, 5), {
                "topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1,
                            "assignments": [], "configs": []}], "timeout_ms": 10000, "validate_only": False}))
        finally:
            await client.close()
        assert [int(t.error_code) for t in response.topics] == [0]

    asyncio.run(run())


def test_a_topic_created_through_one_shard_reaches_the_groups_of_the_other(tmp_path: Path) -> None:
    upstream = upstream_server(tmp_path, "events-a:2").start()
    cluster = ShardCluster(tmp_path / "data", 2, overrides={
        "upstream.bootstrap.servers": upstream.bootstrap, "sidecar.listener.base.port": str(free_base_port()),
        "group.consumer.heartbeat.interval.ms": "500", "group.consumer.min.heartbeat.interval.ms": "500"})
    member = None
    try:
        cluster.start()
        # Created behind the sidecar's back: shard 1 reads it with the refresh a regex seen for
        # the first time asks for, so once it logs the marker that refresh is behind us.
        create_topic_at(upstream.port, "marker", 1)
        member = make_member(cluster.bootstrap(1), group_on(1, prefix="rx"), "m1", ["^events-.*"],
                             **{"group.protocol": "consumer"})

        def assigned() -> set[tuple[str, int]]:
            assert member is not None
            return {(tp.topic, tp.partition) for tp in member.consumer.assignment()}

        poll_until([member], lambda: assigned() == {("events-a", 0), ("events-a", 1)} and '"topic": "marker"' in
                   cluster.log(1), message="the matching topic assigned, the regex's refresh done")
        create_topic_at(cluster.port, "events-b", 3)  # forwarded by shard 0
        poll_until([member], lambda: assigned() == {("events-a", 0), ("events-a", 1), ("events-b", 0),
                                                    ("events-b", 1), ("events-b", 2)}, timeout=20,
                   message="the topic created through shard 0 assigned by shard 1")
    finally:
        if member is not None:
            member.close()
        cluster.stop()
        upstream.stop()


def serve_shard(data_dir: Path, shard: int, *overrides: str) -> subprocess.CompletedProcess[str]:
    """`coordinator serve --shard K` of a two-shard sidecar that is expected to stop on its own."""
    port = free_port_block(2)
    args = [sys.executable, "-m", "coordinator", "serve", "--data-dir", str(data_dir),
            "--listen", f"127.0.0.1:{port}", "--metrics-listen", "127.0.0.1:0", "--shard", str(shard),
            "--override", "coordinator.shards=2", "--override", f"sidecar.listener.base.port={free_base_port()}"]
    for override in overrides:
        args += ["--override", override]
    env = {k: v for k, v in os.environ.items() if not k.startswith("COORDINATOR_")}
    return subprocess.run(args, capture_output=True, text=True, timeout=60, env=env)


def assert_one_line_exit_2(result: subprocess.CompletedProcess[str], *expected: str) -> None:
    assert "Traceback" not in result.stderr + result.stdout
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    for text in expected:
        assert text in lines[0], lines[0]


def test_an_upstream_broker_with_a_shard_node_id_stops_the_shard(tmp_path: Path) -> None:
    upstream = upstream_server(tmp_path, "events:1", node_id=1_000_001).start()  # shard 1's node id
    try:
        ensure_layout(tmp_path / "data", ShardLayout(PARTITIONS, 2))
        result = serve_shard(tmp_path / "data", 0, f"upstream.bootstrap.servers={upstream.bootstrap}")
    finally:
        upstream.stop()
    assert_one_line_exit_2(result, "upstream broker 1000001", "coordinator shard 1", "sidecar.node.id")


def test_shard_node_ids_past_int32_stop_the_shard(tmp_path: Path) -> None:
    result = serve_shard(tmp_path / "data", 0, "upstream.bootstrap.servers=127.0.0.1:1",
                         f"sidecar.node.id={2**31 - 1}")
    assert_one_line_exit_2(result, "sidecar.node.id 2147483647", "coordinator.shards 2", "2147483647")
