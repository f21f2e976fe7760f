"""Pipelined requests on one connection are answered in request order."""

from __future__ import annotations

import pytest
from kio.schema.api_versions.v0.request import ApiVersionsRequest
from kio.schema.metadata.v12.request import MetadataRequest

from coordinator.runtime.server import CoordinatorServer
from protocol.codec import encode_request
from tests.support.wire import WireClient


@pytest.mark.asyncio
async def test_pipelined_requests_come_back_in_order(server: CoordinatorServer, client: WireClient) -> None:
    frames = b""
    expected = []
    for correlation_id in range(1, 201):
        if correlation_id % 2:
            frames += encode_request(18, correlation_id, "t", ApiVersionsRequest())
            expected.append((correlation_id, 18, 0))
        else:
            frames += encode_request(3, correlation_id, "t", MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                                                           include_topic_authorized_operations=False))
            expected.append((correlation_id, 3, 12))
    await client.send_raw(frames)
    for correlation_id, api_key, version in expected:
        got, _ = await client.receive(api_key, version)
        assert got == correlation_id
