"""KIP-848 over a real socket: raw ConsumerGroupHeartbeat v0/v1 and ConsumerGroupDescribe requests
(kio entities) against the in-process server. The worked example of KIP-848 runs here end to end."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from coordinator.node.server import CoordinatorServer
from tests.support.wire import WireClient, request

CGH, CGD = 68, 69



async def create_topic(client: WireClient, name: str, partitions: int) -> None:
    topic = {"name": name, "num_partitions": partitions, "replication_factor": -1, "assignments": [], "configs": []}
    response = await client.request(request(19, 7, topics=[topic], timeout=5000))
    assert response.topics[0].error_code == 0


class Members:
    """Sends heartbeats and remembers each member's latest assignment, checking they never overlap."""

    def __init__(self, client: WireClient, group: str = "g") -> None:
        self.client = client
        self.group = group
        self.told: dict[str, set[tuple[uuid.UUID, int]]] = {}

    async def heartbeat(self, member_id: str, epoch: int, version: int = 1, **fields: Any) -> Any:
        fields.setdefault("topic_partitions", None)
        response = await self.client.request(
            request(CGH, version, group_id=self.group, member_id=member_id, member_epoch=epoch, **fields)
        )
        if response.error_code == 0 and response.assignment is not None:
            self.told[response.member_id] = {
                (tp.topic_id, p) for tp in response.assignment.topic_partitions for p in tp.partitions
            }
        seen: set[tuple[uuid.UUID, int]] = set()
        for partitions in self.told.values():
            assert not (partitions & seen), f"a partition is in two members' latest responses: {self.told}"
            seen |= partitions
        return response

    async def join(self, member_id: str, topics: list[str], version: int = 1, **fields: Any) -> Any:
        if version >= 1:
            fields.setdefault("subscribed_topic_regex", "")  # librdkafka sends "" for "no regex"
        return await self.heartbeat(
            member_id, 0, version, rebalance_timeout=300_000, subscribed_topic_names=topics, topic_partitions=[],
            **fields,
        )

    async def ack(self, member_id: str, epoch: int, owned: dict[uuid.UUID, set[int]]) -> Any:
        parts = [{"topic_id": t, "partitions": sorted(ps)} for t, ps in owned.items()]
        return await self.heartbeat(member_id, epoch, topic_partitions=parts)


def partitions(response: Any) -> set[int]:
    assert response.assignment is not None, "expected an assignment in the response"
    return {p for tp in response.assignment.topic_partitions for p in tp.partitions}


@pytest.mark.asyncio
async def test_api_versions_advertise_kip848(client: WireClient) -> None:
    response = await client.request(request(18, 3, client_software_name="t", client_software_version="1"))
    ranges = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert ranges[CGH] == (0, 1)
    assert ranges[CGD] == (0, 1)


@pytest.mark.asyncio
async def test_kip848_worked_example_over_the_wire(server: CoordinatorServer, client: WireClient) -> None:
    await create_topic(client, "foo", 3)
    foo = server.catalog.get("foo").topic_id
    m = Members(client)

    a = await m.join("A", ["foo"])
    assert (a.error_code, a.member_id, a.member_epoch) == (0, "A", 1)
    assert a.heartbeat_interval.total_seconds() == 5
    assert partitions(a) == {0, 1, 2}
    assert a.assignment.topic_partitions[0].topic_id == foo

    b = await m.join("B", ["foo"])
    assert (b.member_epoch, partitions(b)) == (2, set())
    assert (await m.heartbeat("B", 2)).assignment is None  # held until A revokes

    a = await m.heartbeat("A", 1)
    kept_a = partitions(a)
    assert a.member_epoch == 1 and len(kept_a) == 2
    (moving,) = {0, 1, 2} - kept_a
    assert (await m.heartbeat("B", 2)).assignment is None  # A has not acknowledged yet

    a = await m.ack("A", 1, {foo: kept_a})
    assert (a.member_epoch, a.assignment) == (2, None)
    b = await m.heartbeat("B", 2)
    assert (b.member_epoch, partitions(b)) == (2, {moving})

    c = await m.join("C", ["foo"])
    assert (c.member_epoch, partitions(c)) == (3, set())
    b = await m.heartbeat("B", 2)
    assert (b.member_epoch, b.assignment) == (3, None)  # B moves to epoch 3 without any change
    a = await m.heartbeat("A", 2)
    assert a.member_epoch == 2 and len(partitions(a)) == 1
    assert (await m.heartbeat("C", 3)).assignment is None  # A still owns C's partition
    a = await m.ack("A", 2, {foo: partitions(a)})
    assert a.member_epoch == 3
    c = await m.heartbeat("C", 3)
    assert c.member_epoch == 3 and len(partitions(c)) == 1
    owned = [m.told[x] for x in ("A", "B", "C")]
    assert sorted(p for s in owned for _, p in s) == [0, 1, 2]

    described = await client.request(request(CGD, 1, group_ids=["g"], include_authorized_operations=False))
    (group,) = described.groups
    assert (group.error_code, group.group_state, group.group_epoch, group.assignment_epoch) == (0, "Stable", 3, 3)
    assert group.assignor_name == "uniform"
    assert sorted(x.member_id for x in group.members) == ["A", "B", "C"]
    assert all(x.member_type == 1 and x.client_host == "/127.0.0.1" for x in group.members)
    assert all(x.assignment.topic_partitions[0].topic_name == "foo" for x in group.members)

    listed = await client.request(request(16, 5, states_filter=[], types_filter=["consumer"]))
    assert [(g.group_id, g.protocol_type, g.group_state, g.group_type) for g in listed.groups] == [
        ("g", "consumer", "Stable", "consumer")
    ]

    left = await m.heartbeat("C", -1)
    assert (left.error_code, left.member_id, left.member_epoch) == (0, "C", -1)


@pytest.mark.asyncio
async def test_errors_carry_kafka_messages(client: WireClient) -> None:
    m = Members(client)
    missing = await m.heartbeat("x", 3)
    assert (missing.error_code, missing.error_message) == (69, "Consumer group g not found.")
    bad = await m.heartbeat("x", 0, rebalance_timeout=1000, subscribed_topic_names=["t"], topic_partitions=None)
    assert (bad.error_code, bad.error_message) == (42, "TopicPartitions must be empty when (re-)joining.")
    assert (bad.member_id, bad.heartbeat_interval.total_seconds(), bad.assignment) == (None, 0, None)
    regex = await m.join("x", [], subscribed_topic_regex="(unclosed")
    assert regex.error_code == 128
    empty_id = await m.join("", ["t"])
    assert (empty_id.error_code, empty_id.error_message) == (42, "MemberId can't be empty.")


@pytest.mark.asyncio
async def test_v0_join_gets_a_server_generated_member_id(client: WireClient) -> None:
    await create_topic(client, "t0", 1)
    m = Members(client, "g0")
    joined = await m.join("", ["t0"], version=0)
    assert joined.error_code == 0 and len(joined.member_id) == 22
    again = await m.heartbeat(joined.member_id, joined.member_epoch, version=0)
    assert (again.error_code, again.member_epoch) == (0, 1)


@pytest.mark.asyncio
async def test_partition_growth_in_the_catalog_reaches_the_group(server: CoordinatorServer, client: WireClient) -> None:
    await create_topic(client, "grow", 1)
    m = Members(client, "gg")
    joined = await m.join("a", ["grow"])
    assert partitions(joined) == {0}
    server.catalog.grow("grow", 3)
    grown = await m.heartbeat("a", joined.member_epoch)
    assert (grown.member_epoch, partitions(grown)) == (2, {0, 1, 2})
    await create_topic(client, "late", 2)
    # A name subscription to a topic created later.
    changed = await m.heartbeat("a", 2, subscribed_topic_names=["grow", "late"])
    late = server.catalog.get("late").topic_id
    assert changed.member_epoch == 3
    assert {(tp.topic_id, p) for tp in changed.assignment.topic_partitions for p in tp.partitions} >= {
        (late, 0), (late, 1)}


@pytest.mark.asyncio
async def test_offset_commit_and_fetch_carry_the_member_epoch(server: CoordinatorServer, client: WireClient) -> None:
    await create_topic(client, "off", 1)
    m = Members(client, "go")
    await m.join("a", ["off"])

    def commit(version: int, epoch: int) -> Any:
        return request(8, version, group_id="go", generation_id_or_member_epoch=epoch, member_id="a",
                      group_instance_id=None, topics=[{"name": "off", "partitions": [
                          {"partition_index": 0, "committed_offset": 5, "committed_metadata": ""}]}])

    ok = await client.request(commit(9, 1))
    assert ok.topics[0].partitions[0].error_code == 0
    stale = await client.request(commit(9, 2))
    assert stale.topics[0].partitions[0].error_code == 113  # STALE_MEMBER_EPOCH
    old = await client.request(commit(8, 1))
    assert old.topics[0].partitions[0].error_code == 35  # UNSUPPORTED_VERSION below v9
    fetch = await client.request(request(9, 9, groups=[{"group_id": "go", "member_id": "a", "member_epoch": 0,
                                                         "topics": None}], require_stable=False))
    assert fetch.groups[0].error_code == 113
    fetch = await client.request(request(9, 9, groups=[{"group_id": "go", "member_id": None, "member_epoch": -1,
                                                         "topics": None}], require_stable=False))
    assert fetch.groups[0].error_code == 0
    assert fetch.groups[0].topics[0].partitions[0].committed_offset == 5


@pytest.mark.asyncio
async def test_describe_classic_and_unknown_groups(client: WireClient) -> None:
    response = await client.request(request(CGD, 0, group_ids=["nope", ""], include_authorized_operations=True))
    nope, empty = response.groups
    assert (nope.error_code, nope.error_message) == (69, "Group nope not found.")
    assert empty.error_code == 24


@pytest.mark.asyncio
async def test_consumer_group_metrics(server: CoordinatorServer, client: WireClient) -> None:
    import asyncio

    from tests.support.metrics import scrape

    port = server.metrics_port
    assert port is not None
    before = await asyncio.to_thread(scrape, port)
    await create_topic(client, "mt", 4)
    m = Members(client, "gm")
    await m.join("a", ["mt"])
    b = await m.join("b", ["mt"])
    a = await m.heartbeat("a", 1)
    await m.ack("a", 1, {server.catalog.get("mt").topic_id: partitions(a)})
    await m.heartbeat("b", b.member_epoch)
    after = await asyncio.to_thread(scrape, port)

    def delta(key: str) -> float:
        return after.get(key, 0) - before.get(key, 0)

    assert after['coordinator_groups{group_type="consumer",state="Stable"}'] >= 1
    assert after['coordinator_consumer_members{state="STABLE"}'] >= 2
    assert delta('coordinator_consumer_target_assignments_total{assignor="uniform"}') == 2
    assert delta('coordinator_consumer_target_assignment_duration_seconds_count{assignor="uniform"}') == 2
    assert delta("coordinator_consumer_partitions_assigned_total") == 4 + 2  # a: 4, then b: 2
    assert delta("coordinator_consumer_partitions_revoked_total") == 2
    assert delta('coordinator_members_joined_total{group_type="consumer"}') == 2
    assert delta('coordinator_rebalances_started_total{group_type="consumer"}') == 2
    assert after['coordinator_request_latency_seconds_count{api="ConsumerGroupHeartbeat"}'] >= 5


def test_fenced_members_are_counted_by_reason() -> None:
    from prometheus_client import REGISTRY

    from coordinator.core import events
    from coordinator.runtime import group_metrics

    def value() -> float:
        sample = REGISTRY.get_sample_value("coordinator_consumer_members_fenced_total", {"reason": "rebalance-timeout"})
        return sample or 0.0

    before = value()
    group_metrics.observer(False)(events.MemberFenced("g", "m", "rebalance-timeout", 3))
    assert value() - before == 1
