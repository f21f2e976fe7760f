"""`coordinator groups describe` shows the generation each member of a classic group holds (issue
32, point 9): a real confluent-kafka group rebalanced three times, the real CLI as a subprocess, and
the server's own check of a generation (an OffsetCommit at it is accepted, one below is not); and
against Apache Kafka, which does not know the private key, the CLI goes on without it."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient as KafkaAdmin
from confluent_kafka.admin import NewTopic

from coordinator.admin.client import DESCRIBE_GROUPS, AdminClient
from coordinator.admin.generations import group_generations
from protocol.build import build
from protocol.errors import ErrorCode
from protocol.schemas import request_schema
from tests.support.clients import make_member, owns_each_exactly_once, poll_until
from tests.support.server import ServerProcess, wait_until
from tests.support.wire import WireClient

pytestmark = pytest.mark.interop


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "coordinator", *args], capture_output=True, text=True, timeout=60)


def commit_at(port: int, group: str, member_id: str, generation: int) -> int:
    """The error code of an OffsetCommit by `member_id` at `generation` (the server checks it)."""
    request = build(request_schema(8, 9), {
        "group_id": group, "generation_id_or_member_epoch": generation, "member_id": member_id,
        "group_instance_id": None, "topics": [{"name": "t", "partitions": [
            {"partition_index": 0, "committed_offset": 0, "committed_leader_epoch": -1, "committed_metadata": ""}]}]})

    async def send() -> int:
        client = await WireClient.connect(port)
        try:
            response = await client.request(request)
        finally:
            await client.close()
        return int(response.topics[0].partitions[0].error_code)

    return asyncio.run(send())


def settled(bootstrap: str, group: str, members: int) -> dict[str, Any] | None:
    """The CLI's JSON once the group is Stable with `members` members, else None."""
    run = cli("groups", "describe", group, "--bootstrap", bootstrap, "--json")
    assert run.returncode == 0, run.stderr
    view = json.loads(run.stdout)
    return view if view["state"] == "Stable" and len(view["members"]) == members else None


def test_describe_shows_the_generation_every_member_holds(tmp_path) -> None:
    server = ServerProcess(tmp_path / "data", overrides={"topics": "t:4"}).start()
    members = []
    try:
        # Three rebalances past the first: a joins, b joins, c joins, c leaves.
        for name in ("a", "b", "c"):
            members.append(make_member(server.bootstrap, "gens", name, ["t"]))
            poll_until(members, lambda: owns_each_exactly_once(members, 4), message=f"{name} in the group")
        members.pop().close()
        poll_until(members, lambda: owns_each_exactly_once(members, 4), message="c gone")

        view: dict[str, Any] = {}
        wait_until(lambda: view.update(settled(server.bootstrap, "gens", 2) or {}) or view, timeout=30,
                   message="a Stable group of two")
        generation = view["generation_id"]
        assert generation >= 4
        assert sorted(m["client_id"] for m in view["members"]) == ["a", "b"]
        assert [m["generation_id"] for m in view["members"]] == [generation, generation]

        # The server agrees: each member holds exactly that generation.
        for m in view["members"]:
            assert commit_at(server.port, "gens", m["member_id"], generation) == ErrorCode.NONE
            assert commit_at(server.port, "gens", m["member_id"], generation - 1) == ErrorCode.ILLEGAL_GENERATION

        table = cli("groups", "describe", "gens", "--bootstrap", server.bootstrap)
        assert table.returncode == 0, table.stderr
        assert f"PROTOCOL range  GENERATION {generation}" in table.stdout
        for m in view["members"]:
            row = re.search(rf"^{re.escape(m['member_id'])}\s+-\s+{m['client_id']}\s+\S+\s+(\S+)\s", table.stdout, re.M)
            assert row is not None and row.group(1) == str(generation), table.stdout
    finally:
        for m in members:
            m.close()
        server.stop()


def test_against_apache_kafka_describe_goes_on_quietly_without_the_private_key(kafka_broker) -> None:
    bootstrap = kafka_broker.bootstrap
    admin = KafkaAdmin({"bootstrap.servers": bootstrap})  # kept referenced until its future is done
    admin.create_topics([NewTopic("gens-kafka-topic", 3, 1)])["gens-kafka-topic"].result(30)
    members = [make_member(bootstrap, "gens-kafka", name, ["gens-kafka-topic"]) for name in ("a", "b")]
    try:
        poll_until(members, lambda: owns_each_exactly_once(members, 3), message="a group of two on Kafka")

        async def ask() -> tuple[Any, Any, Any]:
            async with AdminClient(bootstrap, timeout=10) as client:
                connection = await client.coordinator("gens-kafka")
                answer, fresh = await group_generations(client, connection, "gens-kafka")
                # Kafka closed the first connection on the unknown key; the fresh one serves.
                described = await fresh.request(DESCRIBE_GROUPS, {"groups": ["gens-kafka"]})
                return answer, fresh is connection, described.groups[0].group_state

        assert asyncio.run(ask()) == (None, False, "Stable")

        run = cli("groups", "describe", "gens-kafka", "--bootstrap", bootstrap, "--json")
        assert run.returncode == 0 and run.stderr == "", run.stderr
        view = json.loads(run.stdout)
        assert (view["state"], view["generation_id"]) == ("Stable", None)
        assert sorted(m["client_id"] for m in view["members"]) == ["a", "b"]
        # What the members' subscriptions name (KIP-792), which lags the group's generation.
        assert all(m["generation_id"] is None or m["generation_id"] >= 0 for m in view["members"])
    finally:
        for m in members:
            m.close()
