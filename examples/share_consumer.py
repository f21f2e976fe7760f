"""A share group (KIP-932, a queue) consumer: it joins the group, takes records from a topic, each
acknowledged as it is processed, and leaves the group once it has had enough. Needs confluent-kafka
2.15 or later: its ShareConsumer (librdkafka's KIP-932 client, a preview there).

    python examples/share_consumer.py --group queue --topic orders --count 100 --from-earliest

A share group starts reading a partition it never read where its `share.auto.offset.reset` says
(the server's default, `latest`, skips what is already there); `--from-earliest` first sets the
group's own config to `earliest` (IncrementalAlterConfigs on the GROUP resource, what
`kafka-configs.sh --entity-type groups --alter --add-config share.auto.offset.reset=earliest` does).
Exits 1 with one line if the records do not come within `--timeout` seconds, or the cluster
refuses or does not answer.
"""

from __future__ import annotations

import argparse
import sys
import time

import confluent_kafka
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)


def start_from_earliest(bootstrap: str, group: str, timeout: float) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(timeout)
    print(f"group {group}: share.auto.offset.reset=earliest", flush=True)


def consume(args: argparse.Namespace) -> int:
    share_consumer = getattr(confluent_kafka, "ShareConsumer", None)
    if share_consumer is None:
        print(f"share_consumer.py: needs confluent-kafka 2.15 or later (ShareConsumer), this is "
              f"{confluent_kafka.version()[0]}", file=sys.stderr)
        return 1
    if args.from_earliest:
        start_from_earliest(args.bootstrap, args.group, args.timeout)
    # Explicit acknowledgement: a record is accepted once processed, and what the last poll gave
    # beyond --count goes back to the group when the consumer closes, for another member.
    consumer = share_consumer({"bootstrap.servers": args.bootstrap, "group.id": args.group,
                               "share.acknowledgement.mode": "explicit"})
    consumer.subscribe([args.topic])
    taken: dict[int, int] = {}
    deadline = time.monotonic() + args.timeout
    try:
        while sum(taken.values()) < args.count and time.monotonic() < deadline:
            for message in consumer.poll(0.5):  # blocks up to 0.5 s for records
                if message.error() is not None:
                    print(f"share_consumer.py: {message.error()}", file=sys.stderr)
                    return 1
                if sum(taken.values()) < args.count:
                    taken[message.partition()] = taken.get(message.partition(), 0) + 1
                    consumer.acknowledge(message, confluent_kafka.AcknowledgeType.ACCEPT)
        # The acknowledgements reach the group before the consumer leaves it, each partition's answered.
        refused = {f"{tp.topic}-{tp.partition}": error for tp, error in consumer.commit_sync().items() if error}
        if refused:
            print(f"share_consumer.py: acknowledgements refused: {refused}", file=sys.stderr)
            return 1
    finally:
        consumer.close()  # leaves the group, releasing whatever it still holds
    got = sum(taken.values())
    per_partition = ", ".join(f"{p}: {n}" for p, n in sorted(taken.items()))
    print(f"[{args.group}] acknowledged {got} records of {args.topic} ({per_partition or 'none'}) and left the group")
    if got < args.count:
        print(f"share_consumer.py: only {got} of {args.count} records came within {args.timeout:g} s",
              file=sys.stderr)
        return 1
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--group", default="queue")
    parser.add_argument("--topic", default="orders")
    parser.add_argument("--count", type=int, default=100, help="records to take before leaving")
    parser.add_argument("--from-earliest", action="store_true",
                        help="set the group's share.auto.offset.reset to earliest first")
    parser.add_argument("--timeout", type=float, default=60.0)
    args = parser.parse_args()
    try:
        return consume(args)
    except confluent_kafka.KafkaException as exc:  # the cluster refused
        print(f"share_consumer.py: {exc.args[0]}", file=sys.stderr)
        return 1
    except TimeoutError:  # the group config's answer did not come
        print(f"share_consumer.py: no answer from {args.bootstrap} within {args.timeout:g} s", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
