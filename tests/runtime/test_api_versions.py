"""ApiVersions over a real socket: every version, the KIP-511 downgrade, software-name validation."""

from __future__ import annotations

import struct

import pytest
from kio.index import load_request_schema

from coordinator.node.server import CoordinatorServer
from protocol.build import build
from protocol.private import (
    DESCRIBE_GROUP_GENERATIONS,
    DESCRIBE_SHARE_PARTITIONS,
    PRIVATE_KEYS_FROM,
)
from tests.support.wire import WireClient, decode_response


@pytest.mark.asyncio
@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
async def test_every_version_advertises_exactly_the_registry_but_private_keys(
        server: CoordinatorServer, client: WireClient, version: int) -> None:
    request = build(load_request_schema(18, version), {"client_software_name": "wire-test", "client_software_version": "1.0"})
    response = await client.request(request)
    assert response.error_code == 0
    advertised = {a.api_key: (a.min_version, a.max_version) for a in response.api_keys}
    served = dict(server.registry.version_ranges())
    assert DESCRIBE_GROUP_GENERATIONS in served and DESCRIBE_SHARE_PARTITIONS in served
    assert advertised == {key: span for key, span in served.items() if key < PRIVATE_KEYS_FROM}
    assert advertised[18] == (0, 4)
    assert all(low <= high for low, high in advertised.values())


@pytest.mark.asyncio
async def test_too_new_version_gets_v0_unsupported_version_with_our_range(client: WireClient) -> None:
    # Version 9 does not exist; the body is junk on purpose: the server must not parse it.
    header = struct.pack(">hhih", 18, 9, 77, 4) + b"test" + b"\x00"
    frame = header + b"\xde\xad\xbe\xef"
    await client.send_raw(struct.pack(">i", len(frame)) + frame)
    correlation_id, body = decode_response(18, 0, await client.read_frame())
    assert correlation_id == 77
    assert body.error_code == 35
    assert [(a.api_key, a.min_version, a.max_version) for a in body.api_keys] == [(18, 0, 4)]


@pytest.mark.asyncio
@pytest.mark.parametrize(("name", "version"), [("-bad", "1.0"), ("ok", "1.0."), ("", "1"), ("sp ace", "1")])
async def test_v3_rejects_invalid_client_software(client: WireClient, name: str, version: str) -> None:
    request = build(load_request_schema(18, 3), {"client_software_name": name, "client_software_version": version})
    response = await client.request(request)
    assert response.error_code == 42
    assert response.api_keys == ()


@pytest.mark.asyncio
async def test_connection_stays_usable_after_invalid_software_name(client: WireClient) -> None:
    bad = build(load_request_schema(18, 3), {"client_software_name": "!", "client_software_version": "1"})
    good = build(load_request_schema(18, 3), {"client_software_name": "good", "client_software_version": "1"})
    assert (await client.request(bad)).error_code == 42
    assert (await client.request(good)).error_code == 0


@pytest.mark.asyncio
async def test_consumer_protocol_is_advertised_only_when_enabled(tmp_path) -> None:
    from tests.runtime.conftest import make_config

    server = CoordinatorServer(make_config(tmp_path, **{"group.coordinator.rebalance.protocols": "classic"}))
    await server.start()
    try:
        client = await WireClient.connect(server.port)
        request = build(load_request_schema(18, 3), {"client_software_name": "t", "client_software_version": "1"})
        advertised = {a.api_key for a in (await client.request(request)).api_keys}
        await client.close()
        assert 11 in advertised and 68 not in advertised and 69 not in advertised
    finally:
        await server.stop()
