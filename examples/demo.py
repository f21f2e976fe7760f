"""A hands-on demo of the embedded mode: produce to a topic, run consumers in one group, and watch
partitions move as members come and go. Needs confluent-kafka (`.venv/bin/pip install confluent-kafka`).

    python examples/demo.py produce --topic demo --partitions 6 --count 1000
    python examples/demo.py consume --topic demo --group demo-group --name alice
"""

from __future__ import annotations

import argparse
import signal
import sys
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def produce(args: argparse.Namespace) -> int:
    admin = AdminClient({"bootstrap.servers": args.bootstrap})
    if args.topic not in admin.list_topics(timeout=10).topics:
        admin.create_topics([NewTopic(args.topic, num_partitions=args.partitions)])[args.topic].result(10)
    producer = Producer({"bootstrap.servers": args.bootstrap, "enable.idempotence": False, "linger.ms": 5})
    for i in range(args.count):
        producer.produce(args.topic, key=f"key-{i}".encode(), value=f"message {i}".encode())
        producer.poll(0)
    left = producer.flush(30)
    print(f"produced {args.count - left} messages to {args.topic}")
    return 0 if left == 0 else 1


def consume(args: argparse.Namespace) -> int:
    consumer = Consumer({
        "bootstrap.servers": args.bootstrap, "group.id": args.group, "client.id": args.name,
        "auto.offset.reset": "earliest", "group.protocol": args.protocol,
        **({"partition.assignment.strategy": "cooperative-sticky"} if args.protocol == "classic" else {}),
    })
    running = True

    def stop(*_: object) -> None:
        nonlocal running
        running = False

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)

    owned: set[int] = set()

    def on_assign(c: Consumer, partitions: list[TopicPartition]) -> None:
        owned.update(p.partition for p in partitions)
        print(f"[{args.name}] assigned {sorted(p.partition for p in partitions)}; owns {sorted(owned)}", flush=True)

    def on_revoke(c: Consumer, partitions: list[TopicPartition]) -> None:
        owned.difference_update(p.partition for p in partitions)
        print(f"[{args.name}] revoked {sorted(p.partition for p in partitions)}; owns {sorted(owned)}", flush=True)

    consumer.subscribe([args.topic], on_assign=on_assign, on_revoke=on_revoke)
    count = 0
    last_report = time.monotonic()
    while running:
        message = consumer.poll(0.2)
        if message is not None and not message.error():
            count += 1
        if time.monotonic() - last_report > 5:
            print(f"[{args.name}] consumed {count} so far", flush=True)
            last_report = time.monotonic()
    consumer.close()
    print(f"[{args.name}] left the group after consuming {count} messages")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    commands = parser.add_subparsers(dest="command", required=True)
    p = commands.add_parser("produce")
    p.add_argument("--topic", default="demo")
    p.add_argument("--partitions", type=int, default=6)
    p.add_argument("--count", type=int, default=1000)
    c = commands.add_parser("consume")
    c.add_argument("--topic", default="demo")
    c.add_argument("--group", default="demo-group")
    c.add_argument("--name", required=True)
    c.add_argument("--protocol", choices=["classic", "consumer"], default="classic")
    args = parser.parse_args()
    return produce(args) if args.command == "produce" else consume(args)


if __name__ == "__main__":
    sys.exit(main())
