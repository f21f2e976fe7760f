"""A child process that commits ever-increasing offsets with confluent-kafka and reports each
attempt and acknowledgement on stdout, so a test can kill the server at any point between them.

    python -m tests.durability.commit_producer BOOTSTRAP GROUP TOPIC START
"""

from __future__ import annotations

import sys

from confluent_kafka import Consumer, KafkaException, TopicPartition


def main() -> int:
    bootstrap, group, topic, start = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                         "socket.timeout.ms": 2000, "reconnect.backoff.max.ms": 100})
    offset = start
    while True:
        offset += 1
        print(f"attempt {offset}", flush=True)
        try:
            consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
        except KafkaException as exc:
            print(f"failed {offset} {exc}", flush=True)
            return 1
        print(f"acked {offset}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
