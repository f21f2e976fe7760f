"""What the real coordinator does to a group id used by both protocols, as the history records it:
a classic group emptied by its last member's leave is taken over by a KIP-848 member (Kafka's
offline upgrade), and the history has one `group_type_changed` row, classic → consumer, between the
classic rows and the consumer rows."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from coordinator.history.segments import read_rows
from tests.support.clients import make_member, poll_until
from tests.support.server import ServerProcess, wait_until

pytestmark = pytest.mark.interop

TOPIC = "events"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    process = ServerProcess(tmp_path / "data", overrides={"topics": f"{TOPIC}:2", "history.flush.interval.ms": "50"})
    process.start()
    try:
        yield process
    finally:
        process.stop()


def test_an_empty_classic_group_taken_over_by_a_consumer_member_is_a_type_change(server: ServerProcess) -> None:
    history = server.data_dir / "history"
    classic = make_member(server.bootstrap, "shared", "old", [TOPIC], **{"partition.assignment.strategy": "range"})
    poll_until([classic], lambda: classic.assignment() == {0, 1}, message="the classic member owns both partitions")
    classic.close()  # LeaveGroup: the classic group is Empty
    wait_until(lambda: any(r["kind"] == "member_left" and r["group_id"] == "shared" for r in read_rows([history])),
               timeout=20, message="the classic leave in the history")
    upgraded = make_member(server.bootstrap, "shared", "new", [TOPIC], **{"group.protocol": "consumer"})
    try:
        poll_until([upgraded], lambda: upgraded.assignment() == {0, 1}, message="the consumer member owns both")
        wait_until(lambda: any(r["kind"] == "partitions_assigned" and r.get("group_type") == "consumer"
                               for r in read_rows([history])), timeout=20, message="the consumer assignment in the history")
    finally:
        upgraded.close()
    rows = [r for r in read_rows([history]) if r["group_id"] == "shared"]
    changes = [(r["old_group_type"], r["group_type"]) for r in rows if r["kind"] == "group_type_changed"]
    assert changes == [("classic", "consumer")]
    at = next(i for i, r in enumerate(rows) if r["kind"] == "group_type_changed")
    assert {r.get("group_type") for r in rows[:at]} == {"classic"}
    assert {r.get("group_type") for r in rows[at + 1:]} == {"consumer"}
