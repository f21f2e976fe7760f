"""A standby takes over in the middle of a rolling upgrade: the group is a consumer group with members
of both protocols (real librdkafka consumers, one KIP-848 and two classic cooperative-sticky), the
active server is SIGKILLed, the standby tailing the same data directory takes over the listener.
Every member keeps its member id, epoch, protocol and partitions (no rebalance), and the roll then
goes on to the end under the same checks as ``tests/interop/test_rolling_upgrade.py``."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from kio.schema.consumer_group_describe.v1.request import ConsumerGroupDescribeRequest

from tests.interop.rolling import Ledger, SteadyProducer, end_offsets, group_type
from tests.support.clients import COORDINATOR_LOSS
from tests.support.server import ServerProcess, wait_until
from tests.support.wire import WireClient

pytestmark = pytest.mark.interop

TOPIC = "migrating"
PARTITIONS = 6
GROUP = "mid-migration"
OVERRIDES = {
    "topics": f"{TOPIC}:{PARTITIONS}",
    "group.consumer.heartbeat.interval.ms": "500",
    "group.consumer.min.heartbeat.interval.ms": "100",
    "group.consumer.session.timeout.ms": "6000",
    "group.consumer.min.session.timeout.ms": "1000",
}

Members = dict[str, tuple[int, int, frozenset[int]]]
"""member id -> (member type: 0 classic, 1 consumer protocol; member epoch; partitions)."""


async def describe(port: int) -> tuple[str, Members]:
    """The group's state and its members."""
    client = await WireClient.connect(port)
    try:
        response = await client.request(ConsumerGroupDescribeRequest(group_ids=(GROUP,), include_authorized_operations=False))
    finally:
        await client.close()
    (group,) = response.groups
    assert group.error_code == 0, group
    return group.group_state, {
        m.member_id: (int(m.member_type), int(m.member_epoch),
                      frozenset(p for tp in m.assignment.topic_partitions for p in tp.partitions))
        for m in group.members}


def test_a_standby_takes_over_a_mixed_group_and_the_roll_goes_on(tmp_path: Path) -> None:
    data = tmp_path / "data"
    active = ServerProcess(data, overrides=OVERRIDES).start()
    standby = ServerProcess(data, overrides=OVERRIDES, port=active.port)
    standby.log_path = tmp_path / "standby.log"
    standby.start(wait=False)
    # The members commit in a loop while the active is killed: COORDINATOR_LOSS says why they need it.
    ledger = Ledger(active.bootstrap, GROUP, TOPIC, PARTITIONS, config=COORDINATOR_LOSS)
    producer = SteadyProducer(active.bootstrap, TOPIC, PARTITIONS).start()
    try:
        try:
            current = {n: ledger.start(n, "classic") for n in ("a", "b", "c")}
            ledger.wait_for(ledger.balanced, 30, "the classic group to form")
            ledger.stop(current["a"])
            ledger.wait_for(ledger.balanced, 30, "b and c to take over a's partitions")
            current["a"] = ledger.start("a", "consumer")
            ledger.wait_for(lambda: ledger.balanced(current["a"]), 30, "a back with the consumer protocol")
            assert group_type(active.bootstrap, GROUP) == "consumer"

            # The group is Stable and every client owns what the server says: the state to keep.
            def settled() -> Members | None:
                state, view = asyncio.run(describe(active.port))
                with ledger.lock:
                    owned = {frozenset(m.owned) for m in ledger.live()}
                return view if state == "Stable" and {v[2] for v in view.values()} == owned else None

            before = wait_until(settled, timeout=30, message="server and clients agreeing")
            assert sorted(t for t, _, _ in before.values()) == [0, 0, 1]  # two classic members, one KIP-848
            wait_until(lambda: "standby_waiting" in standby.log(), message="the standby to be tailing")
            events_before = len(ledger.events)
            assert active.proc is not None
            active.proc.kill()
            active.proc.wait(10)
            wait_until(standby.ready, timeout=20, interval=0.01, message="standby takeover")
            # Every member heartbeats the new owner (classic ones every 300 ms, KIP-848 every 500 ms).
            deadline = time.monotonic() + 3
            wait_until(lambda: time.monotonic() > deadline, timeout=5, message="a few heartbeats")
            state, after = asyncio.run(describe(standby.port))
            assert (state, after) == ("Stable", before), "member ids, protocols, epochs or assignments changed"
            assert [e for e in ledger.events[events_before:] if e[2] != "assign" or e[3]] == [], "a rebalance"

            # The roll goes on with the new owner: b and c up, then everyone back down.
            for name, protocol in (("b", "consumer"), ("c", "consumer"), ("a", "classic"), ("b", "classic"),
                                   ("c", "classic")):
                ledger.stop(current[name])
                ledger.wait_for(ledger.balanced, 30, f"the others to take over {name}'s partitions")
                current[name] = ledger.start(name, protocol)
                ledger.wait_for(lambda n=current[name]: ledger.balanced(n), 30, f"{name} back with {protocol}")
            assert group_type(standby.bootstrap, GROUP) == "classic"
        finally:
            producer.stop()
        ends = end_offsets(standby.bootstrap, TOPIC, PARTITIONS)
        ledger.wait_for(lambda: ledger.caught_up(ends), 30, "every message committed")
    finally:
        for member in ledger.live():
            ledger.stop(member)
        standby.stop()
        active.stop()
    assert ledger.violations == [], ledger.violations[:5]
    assert not [e for e in ledger.commit_errors if e[1] == "STALE_MEMBER_EPOCH"], ledger.commit_errors
    assert ledger.committed_view_errors(ends) == []
