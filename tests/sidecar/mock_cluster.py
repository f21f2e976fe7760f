"""A real upstream for sidecar tests: librdkafka's mock cluster with N brokers, in its own process.

Run as `python -m tests.sidecar.mock_cluster N`: prints the brokers' host:port list (one line, comma
separated, from the cluster's own Metadata) and keeps the cluster alive until the process is killed.
"""

from __future__ import annotations

import sys
import time

from confluent_kafka import Producer


def main() -> None:
    brokers = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    producer = Producer({"test.mock.num.brokers": brokers, "bootstrap.servers": "", "log_level": 3})
    metadata = producer.list_topics(timeout=10)
    print(",".join(f"{b.host}:{b.port}" for b in sorted(metadata.brokers.values(), key=lambda b: b.id)), flush=True)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
