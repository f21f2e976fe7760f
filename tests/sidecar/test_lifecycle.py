"""Sidecar start-up, upstream faults, the upstream catalog and the offset import, in front of this
project's own embedded server as a single-broker upstream (node id 1)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.offset_fetch.v7.request import OffsetFetchRequest

from protocol.build import build
from protocol.schemas import request_schema
from tests.support.clients import make_member, poll_until
from tests.support.server import ServerProcess, free_port, wait_until
from tests.support.wire import WireClient

from .conftest import free_base_port, sidecar_process
from .support import group_offsets

pytestmark = pytest.mark.interop

COORDINATOR_LOAD_IN_PROGRESS = 14


def upstream_server(tmp_path, port: int, topics: str) -> ServerProcess:
    return ServerProcess(tmp_path / "upstream", port=port, overrides={"node.id": "1", "topics": topics})


def events(server: ServerProcess) -> list[dict[str, Any]]:
    return [json.loads(line) for line in server.log().splitlines() if line.startswith("{")]


def offset_delete(port: int, group: str, topic: str, partitions: list[int]) -> Any:
    """OffsetDelete through a raw client (confluent-kafka has no call for it)."""
    async def run() -> Any:
        client = await WireClient.connect(port)
        try:
            return await client.request(build(request_schema(47, 0), {"group_id": group, "topics": [
                {"name": topic, "partitions": [{"partition_index": p} for p in partitions]}]}))
        finally:
            await client.close()

    return asyncio.run(run())


def upstream_groups(admin: AdminClient) -> set[str]:
    return {g.group_id for g in admin.list_consumer_groups().result(timeout=10).valid}


def offset_fetch(port: int, group: str) -> Any:
    async def run() -> Any:
        client = await WireClient.connect(port)
        try:
            return await client.request(OffsetFetchRequest(group_id=group, topics=None, require_stable=False))
        finally:
            await client.close()

    return asyncio.run(run())


def test_unreachable_upstream_is_retried_until_it_answers(tmp_path) -> None:
    upstream_port = free_port()
    server = sidecar_process(tmp_path / "sidecar", f"127.0.0.1:{upstream_port}", free_base_port())
    upstream = upstream_server(tmp_path, upstream_port, "t:2")
    try:
        server.start(wait=False)
        wait_until(lambda: any(e["event"] == "upstream_unreachable" and f"127.0.0.1:{upstream_port}" in e["upstream"]
                               for e in events(server)), timeout=60,
                   message="a log line naming the unreachable upstream")
        assert not server.ready()
        # The listener is open; group APIs say the coordinator is still loading.
        wait_until(lambda: offset_fetch(server.port, "g").error_code == COORDINATOR_LOAD_IN_PROGRESS,
                   timeout=30, message="COORDINATOR_LOAD_IN_PROGRESS")
        upstream.start()
        server.wait_ready()
        assert offset_fetch(server.port, "g").error_code == 0
        assert "Traceback" not in server.log()
    finally:
        server.stop()
        upstream.stop()


@pytest.mark.slow
def test_catalog_follows_the_upstream_and_groups_survive_its_restart(tmp_path) -> None:
    upstream_port = free_port()
    upstream = upstream_server(tmp_path, upstream_port, "orders:2").start()
    server = sidecar_process(tmp_path / "sidecar", upstream.bootstrap, free_base_port(),
                             **{"upstream.metadata.max.age.ms": "1000"}).start()
    member = make_member(server.bootstrap, "g848", "m1", ["orders"], **{"group.protocol": "consumer"})
    try:
        poll_until([member], lambda: member.assignment() == {0, 1}, message="both partitions assigned")
        member_id = member.consumer.memberid()
        # The upstream goes away and comes back with more partitions: the coordinator stays up,
        # the member keeps its id, and the new partitions reach it within a refresh.
        upstream.stop()
        wait_until(lambda: any(e["event"] == "upstream_unreachable" for e in events(server)),
                   message="the sidecar noticing the upstream is gone")
        # Not ready while the upstream is away (test_upstream_away has what clients hear); the
        # group lives here and keeps answering.
        wait_until(lambda: not server.ready(), message="/readyz false")
        assert offset_fetch(server.port, "g848").error_code == 0
        upstream.overrides["topics"] = "orders:4"
        upstream.start()
        poll_until([member], lambda: member.assignment() == {0, 1, 2, 3}, timeout=30,
                   message="partitions added upstream assigned")
        assert member.consumer.memberid() == member_id
        # A topic deleted upstream (DeleteTopics is forwarded) is revoked.
        admin = AdminClient({"bootstrap.servers": server.bootstrap})
        admin.delete_topics(["orders"])["orders"].result(timeout=10)
        poll_until([member], lambda: member.assignment() == set(), timeout=30, message="deleted topic revoked")
        assert "Traceback" not in server.log()
    finally:
        member.close()
        server.stop()
        upstream.stop()


def test_a_new_group_starts_from_the_offsets_upstream_holds(tmp_path) -> None:
    upstream = upstream_server(tmp_path, free_port(), "orders:3").start()
    producer = Producer({"bootstrap.servers": upstream.bootstrap})
    for i in range(60):
        producer.produce("orders", value=str(i).encode(), partition=i % 3)
    assert producer.flush(10) == 0
    # Progress the group made before the sidecar existed, committed on the upstream itself.
    before = {0: 7, 1: 11, 2: 15}
    upstream_admin = AdminClient({"bootstrap.servers": upstream.bootstrap})
    upstream_admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
        "legacy", [TopicPartition("orders", p, o) for p, o in before.items()])])["legacy"].result(timeout=10)
    server = sidecar_process(tmp_path / "sidecar", upstream.bootstrap, free_base_port()).start()
    member = make_member(server.bootstrap, "legacy", "m1", ["orders"], **{"group.protocol": "consumer"})
    try:
        poll_until([member], lambda: len(member.consumed) >= 60 - sum(before.values()), timeout=30,
                   message="the rest of the messages")
        first = {p: min(o for q, o, _ in member.consumed if q == p) for p in before}
        assert first == before, "the group did not resume where the upstream said it was"
        assert len(member.consumed) == 60 - sum(before.values())
        assert any(e["event"] == "offsets_imported" and e["group_id"] == "legacy" for e in events(server))
        assert group_offsets(AdminClient({"bootstrap.servers": server.bootstrap}), "legacy", "orders", 3) == before
    finally:
        member.close()
        server.stop()
        upstream.stop()


def test_deleted_offsets_and_groups_are_deleted_upstream_too(tmp_path) -> None:
    upstream = upstream_server(tmp_path, free_port(), "orders:3").start()
    server = sidecar_process(tmp_path / "sidecar", upstream.bootstrap, free_base_port()).start()
    try:
        admin = AdminClient({"bootstrap.servers": server.bootstrap})
        upstream_admin = AdminClient({"bootstrap.servers": upstream.bootstrap})
        committed = {0: 5, 1: 6, 2: 7}
        for group in ("kept", "gone"):
            admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
                group, [TopicPartition("orders", p, o) for p, o in committed.items()])])[group].result(timeout=10)
            wait_until(lambda g=group: group_offsets(upstream_admin, g, "orders", 3) == committed,
                       message=f"{group}'s offsets mirrored upstream")
        # OffsetDelete of one partition here is an OffsetDelete upstream.
        response = offset_delete(server.port, "kept", "orders", [1])
        assert response.error_code == 0 and [p.error_code for t in response.topics for p in t.partitions] == [0]
        wait_until(lambda: group_offsets(upstream_admin, "kept", "orders", 3) == {0: 5, 2: 7},
                   message="the deleted partition gone upstream")
        assert group_offsets(admin, "kept", "orders", 3) == {0: 5, 2: 7}
        # DeleteGroups here is a DeleteGroups upstream; the other group is untouched.
        admin.delete_consumer_groups(["gone"])["gone"].result(timeout=10)
        wait_until(lambda: "gone" not in upstream_groups(upstream_admin), message="the deleted group gone upstream")
        assert group_offsets(upstream_admin, "gone", "orders", 3) == {}
        assert "kept" in upstream_groups(upstream_admin)
        # A group known only upstream: deleting it through the sidecar imports it, deletes it
        # here, then upstream.
        upstream_admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
            "legacy", [TopicPartition("orders", 0, 3)])])["legacy"].result(timeout=10)
        admin.delete_consumer_groups(["legacy"])["legacy"].result(timeout=10)
        wait_until(lambda: "legacy" not in upstream_groups(upstream_admin), message="the legacy group gone upstream")
        # Used again after its deletion, a group's new commits are mirrored.
        admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
            "gone", [TopicPartition("orders", 2, 9)])])["gone"].result(timeout=10)
        wait_until(lambda: group_offsets(upstream_admin, "gone", "orders", 3) == {2: 9},
                   message="the re-used group's new offsets mirrored")
        assert "Traceback" not in server.log()
    finally:
        server.stop()
        upstream.stop()


def test_a_regex_subscription_gets_topics_created_after_the_group_formed(tmp_path) -> None:
    """KIP-848 `subscribed_topic_regex`: topics created after the group formed, on the upstream
    itself or through the sidecar, are assigned once the catalog has read them. The catalog re-reads
    the upstream every `upstream.metadata.max.age.ms` (default 5 minutes, kept here) and at once
    after a CreateTopics forwarded through the sidecar, which brings both topics in."""
    upstream = upstream_server(tmp_path, free_port(), "events-a:2,other:1").start()
    server = sidecar_process(tmp_path / "sidecar", upstream.bootstrap, free_base_port()).start()
    member = make_member(server.bootstrap, "rx", "m1", ["^events-.*"], **{"group.protocol": "consumer"})

    def assigned() -> set[tuple[str, int]]:
        return {(tp.topic, tp.partition) for tp in member.consumer.assignment()}

    def create(admin: AdminClient, *topics: NewTopic) -> None:
        for future in admin.create_topics(list(topics)).values():
            future.result(timeout=10)

    try:
        poll_until([member], lambda: assigned() == {("events-a", 0), ("events-a", 1)},
                   message="the matching topic assigned")
        create(AdminClient({"bootstrap.servers": upstream.bootstrap}), NewTopic("events-b", 3, 1),
               NewTopic("unrelated", 2, 1))
        create(AdminClient({"bootstrap.servers": server.bootstrap}), NewTopic("events-c", 1, 1))
        expected = {("events-a", 0), ("events-a", 1), ("events-b", 0), ("events-b", 1), ("events-b", 2),
                    ("events-c", 0)}
        poll_until([member], lambda: assigned() == expected, timeout=30,
                   message="the topics created after the group formed assigned")
    finally:
        member.close()
        server.stop()
        upstream.stop()
