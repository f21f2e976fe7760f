"""The sidecar SIGKILLed with a standby on the same data directory: clients continue through the
standby's listeners (same ports: the coordinator's and every upstream broker's), and KIP-848
members keep their ids, epochs and partitions; messages keep flowing through the forwarded path."""

from __future__ import annotations

import json
import time

import pytest
from confluent_kafka import Producer

from tests.durability.test_failover import (
    FAST,
    PARTITIONS,
    TOPIC,
    assert_members_kept_everything,
    consumers,
    settle,
)
from tests.support.clients import poll_until
from tests.support.server import ServerProcess, free_port, wait_until

from .conftest import free_base_port, sidecar_process

pytestmark = pytest.mark.interop


@pytest.mark.slow
def test_members_keep_everything_when_a_standby_takes_over(tmp_path) -> None:
    upstream = ServerProcess(tmp_path / "upstream", overrides={"node.id": "1", "topics": f"{TOPIC}:{PARTITIONS}"})
    upstream.start()
    base, port = free_base_port(), free_port()
    active = sidecar_process(tmp_path / "sidecar", upstream.bootstrap, base, port=port, **FAST).start()
    standby = sidecar_process(tmp_path / "sidecar", upstream.bootstrap, base, port=port, **FAST)
    standby.log_path = tmp_path / "standby.log"
    standby.start(wait=False)
    members = consumers(active.bootstrap)
    try:
        before = settle(members, active.port)
        wait_until(lambda: "standby_waiting" in standby.log(), message="the standby to be tailing")
        assert not standby.ready()
        assert active.proc is not None
        active.proc.kill()
        active.proc.wait(10)
        killed_at = time.monotonic()
        wait_until(standby.ready, timeout=20, interval=0.01, message="standby takeover")
        print(f"standby ready {time.monotonic() - killed_at:.3f}s after the active was killed")
        events = [json.loads(line) for line in standby.log().splitlines() if line.startswith("{")]
        assert any(e["event"] == "sidecar_listener_open" and e["node_id"] == 1 and
                   e["listen"] == f"127.0.0.1:{base + 1}" for e in events)
        assert_members_kept_everything(members, before, standby)
        # Data still flows through the standby's broker listener to the upstream.
        producer = Producer({"bootstrap.servers": standby.bootstrap})
        for i in range(30):
            producer.produce(TOPIC, value=str(i).encode(), partition=i % PARTITIONS)
        assert producer.flush(15) == 0
        poll_until(members, lambda: sum(len(m.consumed) for m in members) >= 30, timeout=30,
                   message="messages produced after the takeover")
    finally:
        for m in members:
            m.close()
        standby.stop()
        active.stop()
        upstream.stop()
