"""The supervisor's view of its shards over HTTP: their /readyz, and their /metrics merged into one.

Each shard serves /metrics, /healthz and /readyz on `127.0.0.1:<port>` (the port in its
`metrics.port` file). The supervisor's endpoint answers by asking them:

- `/metrics`: every shard's exposition, parsed with prometheus_client's text parser, every sample
  labelled `shard="<k>"`, families merged by name (HELP and TYPE once per family), plus the
  supervisor's own families about the shards (up, restarts). A shard that does not answer is left
  out and shows as `coordinator_shard_up{shard="k"} 0`.
- `/readyz`: ready only when every shard answers its own /readyz with 200.

The HTTP client here is the smallest that talks to `coordinator.metrics.MetricsServer`: one GET per
connection, the response read to the end (the server closes it).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping

from prometheus_client import generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector, CollectorRegistry

SHARD_LABEL = "shard"


async def http_get(port: int, path: str, timeout: float = 2.0) -> tuple[int, bytes]:
    """GET `path` from 127.0.0.1:`port`: (status, body). Raises OSError or TimeoutError when the
    shard does not answer (not listening yet, gone, or too slow)."""

    async def get() -> bytes:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode("latin-1"))
            await writer.drain()
            return await reader.read()
        finally:
            writer.close()

    raw = await asyncio.wait_for(get(), timeout)
    head, _, body = raw.partition(b"\r\n\r\n")
    parts = head.split(b" ", 2)
    if len(parts) < 2 or not parts[1].isdigit():
        raise ConnectionError(f"not an HTTP response from port {port}")
    return int(parts[1]), body


def relabel(expositions: Mapping[int, str]) -> Iterator[Metric]:
    """The families of every shard's exposition, each sample labelled with its shard; a family
    seen in several shards is yielded once with every shard's samples (the first shard's help)."""
    merged: dict[str, Metric] = {}
    for shard, text in sorted(expositions.items()):
        for family in text_string_to_metric_families(text):
            into = merged.get(family.name)
            if into is None:
                into = merged[family.name] = Metric(family.name, family.documentation, family.type, family.unit)
            elif into.type != family.type:
                continue  # shards of one version agree; a mismatch would make an invalid exposition
            into.samples.extend(s._replace(labels={**s.labels, SHARD_LABEL: str(shard)}) for s in family.samples)
    yield from merged.values()


class _Families(Collector):
    def __init__(self, families: list[Metric]) -> None:
        self._families = families

    def collect(self) -> Iterator[Metric]:
        return iter(self._families)


def exposition(expositions: Mapping[int, str], shards: int, restarts: Mapping[int, int]) -> bytes:
    """One text exposition: every shard's families relabelled, then the supervisor's own."""
    up = GaugeMetricFamily("coordinator_shard_up", "1 when the shard's process answered this scrape.",
                           labels=[SHARD_LABEL])
    restarted = CounterMetricFamily("coordinator_shard_restarts", "Times the supervisor restarted the shard "
                                    "after it exited unexpectedly.", labels=[SHARD_LABEL])
    for shard in range(shards):
        up.add_metric([str(shard)], 1 if shard in expositions else 0)
        restarted.add_metric([str(shard)], restarts.get(shard, 0))
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Families([*relabel(expositions), up, restarted]))
    return generate_latest(registry)
