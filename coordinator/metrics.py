"""Prometheus metrics of the server, and the HTTP listener that exposes them.

One process serves one coordinator, so metrics live in prometheus_client's default registry (which
also carries the process and GC collectors). Label sets stay small: per API, per error code, per
group state and type; per-group labels only when `metrics.group.labels.enable` is set.

The HTTP listener is a minimal asyncio HTTP/1.1 responder for three paths: `/metrics` (text
exposition), `/healthz` (the process is up) and `/readyz` (listeners open and state loaded).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from prometheus_client import CONTENT_TYPE_LATEST, Counter, Gauge, Histogram, generate_latest

from .logging import get_logger

log = get_logger("coordinator.metrics")

_LATENCY_BUCKETS = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0, 30.0, 60.0,
)

REQUESTS = Counter("coordinator_requests", "Requests served, by API.", ["api"])
REQUEST_LATENCY = Histogram(
    "coordinator_request_latency_seconds",
    "Time from a request's decoding to its response leaving, by API.",
    ["api"],
    buckets=_LATENCY_BUCKETS,
)
ERRORS = Counter("coordinator_errors", "Error codes returned in responses, by API and error name.", ["api", "error"])
CONNECTIONS_OPEN = Gauge("coordinator_connections_open", "Client connections currently open.")
CONNECTIONS_CLOSED = Counter("coordinator_connections_closed", "Connections closed, by reason.", ["reason"])
BYTES_IN = Counter("coordinator_bytes_in", "Request bytes received, frame sizes included.")
BYTES_OUT = Counter("coordinator_bytes_out", "Response bytes sent, frame sizes included.")
READY = Gauge("coordinator_ready", "1 when listeners are open and state is loaded.")


class MetricsServer:
    """Serves /metrics, /healthz and /readyz over HTTP/1.1 (one request per connection)."""

    def __init__(self, host: str, port: int, is_ready: Callable[[], bool]) -> None:
        self._host = host
        self._port = port
        self._is_ready = is_ready
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
            status, content_type, body = self._route(method, path)
            head = (
                f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
            )
            writer.write(head.encode("latin-1") + body)
            await writer.drain()
        except (TimeoutError, ConnectionError, UnicodeDecodeError) as exc:
            log.debug("metrics_request_failed", error=repr(exc))
        finally:
            writer.close()

    def _route(self, method: str, path: str) -> tuple[str, str, bytes]:
        if method != "GET":
            return "405 Method Not Allowed", "text/plain", b"only GET\n"
        if path == "/metrics":
            return "200 OK", CONTENT_TYPE_LATEST, generate_latest()
        if path == "/healthz":
            return "200 OK", "text/plain", b"ok\n"
        if path == "/readyz":
            if self._is_ready():
                return "200 OK", "text/plain", b"ready\n"
            return "503 Service Unavailable", "text/plain", b"not ready\n"
        return "404 Not Found", "text/plain", b"not found\n"
