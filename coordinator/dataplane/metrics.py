"""Prometheus metrics of the embedded data plane (prefix `coordinator_dataplane_`).

Metrics live in prometheus_client's default registry, as the rest of the server's do. Labels are
per topic (never per partition) or per small enum; a deleted topic's label values are removed so a
long run with topic churn does not grow the exposition. Counters are exposed with the `_total`
suffix prometheus_client adds.
"""

from __future__ import annotations

import contextlib

from prometheus_client import Counter, Gauge

BYTES_IN = Counter(
    "coordinator_dataplane_bytes_in", "Record batch bytes appended by Produce, by topic.", ["topic"]
)
MESSAGES_IN = Counter(
    "coordinator_dataplane_messages_in", "Records appended by Produce, by topic.", ["topic"]
)
BYTES_OUT = Counter(
    "coordinator_dataplane_bytes_out", "Record batch bytes returned by Fetch, by topic.", ["topic"]
)
MESSAGES_OUT = Counter(
    "coordinator_dataplane_messages_out",
    "Records in the batches returned by Fetch, by topic (a first batch may hold records below the "
    "fetch offset, as in Kafka).",
    ["topic"],
)
PRODUCE_ERRORS = Counter(
    "coordinator_dataplane_produce_errors", "Produce partitions refused, by error name.", ["error"]
)
PRODUCE_DUPLICATES = Counter(
    "coordinator_dataplane_produce_duplicates",
    "Idempotent producer batches recognised as retries of appended ones (answered with the original offsets).",
)
LOG_BYTES = Gauge(
    "coordinator_dataplane_log_bytes", "Record batch bytes retained in partition segment files, by topic.", ["topic"]
)
CACHE_BYTES = Gauge(
    "coordinator_dataplane_cache_bytes",
    "Record batch bytes held in memory (bounded by dataplane.max.bytes and dataplane.total.max.bytes).",
)
TRUNCATED_BYTES = Counter(
    "coordinator_dataplane_truncated_bytes", "Torn or corrupt partition data dropped at start-up recovery."
)
LOG_DELETED_BYTES = Counter(
    "coordinator_dataplane_log_deleted_bytes",
    "Bytes dropped from partition logs, by reason (retention_bytes, retention_ms, topic_deleted).",
    ["reason"],
)
FETCH_SESSIONS = Gauge(
    "coordinator_dataplane_fetch_sessions", "Incremental fetch sessions (KIP-227) in the cache."
)
FETCH_SESSION_PARTITIONS = Gauge(
    "coordinator_dataplane_fetch_session_partitions", "Partitions cached across fetch sessions."
)
FETCH_SESSION_EVICTIONS = Counter(
    "coordinator_dataplane_fetch_session_evictions", "Fetch sessions evicted to make room."
)

_PER_TOPIC = (BYTES_IN, MESSAGES_IN, BYTES_OUT, MESSAGES_OUT, LOG_BYTES)


def forget_topic(topic: str) -> None:
    """Drop a deleted topic's label values from every per-topic metric."""
    for metric in _PER_TOPIC:
        with contextlib.suppress(KeyError):
            metric.remove(topic)
