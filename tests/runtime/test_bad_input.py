"""Bad input closes only the connection that sent it; everyone else keeps being served."""

from __future__ import annotations

import os
import struct

import pytest
from kio.schema.api_versions.v0.request import ApiVersionsRequest
from kio.schema.heartbeat.v4.request import HeartbeatRequest

from coordinator.node.server import CoordinatorServer
from protocol.client import encode_request
from tests.support.polling import eventually
from tests.support.wire import WireClient


def _header(api_key: int, version: int, correlation_id: int = 1) -> bytes:
    return struct.pack(">hhih", api_key, version, correlation_id, 1) + b"x"


BAD_INPUTS = {
    "oversized_frame": struct.pack(">i", 104857600 + 1),
    "negative_size": struct.pack(">i", -5),
    "size_below_header": struct.pack(">i", 3) + b"abc",
    "unknown_api_key": struct.pack(">i", 11) + _header(9999, 0),
    "unsupported_version": struct.pack(">i", 11) + _header(3, 99),
    "random_bytes": struct.pack(">i", 64) + os.urandom(64),
}


def _truncated_heartbeat() -> bytes:
    full = encode_request(12, 1, "t", HeartbeatRequest(group_id="group", generation_id=1, member_id="m"))
    body = full[4:-6]  # keep the header, cut the body short, and frame what is left honestly
    return struct.pack(">i", len(body)) + body


BAD_INPUTS["truncated_body"] = _truncated_heartbeat()


@pytest.mark.asyncio
@pytest.mark.parametrize("kind", sorted(BAD_INPUTS))
async def test_bad_input_closes_only_that_connection(server: CoordinatorServer, kind: str) -> None:
    bystander = await WireClient.connect(server.port)
    offender = await WireClient.connect(server.port)
    try:
        assert (await bystander.request(ApiVersionsRequest())).error_code == 0
        await offender.send_raw(BAD_INPUTS[kind])
        assert await offender.closed_by_peer(), f"{kind} did not close the connection"
        # The bystander is still served, and so is a brand-new connection.
        assert (await bystander.request(ApiVersionsRequest())).error_code == 0
        fresh = await WireClient.connect(server.port)
        assert (await fresh.request(ApiVersionsRequest())).error_code == 0
        await fresh.close()
    finally:
        await bystander.close()
        await offender.close()


@pytest.mark.asyncio
async def test_request_before_bad_frame_is_answered(server: CoordinatorServer) -> None:
    client = await WireClient.connect(server.port)
    good = encode_request(18, 5, "t", ApiVersionsRequest())
    await client.send_raw(good + struct.pack(">i", 11) + _header(9999, 0))
    correlation_id, body = await client.receive(18, 0)
    assert correlation_id == 5 and body.error_code == 0
    assert await client.closed_by_peer()
    await client.close()


@pytest.mark.asyncio
async def test_max_connections_is_enforced(tmp_path) -> None:
    from tests.runtime.conftest import make_config

    server = CoordinatorServer(make_config(tmp_path, **{"max.connections": "2"}))
    await server.start()
    try:
        first = await WireClient.connect(server.port)
        second = await WireClient.connect(server.port)
        assert (await first.request(ApiVersionsRequest())).error_code == 0
        assert (await second.request(ApiVersionsRequest())).error_code == 0
        third = await WireClient.connect(server.port)
        assert await third.closed_by_peer()
        await second.close()
        # A slot frees up once a connection closes.
        async def admitted() -> bool:
            probe = await WireClient.connect(server.port)
            try:
                return (await probe.request(ApiVersionsRequest(), timeout=2)).error_code == 0
            except Exception:
                return False
            finally:
                await probe.close()

        await eventually(admitted, 5, "the closed connection's slot to be freed")
        assert (await first.request(ApiVersionsRequest())).error_code == 0
        await first.close()
        await third.close()
    finally:
        await server.stop()
