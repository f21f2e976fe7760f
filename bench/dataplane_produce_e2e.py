"""Produce throughput end to end: a real server process and a real confluent-kafka producer.

Starts `python -m coordinator serve` from the tree on PYTHONPATH (so the same script measures any
checkout), produces MESSAGES records of SIZE bytes with acks=all to a 6-partition topic and prints
messages/s and MB/s from the first send to the last acknowledgement.

Usage: PYTHONPATH=<tree> .venv/bin/python bench/dataplane_produce_e2e.py [messages] [size] [k=v ...]
(extra k=v pairs are server overrides, e.g. log.flush.policy=none; producer settings are fixed:
linger.ms=5, enable.idempotence as the client defaults, i.e. true).
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer

from tests.support.server import ServerProcess


def main() -> None:
    messages = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
    size = int(sys.argv[2]) if len(sys.argv) > 2 else 100
    overrides = dict(arg.split("=", 1) for arg in sys.argv[3:])
    with tempfile.TemporaryDirectory() as tmp:
        server = ServerProcess(Path(tmp) / "data", overrides={"topics": "bench:6", **overrides})
        server.start()
        try:
            producer = Producer({"bootstrap.servers": server.bootstrap, "acks": "all", "linger.ms": 5})
            value = b"x" * size
            failed = 0

            def delivered(error: object, _message: object) -> None:
                nonlocal failed
                failed += error is not None

            producer.produce("bench", value, on_delivery=delivered)  # metadata and producer id first
            producer.flush(30)
            start = time.perf_counter()
            for i in range(messages):
                while True:
                    try:
                        producer.produce("bench", value, key=b"%d" % (i % 64), on_delivery=delivered)
                        break
                    except BufferError:
                        producer.poll(0.005)
                if i % 1000 == 0:
                    producer.poll(0)
            assert producer.flush(120) == 0
            elapsed = time.perf_counter() - start
        finally:
            server.stop()
    assert failed == 0, f"{failed} deliveries failed"
    print(f"{messages / elapsed:10.0f} msg/s  {messages * size / elapsed / 1e6:7.1f} MB/s  "
          f"({messages} x {size} B, acks=all, {overrides or 'defaults'})")


if __name__ == "__main__":
    main()
