"""What survives a SIGKILL of the server on the embedded data plane: every acknowledged message,
at the offset it was acknowledged with; an idempotent producer retrying across the restart leaves
no duplicates and no gaps; log-end offsets never go backwards.

The server runs as a child process with the default `log.flush.policy=always`; a real confluent-kafka
producer (acks=all, enable.idempotence=true) runs in another, and the server is killed with SIGKILL
several times mid-stream and restarted on the same data directory and port.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.support.server import ServerProcess, wait_until

pytestmark = pytest.mark.interop

TOPIC = "events"
PARTITIONS = 3
COUNT = 3000


def high_watermarks(bootstrap: str) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "hw", "enable.auto.commit": False})
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)[1] for p in range(PARTITIONS)}
    finally:
        consumer.close()


def read_all(bootstrap: str, ends: dict[int, int]) -> dict[tuple[int, int], bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False})
    found: dict[tuple[int, int], bytes] = {}
    try:
        consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
        deadline = time.monotonic() + 60
        while any(sum(1 for (p, _) in found if p == partition) < end for partition, end in ends.items()):
            assert time.monotonic() < deadline, "timed out reading the partitions back"
            message = consumer.poll(0.5)
            if message is None or message.error():
                continue
            key = (message.partition(), message.offset())
            assert key not in found, f"offset {key} delivered twice"
            found[key] = message.value()
    finally:
        consumer.close()
    return found


def test_acknowledged_messages_survive_sigkill_with_their_offsets(tmp_path) -> None:
    rng = random.Random(int(os.environ.get("DURABILITY_SEED", "18")))
    server = ServerProcess(tmp_path / "data", overrides={"topics": f"{TOPIC}:{PARTITIONS}"})
    acked: dict[tuple[int, int], bytes] = {}
    producer = None
    try:
        server.start()
        producer = subprocess.Popen(
            [sys.executable, "-m", "tests.durability.data_producer", server.bootstrap, TOPIC, str(COUNT)],
            stdout=subprocess.PIPE, text=True)
        assert producer.stdout is not None
        kill_at = sorted(rng.sample(range(200, COUNT - 300), 3))
        high_before_kill: dict[int, int] = {}
        outcome = ""
        deadline = time.monotonic() + 240
        for line in producer.stdout:
            assert time.monotonic() < deadline, "producer did not finish"
            words = line.split()
            if words[0] == "acked":
                partition, offset, value = int(words[1]), int(words[2]), words[3].encode()
                assert (partition, offset) not in acked, f"two acknowledgements for offset {(partition, offset)}"
                acked[(partition, offset)] = value
                high_before_kill[partition] = max(high_before_kill.get(partition, 0), offset + 1)
                if kill_at and len(acked) >= kill_at[0]:
                    kill_at.pop(0)
                    server.kill()
                    server.start()
                    # Log-end offsets never go backwards: everything acknowledged is still below them.
                    after = high_watermarks(server.bootstrap)
                    assert all(after[p] >= end for p, end in high_before_kill.items()), (high_before_kill, after)
            else:
                outcome = line.strip()
                break
        assert not kill_at, "the server was not killed as often as planned"
        assert outcome == "done", outcome
        producer.wait(30)

        ends = high_watermarks(server.bootstrap)
        stored = read_all(server.bootstrap, ends)
        for key, value in acked.items():
            assert stored.get(key) == value, f"acknowledged {value!r} at {key}, found {stored.get(key)!r}"
        values = sorted(int(v[1:]) for v in stored.values())
        assert values == list(range(COUNT)), "duplicates or gaps in what was stored"
        assert len(acked) == COUNT
    finally:
        if producer is not None and producer.poll() is None:
            producer.kill()
            producer.wait(10)
        if producer is not None and producer.stdout is not None:
            producer.stdout.close()
        server.stop()


def test_a_standby_takes_over_the_partition_data(tmp_path) -> None:
    data = tmp_path / "data"
    overrides = {"topics": f"{TOPIC}:{PARTITIONS}"}
    active = ServerProcess(data, overrides=overrides).start()
    standby = ServerProcess(data, overrides=overrides, port=active.port)
    standby.log_path = tmp_path / "standby.log"
    producer = None
    try:
        standby.start(wait=False)
        wait_until(lambda: "standby_waiting" in standby.log(), message="the standby to be tailing")
        producer = subprocess.Popen(
            [sys.executable, "-m", "tests.durability.data_producer", active.bootstrap, TOPIC, "600"],
            stdout=subprocess.PIPE, text=True)
        assert producer.stdout is not None
        acked: dict[tuple[int, int], bytes] = {}
        outcome = ""
        for line in producer.stdout:
            words = line.split()
            if words[0] != "acked":
                outcome = line.strip()
                break
            acked[(int(words[1]), int(words[2]))] = words[3].encode()
            if len(acked) == 300:
                active.kill()  # the standby takes the directory, the port, and the producer's retries
        assert outcome == "done", outcome
        standby.wait_ready()  # one /readyz probe has a 0.5 s timeout: under load it can miss once
        stored = read_all(standby.bootstrap, high_watermarks(standby.bootstrap))
        assert all(stored.get(key) == value for key, value in acked.items())
        assert sorted(int(v[1:]) for v in stored.values()) == list(range(600))
    finally:
        if producer is not None:
            if producer.poll() is None:
                producer.kill()
                producer.wait(10)
            if producer.stdout is not None:
                producer.stdout.close()
        standby.stop()
        active.stop()
