"""An exactly-once consume-transform-produce processor (confluent-kafka), run as a child process by
the transaction tests so that it can be SIGKILLed in the middle of a transaction.

    python -m tests.sidecar.eos_processor BOOTSTRAP INPUT OUTPUT GROUP TRANSACTIONAL_ID PROTOCOL
        [--hang-after N] [--batch N]

Each transaction reads a batch, writes `out:<value>` with the input's key, sends the consumer's
positions with its group metadata (TxnOffsetCommit) and commits. An abortable error aborts and
rewinds to the committed offsets (what the next owner would read); a fatal one exits 3. It exits 0
once its positions reach the input's end with no transaction open. `--hang-after N`: after N
committed transactions it opens one more, writes and sends its offsets, prints `MID` and waits to
be killed. Progress lines go to stdout.
"""

from __future__ import annotations

import argparse
import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

RECOVERY = {"metadata.recovery.strategy": "none"}
"""librdkafka 2.16 re-bootstraps when every broker it knows is unreachable, which is what a sidecar
failover looks like for an instant (every listener is the sidecar's); a send_offsets_to_transaction
in flight then waits on a decommissioned coordinator handle well past its timeout. The sidecar's
ports are stable across failover, so reconnecting to the known brokers is what recovers."""


def main() -> int:
    parser = argparse.ArgumentParser()
    for name in ("bootstrap", "input", "output", "group", "transactional_id", "protocol"):
        parser.add_argument(name)
    parser.add_argument("--hang-after", type=int, default=-1)
    parser.add_argument("--batch", type=int, default=50)
    args = parser.parse_args()
    consumer_config = {
        **RECOVERY, "bootstrap.servers": args.bootstrap, "group.id": args.group, "group.protocol": args.protocol,
        "isolation.level": "read_committed", "enable.auto.commit": False, "auto.offset.reset": "earliest",
    }
    if args.protocol == "classic":
        consumer_config.update({"session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
    consumer = Consumer(consumer_config)
    producer = Producer({**RECOVERY, "bootstrap.servers": args.bootstrap, "transactional.id": args.transactional_id,
                         "transaction.timeout.ms": 60000, "linger.ms": 5})
    producer.init_transactions(60)
    print("READY", flush=True)
    consumer.subscribe([args.input])
    transactions = 0
    while True:
        batch = [m for m in consumer.consume(args.batch, 0.5) if not m.error()]
        if not batch:
            if done(consumer):
                print(f"DONE {transactions}", flush=True)
                consumer.close()
                return 0
            continue
        try:
            producer.begin_transaction()
            for m in batch:
                producer.produce(args.output, key=m.key(), value=b"out:" + m.value())
            positions = consumer.position(consumer.assignment())
            if transactions == args.hang_after:
                producer.flush(30)
                producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 30)
                print("MID", flush=True)
                time.sleep(3600)
            producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 30)
            producer.commit_transaction(30)
            transactions += 1
            print(f"COMMITTED {transactions} {len(batch)}", flush=True)
        except KafkaException as exc:
            error = exc.args[0]
            print(f"ERROR {error.code()} {error.str()} retriable={error.retriable()} "
                  f"abortable={error.txn_requires_abort()} fatal={error.fatal()}", flush=True)
            if error.fatal() or not (error.txn_requires_abort() or error.retriable()):
                return 3
            producer.abort_transaction(30)
            rewind(consumer)


def done(consumer: Consumer) -> bool:
    assignment = consumer.assignment()
    if not assignment:
        return False
    for tp in consumer.position(assignment):
        _, high = consumer.get_watermark_offsets(TopicPartition(tp.topic, tp.partition), timeout=10, cached=False)
        if tp.offset < 0 or tp.offset < high:
            if tp.offset < 0 and high == 0:
                continue
            return False
    return True


def rewind(consumer: Consumer) -> None:
    """After an abort: back to what the group committed (the aborted batch is read again)."""
    for tp in consumer.committed(consumer.assignment(), timeout=30):
        consumer.seek(TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else -2))


if __name__ == "__main__":
    sys.exit(main())
