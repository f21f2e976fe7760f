"""Kafka's `group-coordinator-metrics`, mirrored under the names a Kafka dashboard already uses.

Naming convention: Kafka registers these metrics in the MBean `kafka.server:type=group-coordinator-metrics`
(tags such as `protocol` become MBean keys); the Prometheus JMX exporter's default rules turn that into
`kafka_server_group_coordinator_metrics_<metric name with "-" as "_">{<tags>}`. We expose exactly those
names, as gauges (Kafka's values are gauges: windowed rates, cumulative counts, windowed percentiles),
so panels written for a Kafka broker with the JMX exporter work against this server unchanged.

Mirrored (Kafka 4.x, GroupCoordinatorMetrics and CoordinatorRuntimeMetricsImpl):
- `partition-load-time-avg` / `-max`: ms from taking the log (start-up or standby takeover) to loaded.
- `event-queue-time-ms-{max,p50,p95,p99,p999}`: ms a submitted event waited in the shard's queue.
- `event-processing-time-ms-{max,p50,p95,p99,p999}`: ms the core spent on one event (a batch's time
  split evenly over its events: the core handles a batch in one call).
- `consumer-group-rebalance-rate` / `-count`: KIP-848 group epoch bumps.
- `group-completed-rebalance-rate` / `-count`: classic rebalances completed.
- `group-count{protocol}`, `event-queue-size`, `num-partitions{state}` (one shard: one "partition").

Windows differ slightly from Kafka's (documented in README): rates count the last 30 s; percentiles
are over the last 4096 samples rather than a time window; load times over this process's loads.

The hot path (every submitted event) only appends floats to bounded deques and bumps ints; the
Prometheus families are built at scrape time, on the event loop's thread like the updates.
"""

from __future__ import annotations

import collections
import math
import time
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import REGISTRY
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

PREFIX = "kafka_server_group_coordinator_metrics_"
RATE_WINDOW_S = 30.0
SAMPLES = 4096
PERCENTILES = (("p50", 0.5), ("p95", 0.95), ("p99", 0.99), ("p999", 0.999))


class Meter:
    """Kafka's Meter: a cumulative count and the rate over the last `RATE_WINDOW_S` seconds."""

    __slots__ = ("count", "times")

    def __init__(self) -> None:
        self.count = 0
        self.times: collections.deque[float] = collections.deque(maxlen=100_000)

    def mark(self) -> None:
        self.count += 1
        self.times.append(time.monotonic())

    def rate(self) -> float:
        horizon = time.monotonic() - RATE_WINDOW_S
        while self.times and self.times[0] < horizon:
            self.times.popleft()
        return len(self.times) / RATE_WINDOW_S


def percentile(ordered: list[float], q: float) -> float:
    """Nearest-rank percentile of a sorted list (NaN when empty, as Kafka reports no samples)."""
    if not ordered:
        return math.nan
    return ordered[min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1)]


class RuntimeStats:
    """What the shard runtime and the server record: plain floats and ints, read at scrape."""

    def __init__(self) -> None:
        self.queue_ms: collections.deque[float] = collections.deque(maxlen=SAMPLES)
        self.processing_ms: collections.deque[float] = collections.deque(maxlen=SAMPLES)
        self.load_ms: list[float] = []
        self.consumer_rebalances = Meter()
        self.classic_completed_rebalances = Meter()


STATS = RuntimeStats()


def record_partition_load(seconds: float) -> None:
    STATS.load_ms.append(seconds * 1000)


def observe(event: object) -> None:
    """A shard observer (rare events only: rebalances)."""
    name = type(event).__name__
    group_type = getattr(event, "group_type", None)
    if name == "RebalanceStarted" and group_type == "consumer":
        STATS.consumer_rebalances.mark()
    elif name == "RebalanceCompleted" and group_type == "classic":  # Kafka's classic-only meter
        STATS.classic_completed_rebalances.mark()


def _gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(PREFIX + name, doc, value=value)


def _histogram(name: str, what: str, samples: collections.deque[float]) -> Iterator[GaugeMetricFamily]:
    ordered = sorted(samples)
    yield _gauge(f"{name}_max", f"The max {what} in milliseconds (last {SAMPLES} events).",
                 ordered[-1] if ordered else math.nan)
    for suffix, q in PERCENTILES:
        yield _gauge(f"{name}_{suffix}", f"The {suffix} {what} in milliseconds (last {SAMPLES} events).",
                     percentile(ordered, q))


class KafkaCoordinatorCollector(Collector):
    """Builds the `group-coordinator-metrics` families from `STATS` and the live shard."""

    def __init__(self, shard: Callable[[], Any], loading: Callable[[], bool]) -> None:
        self.shard = shard
        self.loading = loading

    def collect(self) -> Iterator[GaugeMetricFamily]:
        stats = STATS
        loads = stats.load_ms
        yield _gauge("partition_load_time_avg", "The average time it took to load the partitions (this process).",
                     sum(loads) / len(loads) if loads else math.nan)
        yield _gauge("partition_load_time_max", "The max time it took to load the partitions (this process).",
                     max(loads) if loads else math.nan)
        yield from _histogram("event_queue_time_ms", "event queue time", stats.queue_ms)
        yield from _histogram("event_processing_time_ms", "event processing time", stats.processing_ms)
        for kafka_name, meter, what in (
            ("consumer_group_rebalance", stats.consumer_rebalances, "consumer group rebalances"),
            ("group_completed_rebalance", stats.classic_completed_rebalances, "classic group completed rebalances"),
        ):
            yield _gauge(f"{kafka_name}_rate", f"The rate of {what} (per second, last {RATE_WINDOW_S:g} s).",
                         meter.rate())
            yield _gauge(f"{kafka_name}_count", f"The total number of {what}.", meter.count)
        runtime = self.shard()
        groups = GaugeMetricFamily(PREFIX + "group_count", "The number of groups, by protocol.", labels=["protocol"])
        partitions = GaugeMetricFamily(PREFIX + "num_partitions", "The number of partitions (shards), by state.",
                                       labels=["state"])
        queue = 0
        by_protocol = {"classic": 0, "consumer": 0}
        if runtime is not None:
            queue = runtime.queue_size
            for (_, group_type), count in runtime.core.groups_by_state_and_type().items():
                by_protocol[group_type] = by_protocol.get(group_type, 0) + count
        for protocol, count in sorted(by_protocol.items()):
            groups.add_metric([protocol], count)
        active = runtime is not None
        loading = not active and self.loading()
        for state, n in (("loading", loading), ("active", active), ("failed", False)):
            partitions.add_metric([state], int(n))
        yield groups
        yield partitions
        yield _gauge("event_queue_size", "The event accumulator queue size.", queue)


_collector: KafkaCoordinatorCollector | None = None


def register(shard: Callable[[], Any], loading: Callable[[], bool]) -> None:
    """Point the collector at the current server (re-pointed, not re-registered, on restart)."""
    global _collector
    if _collector is None:
        _collector = KafkaCoordinatorCollector(shard, loading)
        REGISTRY.register(_collector)
    else:
        _collector.shard, _collector.loading = shard, loading
