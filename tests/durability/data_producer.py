"""A child process that produces COUNT messages with confluent-kafka (acks=all, idempotent, retries)
and reports every acknowledgement on stdout as `acked PARTITION OFFSET VALUE`, so a test can kill
the server between them; ends with `done` once every message is acknowledged.

    python -m tests.durability.data_producer BOOTSTRAP TOPIC COUNT
"""

from __future__ import annotations

import sys
import time

from confluent_kafka import KafkaError, Message, Producer


def main() -> int:
    bootstrap, topic, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    producer = Producer({
        "bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
        "message.timeout.ms": 120000, "linger.ms": 2, "reconnect.backoff.max.ms": 200,
        "socket.timeout.ms": 5000,
    })
    failures: list[str] = []

    def delivered(error: KafkaError | None, message: Message) -> None:
        if error is not None:
            failures.append(str(error))
            print(f"failed {message.value().decode()} {error}", flush=True)
            return
        print(f"acked {message.partition()} {message.offset()} {message.value().decode()}", flush=True)

    for i in range(count):
        producer.produce(topic, value=b"v%d" % i, key=b"k%d" % (i % 7), on_delivery=delivered)
        if i % 20 == 19:
            producer.poll(0.01)  # paced, so the test can kill the server mid-stream
    deadline = time.monotonic() + 150
    while len(producer) and time.monotonic() < deadline:
        producer.poll(0.1)
    print("done" if not len(producer) and not failures else f"unfinished {len(producer)} {failures[:3]}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
