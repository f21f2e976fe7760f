"""The headline test: a real history, made by real clients against the real server, exported and
run through the pipeline; the pipeline's numbers match what the test saw the clients do.

For each protocol (classic with the eager range assignor, and KIP-848 `group.protocol=consumer`)
one group goes through six membership changes, each followed by a wait until the group is Stable
again and every live member holds its final partitions: join a, join b (a subprocess), join c,
c leaves, b is SIGKILLed (fenced when its session times out), a leaves. So the pipeline must count
six rebalances, one member fenced by session timeout, and exactly the partition moves the test
computes from the owners it observed between steps.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from coordinator.admin.client import AdminClient
from coordinator.admin.groups import group_state
from coordinator.history.export import export
from pipeline.rebalance_report import build, load
from tests.support.clients import Member, make_member, poll_until
from tests.support.server import ServerProcess, wait_until

pytestmark = pytest.mark.interop

TOPIC = "events"
PARTITIONS = 6
SERVER = {
    "topics": f"{TOPIC}:{PARTITIONS}",
    "history.flush.interval.ms": "100",
    "group.min.session.timeout.ms": "1000",
    "group.consumer.heartbeat.interval.ms": "300",
    "group.consumer.min.heartbeat.interval.ms": "100",
    "group.consumer.session.timeout.ms": "2000",
    "group.consumer.min.session.timeout.ms": "1000",
}
PROTOCOLS: dict[str, dict[str, Any]] = {
    "classic": {"partition.assignment.strategy": "range", "session.timeout.ms": 2000, "heartbeat.interval.ms": 300},
    "consumer": {"group.protocol": "consumer"},
}

CHILD = textwrap.dedent("""
    import json, sys
    from confluent_kafka import Consumer
    bootstrap, group, name, topic, out, settings = sys.argv[1:7]
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": name,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False, **json.loads(settings)})
    consumer.subscribe([topic])
    last = None
    while True:
        consumer.poll(0.05)
        now = sorted(tp.partition for tp in consumer.assignment())
        if now != last:
            with open(out, "a") as handle:
                handle.write(json.dumps(now) + "\\n")
            last = now
""")


class Child:
    """A consumer in its own process (so it can be SIGKILLed), reporting its assignment in a file."""

    def __init__(self, server: ServerProcess, group: str, name: str, settings: dict[str, Any], tmp: Path) -> None:
        self.out = tmp / f"{name}.assignments"
        self.proc = subprocess.Popen([sys.executable, "-c", CHILD, server.bootstrap, group, name, TOPIC,
                                      str(self.out), json.dumps(settings)])

    def assignment(self) -> set[int]:
        if not self.out.exists():
            return set()
        lines = self.out.read_text().splitlines()
        return set(json.loads(lines[-1])) if lines else set()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    process = ServerProcess(tmp_path / "data", overrides=SERVER)
    process.start()
    try:
        yield process
    finally:
        process.stop()


def state_of(server: ServerProcess, group: str) -> str:
    async def ask() -> str:
        async with AdminClient(server.bootstrap, timeout=5) as client:
            return await group_state(client, group)

    return asyncio.run(ask())


def drive(server: ServerProcess, group: str, settings: dict[str, Any], tmp: Path) -> tuple[int, int]:
    """Run the six steps; returns (rebalances, partitions moved) as the test observed them."""
    members: list[Member] = []
    owners: dict[int, str] = {}
    moved = 0
    steps = 0
    child: Child | None = None

    def settle(expected: dict[str, Callable[[], set[int]]]) -> None:
        nonlocal moved, steps
        steps += 1
        live = [m for m in members if not m.closed]

        def settled() -> bool:
            held = {name: get() for name, get in expected.items()}
            owned = sorted(p for parts in held.values() for p in parts)
            if expected and (owned != list(range(PARTITIONS)) or not all(held.values())):
                return False
            return state_of(server, group) == ("Stable" if expected else "Empty")

        poll_until(live, settled, timeout=60, message=f"step {steps}: {sorted(expected)} stable")
        now = {p: name for name, get in expected.items() for p in get()}
        moved += sum(1 for p, owner in now.items() if p in owners and owners[p] != owner)
        owners.update(now)

    try:
        a = make_member(server.bootstrap, group, "a", [TOPIC], **settings)
        members.append(a)
        settle({"a": a.assignment})
        child = Child(server, group, "b", settings, tmp)
        settle({"a": a.assignment, "b": child.assignment})
        c = make_member(server.bootstrap, group, "c", [TOPIC], **settings)
        members.append(c)
        settle({"a": a.assignment, "b": child.assignment, "c": c.assignment})
        c.close()
        settle({"a": a.assignment, "b": child.assignment})
        child.kill()  # no LeaveGroup: the coordinator fences b when its session times out
        settle({"a": a.assignment})
        a.close()
        settle({})
    finally:
        for m in members:
            m.close()
        if child is not None:
            child.kill()
    return steps, moved


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_pipeline_counts_what_real_clients_did(spark: Any, server: ServerProcess, tmp_path: Path, protocol: str) -> None:
    group = f"real-{protocol}"
    rebalances, moved = drive(server, group, PROTOCOLS[protocol], tmp_path)
    history = server.data_dir / "history"
    # The history is written every 100 ms: wait for the third leave to be on disk.
    wait_until(lambda: sum(1 for r in _rows(history) if r["group_id"] == group and r["kind"] == "member_left") == 3,
               timeout=10, message="the last leave in the history")
    exported = tmp_path / "history.parquet"
    assert export(history, exported, "parquet") > 0

    rows = {r["group_id"]: r.asDict() for r in build(load(spark, [exported])).group_day.collect()}
    got = rows[group]
    assert got["group_type"] == protocol
    assert got["rebalances"] == rebalances == 6
    assert got["rebalances_completed"] == 6
    assert got["partitions_moved"] == moved
    assert got["members_fenced_session_timeout"] == 1
    assert got["members_joined"] == 3 and got["members_left"] == 3
    # a's partitions at the end are revoked and never assigned again; every other revocation was.
    assert got["revocations_open"] == PARTITIONS
    assert got["rebalance_max_ms"] > 0


def _rows(history: Path) -> list[dict[str, Any]]:
    from coordinator.history.segments import read_rows

    return list(read_rows([history]))
