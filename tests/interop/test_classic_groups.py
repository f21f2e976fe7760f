"""Classic consumer groups formed by real clients against the real server process."""

from __future__ import annotations

import asyncio

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.support.clients import make_member, owns_each_exactly_once, poll_until, produce
from tests.support.metrics import scrape
from tests.support.server import ServerProcess

pytestmark = pytest.mark.interop

TOPIC = "events"
PARTITIONS = 6


@pytest.fixture
def server(tmp_path):
    process = ServerProcess(tmp_path / "data", overrides={"topics": f"{TOPIC}:{PARTITIONS}"})
    process.start()
    try:
        yield process
    finally:
        process.stop()


@pytest.mark.parametrize("strategy", ["range", "roundrobin", "cooperative-sticky"])
def test_three_members_own_every_partition_once(server: ServerProcess, strategy: str) -> None:
    members = [make_member(server.bootstrap, f"g-{strategy}", f"m{i}", [TOPIC],
                           **{"partition.assignment.strategy": strategy}) for i in range(3)]
    try:
        poll_until(members, lambda: owns_each_exactly_once(members, PARTITIONS), message="a full assignment")
    finally:
        for m in members:
            m.close()


def test_cooperative_fourth_member_revokes_only_what_moves_and_leave_keeps_the_rest(server: ServerProcess) -> None:
    config = {"partition.assignment.strategy": "cooperative-sticky"}
    members = [make_member(server.bootstrap, "coop", f"m{i}", [TOPIC], **config) for i in range(3)]
    try:
        poll_until(members, lambda: owns_each_exactly_once(members, PARTITIONS), message="three-member assignment")
        for m in members:
            m.revoked_events.clear()
        members.append(make_member(server.bootstrap, "coop", "m3", [TOPIC], **config))
        poll_until(members, lambda: owns_each_exactly_once(members, PARTITIONS), message="four-member assignment")
        for m in members:
            # KIP-429: a member gives up only partitions that move away from it.
            assert not (m.revoked() & m.assignment()), f"{m.name} had a kept partition revoked"
        before = {m.name: m.assignment() for m in members}
        for m in members:
            m.revoked_events.clear()
        leaver = members[0]
        leaver.close()
        survivors = members[1:]
        poll_until(survivors, lambda: owns_each_exactly_once(survivors, PARTITIONS), message="reassignment after leave")
        for m in survivors:
            assert before[m.name] <= m.assignment(), f"{m.name} lost a partition it owned"
            assert not m.revoked(), f"{m.name} was asked to revoke partitions"
        assert before[leaver.name] <= set().union(*(m.assignment() for m in survivors))
    finally:
        for m in members:
            m.close()


def test_static_member_restart_gets_its_partitions_back_without_rebalancing_others(server: ServerProcess) -> None:
    config = {"partition.assignment.strategy": "range", "session.timeout.ms": 30000}
    members = [make_member(server.bootstrap, "static", f"s{i}", [TOPIC], **{**config, "group.instance.id": f"instance-{i}"})
               for i in range(3)]
    try:
        poll_until(members, lambda: owns_each_exactly_once(members, PARTITIONS), message="static assignment")
        owned = {m.name: m.assignment() for m in members}
        others = members[1:]
        events_before = {m.name: (len(m.assigned_events), len(m.revoked_events)) for m in others}
        rebalances_before = scrape(server.metrics_port).get('coordinator_rebalances_started_total{group_type="classic"}')
        members[0].close()  # a static member leaves no LeaveGroup behind
        restarted = make_member(server.bootstrap, "static", "s0", [TOPIC], **{**config, "group.instance.id": "instance-0"})
        members.append(restarted)
        poll_until([restarted, *others], lambda: restarted.assignment() == owned["s0"], message="restarted member's partitions")
        # The server started no rebalance, and the others saw none.
        assert scrape(server.metrics_port).get('coordinator_rebalances_started_total{group_type="classic"}') == rebalances_before
        for m in others:
            assert m.assignment() == owned[m.name]
            assert (len(m.assigned_events), len(m.revoked_events)) == events_before[m.name], f"{m.name} rebalanced"
    finally:
        for m in members:
            m.close()


def test_committed_offsets_are_what_the_successor_fetches(server: ServerProcess) -> None:
    produce(server.bootstrap, TOPIC, 60, PARTITIONS)
    first = make_member(server.bootstrap, "handover", "first", [TOPIC], **{"partition.assignment.strategy": "range"})
    try:
        poll_until([first], lambda: len(first.consumed) >= 30, message="30 messages")
        positions = first.consumer.position([TopicPartition(TOPIC, p) for p in range(PARTITIONS)])
        committed = first.consumer.commit(offsets=positions, asynchronous=False)
        assert all(tp.error is None for tp in committed)
        expected = {tp.partition: tp.offset for tp in positions}
    finally:
        first.close()
    successor = Consumer({"bootstrap.servers": server.bootstrap, "group.id": "handover", "enable.auto.commit": False})
    try:
        fetched = successor.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=10)
        assert {tp.partition: tp.offset for tp in fetched} == expected
    finally:
        successor.close()


def test_aiokafka_members_form_a_group(server: ServerProcess) -> None:
    from aiokafka import AIOKafkaConsumer

    async def scenario() -> list[set[int]]:
        consumers = [AIOKafkaConsumer(TOPIC, bootstrap_servers=server.bootstrap, group_id="aio", client_id=f"aio{i}",
                                      heartbeat_interval_ms=300, session_timeout_ms=10000)
                     for i in range(3)]
        for c in consumers:
            await c.start()
        try:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 45
            while True:
                owned = [{tp.partition for tp in c.assignment()} for c in consumers]
                if sorted(p for o in owned for p in o) == list(range(PARTITIONS)) and all(owned):
                    return owned
                assert loop.time() < deadline, f"aiokafka group never settled: {owned}"
                await asyncio.gather(*(c.getmany(timeout_ms=50) for c in consumers))
        finally:
            for c in consumers:
                await c.stop()

    owned = asyncio.run(scenario())
    assert len(owned) == 3
