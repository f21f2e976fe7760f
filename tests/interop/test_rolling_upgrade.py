"""Rolling upgrade classic -> KIP-848 -> classic with real librdkafka consumers against the real server
(embedded data plane), while a producer writes: consumers restarted one at a time with
``group.protocol=consumer``, then back one at a time (``tests/interop/rolling.py`` keeps the ledger).
At no instant do two members own one partition, every message is consumed exactly once in the
committed view, no commit fails with STALE_MEMBER_EPOCH, and the group is converted both ways."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.interop.rolling import Ledger, SteadyProducer, end_offsets, group_type
from tests.support.server import ServerProcess

pytestmark = pytest.mark.interop

TOPIC = "rolling"
PARTITIONS = 6
FAST = {
    "topics": f"{TOPIC}:{PARTITIONS}",
    "group.consumer.heartbeat.interval.ms": "500",
    "group.consumer.min.heartbeat.interval.ms": "100",
    "group.consumer.session.timeout.ms": "6000",
    "group.consumer.min.session.timeout.ms": "1000",
}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    process = ServerProcess(tmp_path / "data", overrides=FAST)
    process.start()
    try:
        yield process
    finally:
        process.stop()


def roll(server: ServerProcess, group: str, names: list[str], plan: list[tuple[str, str]]) -> Ledger:
    """Start ``names`` as classic consumers, then restart them in ``plan`` order with the protocol
    given. Each restart: stop the consumer, wait until the others own every partition (so that the
    newcomer's share must be given up by members that hold it, through their protocol's revocation),
    start it again, wait until every partition is owned exactly once with the newcomer taking part.
    Finally drain everything the producer wrote."""
    ledger = Ledger(server.bootstrap, group, TOPIC, PARTITIONS)
    producer = SteadyProducer(server.bootstrap, TOPIC, PARTITIONS).start()
    try:
        try:
            current = {name: ledger.start(name, "classic") for name in names}
            ledger.wait_for(ledger.balanced, 30, "the classic group to form")
            assert group_type(server.bootstrap, group) == "classic"
            for name, protocol in plan:
                ledger.stop(current[name])
                ledger.wait_for(ledger.balanced, 30, f"the others to take over {name}'s partitions")
                current[name] = ledger.start(name, protocol)
                ledger.wait_for(lambda n=current[name]: ledger.balanced(n), 30, f"{name} back with {protocol}")
                expected = "consumer" if any(m.protocol == "consumer" for m in ledger.live()) else "classic"
                assert group_type(server.bootstrap, group) == expected
        finally:
            producer.stop()
        assert producer.failed == [] and producer.sent > 0
        ends = end_offsets(server.bootstrap, TOPIC, PARTITIONS)
        ledger.wait_for(lambda: ledger.caught_up(ends), 30, "every message committed")
    finally:
        for member in ledger.live():
            ledger.stop(member)
    return ledger


def check(ledger: Ledger) -> None:
    """The verdicts of point 4: ownership, the committed view, no STALE_MEMBER_EPOCH commit."""
    assert ledger.violations == [], ledger.violations[:5]
    assert not [e for e in ledger.commit_errors if e[1] == "STALE_MEMBER_EPOCH"], ledger.commit_errors
    problems = ledger.committed_view_errors(end_offsets(ledger.bootstrap, TOPIC, PARTITIONS))
    assert problems == [], problems[:5]
    # Partitions did move between members of both protocols along the way.
    kinds = {kind for _, _, kind, _ in ledger.events}
    assert {"assign", "revoke"} <= kinds


def test_three_cooperative_consumers_roll_to_kip848_and_back(server: ServerProcess) -> None:
    """Three cooperative-sticky consumers restarted one at a time with group.protocol=consumer, then
    back one at a time, while the producer writes."""
    plan = [(n, "consumer") for n in ("a", "b", "c")] + [(n, "classic") for n in ("a", "b", "c")]
    check(roll(server, "roll-3", ["a", "b", "c"], plan))


@pytest.mark.slow
def test_two_rolling_cycles_in_a_different_order(server: ServerProcess) -> None:
    """Up and down twice, the order of the restarts varied, so that every kind of member leaves and
    joins a group of every mix."""
    plan = [("b", "consumer"), ("a", "consumer"), ("b", "classic"), ("c", "consumer"), ("a", "classic"),
            ("b", "consumer"), ("c", "classic"), ("a", "consumer"), ("b", "classic"), ("a", "classic")]
    check(roll(server, "roll-cycles", ["a", "b", "c"], plan))
