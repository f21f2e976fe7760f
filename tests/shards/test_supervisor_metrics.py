"""The supervisor's /metrics body from its shards' expositions (`coordinator/shards/scrape.py`):
prometheus_client's own text, parsed and labelled by shard, counters and histograms intact."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from coordinator.shards.scrape import exposition


def shard_text(requests: int, latencies: list[float]) -> str:
    registry = CollectorRegistry()
    counter = Counter("coordinator_requests", "Requests served, by API.", ["api"], registry=registry)
    histogram = Histogram("coordinator_latency_seconds", "Latency.", buckets=(0.001, 0.01), registry=registry)
    counter.labels("Heartbeat").inc(requests)
    for seconds in latencies:
        histogram.observe(seconds)
    return generate_latest(registry).decode()


def test_every_sample_is_labelled_by_shard_and_families_merge() -> None:
    text = exposition({0: shard_text(3, [0.0005]), 1: shard_text(5, [0.005, 0.5])}, shards=3,
                      restarts={1: 2}).decode()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    requests = {(s.labels["shard"], s.labels["api"]): s.value
                for s in families["coordinator_requests"].samples if s.name.endswith("_total")}
    assert requests == {("0", "Heartbeat"): 3.0, ("1", "Heartbeat"): 5.0}
    buckets = {(s.labels["shard"], s.labels["le"]): s.value
               for s in families["coordinator_latency_seconds"].samples if s.name.endswith("_bucket")}
    assert buckets == {("0", "0.001"): 1.0, ("0", "0.01"): 1.0, ("0", "+Inf"): 1.0,
                       ("1", "0.001"): 0.0, ("1", "0.01"): 1.0, ("1", "+Inf"): 2.0}
    assert text.count("# TYPE coordinator_latency_seconds histogram") == 1
    assert text.count("# HELP coordinator_requests_total ") == 1
    # Shard 2 did not answer: shown down, not silently missing.
    assert {s.labels["shard"]: s.value for s in families["coordinator_shard_up"].samples} == {"0": 1, "1": 1, "2": 0}
    restarts = {s.labels["shard"]: s.value for s in families["coordinator_shard_restarts"].samples
                if s.name.endswith("_total")}
    assert restarts == {"0": 0, "1": 2, "2": 0}
