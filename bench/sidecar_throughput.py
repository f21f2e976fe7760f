"""Sidecar mode's cost on the data path: Produce and Fetch through the sidecar against the same
upstream directly, in one run.

Upstream: librdkafka's 3-broker mock cluster (its own process). Each side (direct, sidecar) keeps
its own librdkafka clients open for the whole run, and the measurements alternate between the
sides in short turns (ABBA order), so both see the same machine load; on a shared machine the load
moves by 2x within seconds, and taking turns is what makes the ratio mean something.

- Produce: turns of `--messages` 1 KB keyed messages (producer: acks=all, linger 5 ms), timed to
  the last delivery report.
- Fetch: the mock cluster keeps only about 5 MB per partition, so a fixed data set (up to 64,000
  keyed 1 KB messages over 4 topics of 4 partitions, written once, directly) is read from the
  beginning, one pass per turn, timed from the assignment to the last message.
- Latency, one 1 KB message per request to partition 0, p50/p99 over all turns: the Produce round
  trip (produce + flush); the Fetch round trip (those one-message batches read back with
  fetch.max.bytes at its minimum, so each message is one Fetch: the interval between messages
  at the consumer is one round trip plus the same client overhead on both sides). And the round
  trip of a Fetch whose response is one ~1 MB batch (a raw kio client to the partition leader's
  address or its sidecar listener), where holding a response whole before passing it on would
  show.

The sidecar's own CPU time per MB it forwards is the number that survives a noisy machine; the
ratios move with whatever else runs on it, so the spread of the per-turn ratios is printed too.

Usage: .venv/bin/python bench/sidecar_throughput.py [--messages 100000] [--rounds 3] [--latency 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

from protocol.build import build
from protocol.schemas import request_schema
from tests.sidecar.conftest import free_base_port
from tests.support.server import ServerProcess
from tests.support.wire import WireClient

VALUE = b"x" * 1024
DATASET_TOPICS = 4
DATASET_PER_TOPIC = 16_000  # 4 partitions of ~4 MB each: under the mock cluster's ~5 MB retention
TURNS_PER_ROUND = 4  # Produce turns per round; Fetch reads as many messages in its turns
LARGE_BATCH_MESSAGES = 950  # 1 KB each: one ~1 MB record batch (under message.max.bytes)
SIDES = ("direct", "sidecar")
# Client queues larger than a turn's data: librdkafka's defaults (100,000 queued messages, 64 MB of
# prefetched messages) would make a client wait (a 10 ms poll, a 1 s fetch.queue.backoff.ms) in
# some turns and not others, which is noise, not the data path.
PRODUCER = {"linger.ms": 5, "acks": "all", "queue.buffering.max.messages": 1_000_000}
CONSUMER = {"fetch.wait.max.ms": 100, "queued.max.messages.kbytes": 1_048_576}


def start_mock() -> tuple[subprocess.Popen[bytes], str]:
    proc = subprocess.Popen([sys.executable, "-m", "tests.sidecar.mock_cluster", "3"], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    assert proc.stdout is not None
    return proc, proc.stdout.readline().decode().strip()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (from /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def consumer_config(bootstrap: str, **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": bootstrap, "group.id": "bench-unused", "enable.auto.commit": False, **extra}


def produce(producer: Producer, topic: str, count: int, keys: int = 1000) -> float:
    """Seconds to produce `count` messages and have every delivery report."""
    failed: list[Any] = []

    def report(err: Any, _: Any) -> None:
        if err is not None:
            failed.append(err)

    started = time.perf_counter()
    for i in range(count):
        while True:
            try:
                producer.produce(topic, value=VALUE, key=str(i % keys).encode(), on_delivery=report)
                break
            except BufferError:
                producer.poll(0.01)
        if i % 1000 == 0:
            producer.poll(0)
    left = producer.flush(120)
    if left:
        raise RuntimeError(f"{left} messages to {topic} left unsent after 120 s")
    if failed:
        raise RuntimeError(f"{len(failed)} messages failed, e.g. {failed[0]}")
    return time.perf_counter() - started


def fetch_pass(consumer: Consumer, partitions: list[TopicPartition], total: int) -> float:
    """Seconds from assigning `partitions` (from the beginning) to having read all of them."""
    started = time.perf_counter()
    consumer.assign(partitions)
    got = 0
    while got < total:
        got += sum(1 for m in consumer.consume(min(1000, total - got), 1.0) if not m.error())
        if time.perf_counter() - started > 120:
            raise RuntimeError(f"read {got} of {total} messages in 120 s")
    elapsed = time.perf_counter() - started
    consumer.unassign()
    return elapsed


def produce_latency(producer: Producer, topic: str, count: int) -> list[float]:
    """Produce round trips, one message at a time (to partition 0, one batch per message)."""
    samples = []
    for _ in range(count):
        started = time.perf_counter()
        producer.produce(topic, value=VALUE, partition=0)
        producer.flush(10)
        samples.append(time.perf_counter() - started)
    return samples


def fetch_latency(consumer: Consumer, partition: TopicPartition, count: int) -> list[float]:
    """Fetch round trips: the next `count` + 2 one-message batches of `partition`, one per Fetch;
    the first two intervals (fetching restarting after the pause) are dropped."""
    consumer.resume([partition])
    arrived: list[float] = []
    started = time.perf_counter()
    while len(arrived) < count + 3:
        message = consumer.poll(1.0)
        if message is not None and not message.error():
            arrived.append(time.perf_counter())
        if time.perf_counter() - started > 60:
            raise RuntimeError(f"read {len(arrived)} of {count + 3} one-message batches in 60 s")
    consumer.pause([partition])
    return [b - a for a, b in itertools.pairwise(arrived[2:])]


def write_large_batch(bootstrap: str, topic: str) -> tuple[str, int]:
    """About 1 MB of 1 KB messages as one record batch at the start of partition 0 of `topic`:
    (host, port) of that partition's leader (directly) and its node id."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1000, "batch.size": 1_000_000})
    for _ in range(LARGE_BATCH_MESSAGES):
        producer.produce(topic, value=VALUE, partition=0)
    if producer.flush(30):
        raise RuntimeError(f"the 1 MB batch to {topic} was not written")
    metadata = producer.list_topics(topic, timeout=10)
    leader = metadata.topics[topic].partitions[0].leader
    broker = metadata.brokers[leader]
    return f"{broker.host}:{broker.port}", leader


def large_fetch_latency(port: int, topic: str, count: int) -> list[float]:
    """Round trips of a Fetch whose response is that ~1 MB batch (a raw kio client, one request
    at a time): what store-and-forward would add to, and streaming does not."""
    async def run() -> list[float]:
        client = await WireClient.connect(port)
        try:
            metadata = await client.request(build(request_schema(3, 12), {
                "topics": [{"name": topic, "topic_id": None}], "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False}))
            request = build(request_schema(1, 16), {
                "max_wait": 0, "min_bytes": 1, "max_bytes": 2_000_000, "forgotten_topics_data": [],
                "topics": [{"topic_id": metadata.topics[0].topic_id, "partitions": [
                    {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 2_000_000}]}]})
            samples = []
            for _ in range(count + 1):
                started = time.perf_counter()
                await client.send(request)
                if len(await client.read_frame()) < LARGE_BATCH_MESSAGES * len(VALUE):
                    raise RuntimeError("the Fetch response does not hold the 1 MB batch")
                samples.append(time.perf_counter() - started)
            return samples[1:]
        finally:
            await client.close()

    return asyncio.run(run())


def write_dataset(bootstrap: str, messages: int) -> tuple[list[str], int]:
    """The Fetch data set, written directly: (topics, messages in them)."""
    per_topic = min(DATASET_PER_TOPIC, max(1, messages // DATASET_TOPICS))
    topics = [f"bench-fetch-{i}" for i in range(DATASET_TOPICS)]
    producer = Producer({"bootstrap.servers": bootstrap, **PRODUCER})
    for topic in topics:
        produce(producer, topic, per_topic)
    return topics, per_topic * DATASET_TOPICS


def dataset_partitions(consumer: Consumer, topics: list[str]) -> list[TopicPartition]:
    return [TopicPartition(topic, p, -2) for topic in topics
            for p in consumer.list_topics(topic, timeout=10).topics[topic].partitions]


def turns(count: int) -> list[tuple[str, ...]]:
    """ABBA: the side that goes first alternates, so a drift in load hits both alike."""
    return [SIDES if i % 2 == 0 else SIDES[::-1] for i in range(count)]


def measure(messages: int, rounds: int, latency: int, workdir: Path) -> dict[str, dict[str, Any]]:
    """{"direct": {...}, "sidecar": {...}, "ratios": {...}}: rates summed over all turns, latency
    percentiles over all samples, and the spread of the per-turn ratios."""
    mock, upstream = start_mock()
    base_port = free_base_port()
    server = ServerProcess(workdir / "sidecar-data", overrides={
        "upstream.bootstrap.servers": upstream, "sidecar.listener.base.port": str(base_port)})
    clients: list[Any] = []
    try:
        server.start()
        assert server.proc is not None
        pid = server.proc.pid
        bootstrap = {"direct": upstream, "sidecar": server.bootstrap}
        topics, per_pass = write_dataset(upstream, messages)
        producers = {s: Producer({"bootstrap.servers": bootstrap[s], **PRODUCER}) for s in SIDES}
        latency_producers = {s: Producer({"bootstrap.servers": bootstrap[s], "linger.ms": 0, "acks": "all"})
                             for s in SIDES}
        consumers = {s: Consumer(consumer_config(bootstrap[s], **CONSUMER)) for s in SIDES}
        latency_consumers = {s: Consumer(consumer_config(
            bootstrap[s], **{"fetch.max.bytes": 1000, "message.max.bytes": 1000, "max.partition.fetch.bytes": 1,
                             "fetch.wait.max.ms": 0, "fetch.queue.backoff.ms": 0})) for s in SIDES}
        clients += [*consumers.values(), *latency_consumers.values()]
        partitions = dataset_partitions(consumers["direct"], topics)
        for s in SIDES:  # connections, metadata and topics in place before anything is timed
            produce(producers[s], f"bench-produce-{s}-warm-up", min(messages, 1000))
            fetch_pass(consumers[s], partitions, per_pass)
        seconds = {("produce", s): 0.0 for s in SIDES} | {("fetch", s): 0.0 for s in SIDES}
        cpu = {"produce": 0.0, "fetch": 0.0}
        pair_ratios: dict[str, list[float]] = {"produce": [], "fetch": []}

        def timed(kind: str, side: str, run: Any) -> float:
            before = cpu_seconds(pid)
            took = float(run())
            if side == "sidecar":
                cpu[kind] += cpu_seconds(pid) - before
            seconds[kind, side] += took
            return took

        produce_turns = rounds * TURNS_PER_ROUND
        for i, order in enumerate(turns(produce_turns)):
            took = {s: timed("produce", s, lambda s=s, i=i: produce(producers[s], f"bench-produce-{s}-{i}", messages))
                    for s in order}
            pair_ratios["produce"].append(took["direct"] / took["sidecar"])
            print(f"produce turn {i + 1}/{produce_turns}: direct {took['direct']:.2f} s, "
                  f"sidecar {took['sidecar']:.2f} s, load {os.getloadavg()[0]:.1f}", flush=True)
        fetch_turns = max(1, math.ceil(produce_turns * messages / per_pass))
        for i, order in enumerate(turns(fetch_turns)):
            took = {s: timed("fetch", s, lambda s=s: fetch_pass(consumers[s], partitions, per_pass)) for s in order}
            pair_ratios["fetch"].append(took["direct"] / took["sidecar"])
            print(f"fetch turn {i + 1}/{fetch_turns}: direct {took['direct']:.2f} s, "
                  f"sidecar {took['sidecar']:.2f} s, load {os.getloadavg()[0]:.1f}", flush=True)

        samples: dict[tuple[str, str], list[float]] = {(k, s): [] for k in ("produce", "fetch", "large")
                                                       for s in SIDES}
        blocks = rounds * TURNS_PER_ROUND
        block = max(1, latency // blocks)
        leader_address, leader = write_large_batch(upstream, "bench-large")
        large_port = {"direct": int(leader_address.rsplit(":", 1)[1]), "sidecar": base_port + leader}
        for s in SIDES:  # the one-message batches the Fetch round trips read
            produce_latency(latency_producers[s], f"bench-latency-{s}", 1)
            latency_consumers[s].assign([TopicPartition(f"bench-latency-{s}", 0, -2)])
            latency_consumers[s].pause([TopicPartition(f"bench-latency-{s}", 0)])
        for order in turns(blocks):
            for s in order:
                samples["produce", s] += produce_latency(latency_producers[s], f"bench-latency-{s}", block + 3)
            for s in order:
                samples["fetch", s] += fetch_latency(latency_consumers[s], TopicPartition(f"bench-latency-{s}", 0), block)
            for s in order:
                samples["large", s] += large_fetch_latency(large_port[s], "bench-large", max(1, block // 10))
            print(f"latency turn {len(samples['fetch', 'direct']) // block}/{blocks}, "
                  f"load {os.getloadavg()[0]:.1f}", flush=True)

        mb = len(VALUE) / 1e6
        result: dict[str, dict[str, Any]] = {}
        for s in SIDES:
            result[s] = {"produce_msgs": produce_turns * messages / seconds["produce", s],
                         "fetch_msgs": fetch_turns * per_pass / seconds["fetch", s]}
            for kind in ("produce", "fetch", "large"):
                result[s][f"{kind}_p50_ms"] = statistics.median(samples[kind, s]) * 1000
                result[s][f"{kind}_p99_ms"] = percentile(samples[kind, s], 0.99) * 1000
        result["sidecar"]["sidecar_cpu_ms_per_mb_produced"] = cpu["produce"] * 1000 / (produce_turns * messages * mb)
        result["sidecar"]["sidecar_cpu_ms_per_mb_fetched"] = cpu["fetch"] * 1000 / (fetch_turns * per_pass * mb)
        result["ratios"] = {f"{kind}_{q}": percentile(r, p) for kind, r in pair_ratios.items()
                            for q, p in (("min", 0.0), ("median", 0.5), ("max", 1.0))}
        result["ratios"]["turns"] = produce_turns
        result["ratios"]["fetch_turns"] = fetch_turns
        return result
    except Exception:
        problems = [line for line in server.log().splitlines() if '"warning"' in line or '"error"' in line]
        print("the sidecar's warnings and errors:", *problems[-20:], sep="\n", file=sys.stderr)
        raise
    finally:
        for client in clients:
            client.close()
        server.stop()
        mock.kill()
        mock.wait(10)
        if mock.stdout is not None:
            mock.stdout.close()


def table(result: dict[str, dict[str, Any]]) -> list[str]:
    d, s, r = result["direct"], result["sidecar"], result["ratios"]
    lines = ["| | direct | through the sidecar | ratio / added | per-turn ratio min / median / max |",
             "|---|---|---|---|---|"]
    for label, key in (("Produce", "produce"), ("Fetch", "fetch")):
        lines.append(f"| {label}, 1 KB messages/s | {d[f'{key}_msgs']:,.0f} | {s[f'{key}_msgs']:,.0f} | "
                     f"{s[f'{key}_msgs'] / d[f'{key}_msgs']:.2f} | "
                     f"{r[f'{key}_min']:.2f} / {r[f'{key}_median']:.2f} / {r[f'{key}_max']:.2f} |")
    for label, key in (("Produce round trip", "produce"), ("Fetch round trip, 1 message", "fetch"),
                       ("Fetch round trip, one 1 MB batch (raw client)", "large")):
        for q in ("p50", "p99"):
            lines.append(f"| {label} {q} (ms) | {d[f'{key}_{q}_ms']:.2f} | {s[f'{key}_{q}_ms']:.2f} | "
                         f"{s[f'{key}_{q}_ms'] - d[f'{key}_{q}_ms']:+.2f} | |")
    lines.append(f"| Sidecar CPU per MB produced / fetched | | {s['sidecar_cpu_ms_per_mb_produced']:.2f} / "
                 f"{s['sidecar_cpu_ms_per_mb_fetched']:.2f} ms | | |")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000, help="messages per Produce turn")
    parser.add_argument("--rounds", type=int, default=3, help=f"{TURNS_PER_ROUND} turns per side each")
    parser.add_argument("--latency", type=int, default=2000, help="round trips per side and kind")
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()}", flush=True)
    with tempfile.TemporaryDirectory(prefix="sidecar-bench-") as tmp:
        result = measure(args.messages, args.rounds, args.latency, Path(tmp))
    print(f"load average after: {os.getloadavg()}")
    print()
    print("\n".join(table(result)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
