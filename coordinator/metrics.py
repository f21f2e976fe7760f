"""Prometheus metrics of the server, and the HTTP listener that exposes them.

One process serves one coordinator, so metrics live in prometheus_client's default registry (which
also carries the process and GC collectors). Label sets stay small: per API, per error code, per
group state and type; per-group labels only when `metrics.group.labels.enable` is set.

The HTTP listener is a minimal asyncio HTTP/1.1 responder for three paths: `/metrics` (text
exposition), `/healthz` (the process is up) and `/readyz` (listeners open and state loaded).
"""

from __future__ import annotations

import asyncio
import bisect
import inspect
import math
from collections.abc import Awaitable, Callable, Iterator
from typing import cast

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, Counter, Gauge, generate_latest
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString as _go_float

from .logging import get_logger

log = get_logger("coordinator.metrics")

_LATENCY_BUCKETS = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0, 30.0, 60.0,
)

_bucket_label = cast(Callable[[float], str], _go_float)  # "0.005", "+Inf": as prometheus_client's Histogram


class ApiRequestStats:
    """One API's request count and latency histogram (buckets not yet cumulative)."""

    __slots__ = ("buckets", "count", "seconds")

    def __init__(self, bounds: int) -> None:
        self.count = 0
        self.seconds = 0.0
        self.buckets = [0] * (bounds + 1)  # the last one is +Inf


class RequestStats(Collector):
    """Requests by API (count, latency histogram), error codes by API and error, bytes in and out.

    The connection loop counts every request, so these are plain ints and floats exposed at scrape
    time instead of prometheus_client Counters and Histograms, whose per-increment lock and checks
    cost about a tenth of a steady heartbeat. Increments and scrapes both run on the event loop's
    thread, so nothing is read half-written."""

    def __init__(self, buckets: tuple[float, ...]) -> None:
        self.bounds = buckets
        self.apis: dict[str, ApiRequestStats] = {}
        self.errors: dict[tuple[str, str], int] = {}
        self.bytes_in = 0
        self.bytes_out = 0

    def api(self, name: str) -> ApiRequestStats:
        stats = self.apis.get(name)
        if stats is None:
            stats = self.apis[name] = ApiRequestStats(len(self.bounds))
        return stats

    def observe(self, stats: ApiRequestStats, seconds: float) -> None:
        stats.count += 1
        stats.seconds += seconds
        stats.buckets[bisect.bisect_left(self.bounds, seconds)] += 1

    def error(self, api: str, name: str) -> None:
        key = (api, name)
        self.errors[key] = self.errors.get(key, 0) + 1

    def collect(self) -> Iterator[Metric]:
        requests = CounterMetricFamily("coordinator_requests", "Requests served, by API.", labels=["api"])
        latency = HistogramMetricFamily(
            "coordinator_request_latency_seconds", "Time from a request's decoding to its response leaving, by API.",
            labels=["api"])
        for api, stats in sorted(self.apis.items()):
            requests.add_metric([api], stats.count)
            cumulative, buckets = 0, []
            for bound, n in zip((*self.bounds, math.inf), stats.buckets, strict=True):
                cumulative += n
                buckets.append((_bucket_label(bound), cumulative))
            latency.add_metric([api], buckets, stats.seconds)
        errors = CounterMetricFamily("coordinator_errors", "Error codes returned in responses, by API and error name.",
                                     labels=["api", "error"])
        for (api, name), n in sorted(self.errors.items()):
            errors.add_metric([api, name], n)
        yield requests
        yield latency
        yield errors
        yield CounterMetricFamily("coordinator_bytes_in", "Request bytes received, frame sizes included.",
                                  value=self.bytes_in)
        yield CounterMetricFamily("coordinator_bytes_out", "Response bytes sent, frame sizes included.",
                                  value=self.bytes_out)


REQUEST_STATS = RequestStats(_LATENCY_BUCKETS)
REGISTRY.register(REQUEST_STATS)
METRICS_PORT_FILE = "metrics.port"
"""Written in a shard's directory when there are several shards: its metrics listener's port (the
shard supervisor reads it to scrape the shard)."""

CONNECTIONS_OPEN = Gauge("coordinator_connections_open", "Client connections currently open.")
CONNECTIONS_CLOSED = Counter("coordinator_connections_closed", "Connections closed, by reason.", ["reason"])
REQUEST_BYTES_HELD = Gauge("coordinator_request_bytes_held",
                           "Request bytes received and not yet handled (frames arriving or queued), "
                           "bounded by queued.max.request.bytes.")
REQUEST_BYTES_WAITS = Counter("coordinator_request_bytes_waits",
                              "Times a connection stopped reading because queued.max.request.bytes was spent.")
READY = Gauge("coordinator_ready", "1 when listeners are open and state is loaded.")


class MetricsServer:
    """Serves /metrics, /healthz and /readyz over HTTP/1.1 (one request per connection)."""

    def __init__(self, host: str | None, port: int, is_ready: Callable[[], bool | Awaitable[bool]],
                 exposition: Callable[[], Awaitable[bytes]] | None = None) -> None:
        """`host` None binds every interface. `is_ready` may be a coroutine function, and
        `exposition` replaces this process's registry as the /metrics body: the shard supervisor
        answers both by asking its shards (`coordinator/shards/scrape.py`)."""
        self._host = host
        self._port = port
        self._is_ready = is_ready
        self._exposition = exposition
        self._server: asyncio.Server | None = None

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.sockets[0].getsockname()[1])

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, self._host, self._port)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request_line = await asyncio.wait_for(reader.readline(), timeout=10)
            while (await asyncio.wait_for(reader.readline(), timeout=10)) not in (b"\r\n", b"\n", b""):
                pass
            parts = request_line.decode("latin-1").split()
            path = parts[1].split("?", 1)[0] if len(parts) >= 2 else ""
            method = parts[0] if parts else ""
            status, content_type, body = await self._route(method, path)
            head = (
                f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
            )
            writer.write(head.encode("latin-1") + body)
            await writer.drain()
        except (TimeoutError, ConnectionError, UnicodeDecodeError) as exc:
            log.debug("metrics_request_failed", error=repr(exc))
        except asyncio.CancelledError:
            # The listener is closing (shutdown) while this request waits, e.g. on a shard the
            # supervisor asks: the request is dropped. Ending quietly keeps asyncio from logging
            # the cancelled handler task as an error on stderr, where an operator reads one line.
            pass
        finally:
            writer.close()

    async def _route(self, method: str, path: str) -> tuple[str, str, bytes]:
        if method != "GET":
            return "405 Method Not Allowed", "text/plain", b"only GET\n"
        if path == "/metrics":
            body = await self._exposition() if self._exposition is not None else generate_latest()
            return "200 OK", CONTENT_TYPE_LATEST, body
        if path == "/healthz":
            return "200 OK", "text/plain", b"ok\n"
        if path == "/readyz":
            ready = self._is_ready()
            if inspect.isawaitable(ready):
                ready = await ready
            if ready:
                return "200 OK", "text/plain", b"ready\n"
            return "503 Service Unavailable", "text/plain", b"not ready\n"
        return "404 Not Found", "text/plain", b"not found\n"
