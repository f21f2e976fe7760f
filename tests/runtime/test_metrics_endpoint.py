"""The metrics listener: /metrics exposition, /healthz, /readyz."""

from __future__ import annotations

import asyncio

import pytest
from kio.schema.api_versions.v0.request import ApiVersionsRequest

from coordinator.runtime.server import CoordinatorServer
from tests.support.metrics import scrape
from tests.support.server import http_get
from tests.support.wire import WireClient


@pytest.mark.asyncio
async def test_metrics_count_requests_connections_and_bytes(server: CoordinatorServer, client: WireClient) -> None:
    port = server.metrics_port
    assert port is not None
    before = await asyncio.to_thread(scrape, port)
    for _ in range(3):
        assert (await client.request(ApiVersionsRequest())).error_code == 0
    after = await asyncio.to_thread(scrape, port)
    key = 'coordinator_requests_total{api="ApiVersions"}'
    assert after[key] - before.get(key, 0) == 3
    assert after["coordinator_connections_open"] >= 1
    assert after["coordinator_bytes_in_total"] > before.get("coordinator_bytes_in_total", 0)
    assert after["coordinator_bytes_out_total"] > before.get("coordinator_bytes_out_total", 0)
    assert 'coordinator_request_latency_seconds_count{api="ApiVersions"}' in after


@pytest.mark.asyncio
async def test_health_and_readiness(server: CoordinatorServer) -> None:
    port = server.metrics_port
    assert port is not None
    assert (await asyncio.to_thread(http_get, port, "/healthz"))[0] == 200
    assert (await asyncio.to_thread(http_get, port, "/readyz")) == (200, b"ready\n")
    assert (await asyncio.to_thread(http_get, port, "/nope"))[0] == 404
