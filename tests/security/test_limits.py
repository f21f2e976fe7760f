"""Limits against hostile clients (issue 17, point 5): idle connections, connections per address,
and the bytes a connection may have buffered."""

from __future__ import annotations

import asyncio
import time

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest

from coordinator.config import ConfigError
from protocol.build import build
from protocol.client import encode_request
from protocol.schemas import request_schema
from tests.security.conftest import connect, security_config
from tests.support.polling import eventually
from tests.support.wire import WireClient

API_VERSIONS = ApiVersionsRequest(client_software_name="t", client_software_version="1")


@pytest.mark.asyncio
async def test_an_idle_connection_is_closed_after_connections_max_idle_ms(start_server) -> None:
    server = await start_server("PLAINTEXT://127.0.0.1:0", **{"connections.max.idle.ms": "300"})
    idle, busy = await connect(server.port), await connect(server.port)
    try:
        assert (await idle.request(API_VERSIONS)).error_code == 0
        started = time.monotonic()
        closed = asyncio.ensure_future(idle.closed_by_peer(timeout=10))
        while not closed.done():  # the busy one keeps talking: it stays open
            assert (await busy.request(API_VERSIONS)).error_code == 0
            await asyncio.wait({closed}, timeout=0.05)
        assert closed.result()
        assert time.monotonic() - started >= 0.25  # not before its idle time
        assert (await busy.request(API_VERSIONS)).error_code == 0
    finally:
        await idle.close()
        await busy.close()


@pytest.mark.asyncio
async def test_a_parked_request_is_not_idle(start_server) -> None:
    """A JoinGroup waiting for the rebalance holds its connection past the idle time."""
    server = await start_server("PLAINTEXT://127.0.0.1:0", **{"connections.max.idle.ms": "200",
                                                              "group.initial.rebalance.delay.ms": "600"})
    client = await connect(server.port)
    try:
        join = build(request_schema(11, 3), {
            "group_id": "slow", "session_timeout": 10000, "rebalance_timeout": 10000, "member_id": "",
            "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}]})
        response = await client.request(join, timeout=10)  # parked ~600 ms by the initial delay
        assert response.error_code == 0
    finally:
        await client.close()


@pytest.mark.asyncio
async def test_max_connections_per_ip_and_its_overrides(start_server) -> None:
    server = await start_server("PLAINTEXT://127.0.0.1:0", **{"max.connections.per.ip": "2"})
    clients = [await connect(server.port) for _ in range(3)]
    try:
        assert (await clients[0].request(API_VERSIONS)).error_code == 0
        assert (await clients[1].request(API_VERSIONS)).error_code == 0
        assert await clients[2].closed_by_peer()
    finally:
        for client in clients:
            await client.close()
    roomy = await start_server("PLAINTEXT://127.0.0.1:0", **{"max.connections.per.ip": "0",
                                                             "max.connections.per.ip.overrides": "127.0.0.1:3"})
    clients = [await connect(roomy.port) for _ in range(3)]
    try:
        for client in clients:
            assert (await client.request(API_VERSIONS)).error_code == 0
    finally:
        for client in clients:
            await client.close()


@pytest.mark.asyncio
async def test_a_connection_buffers_at_most_socket_request_max_bytes_behind_a_parked_request(start_server) -> None:
    """While a JoinGroup is parked, a flood of pipelined requests stops being read once the queue
    holds socket.request.max.bytes: the server's memory for the connection stays bounded, and
    everything is answered once the JoinGroup is."""
    cap = 64 * 1024
    server = await start_server("PLAINTEXT://127.0.0.1:0", **{"socket.request.max.bytes": str(cap),
                                                              "group.initial.rebalance.delay.ms": "1000"})
    client = await connect(server.port)
    try:
        join = build(request_schema(11, 3), {
            "group_id": "g", "session_timeout": 10000, "rebalance_timeout": 10000, "member_id": "",
            "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}]})
        await client.send(join)
        flood = ApiVersionsRequest(client_software_name="x" * 8000, client_software_version="1")
        frame = encode_request(18, 0, "t", flood)
        sent = 0
        (connection,) = server.connections
        largest = 0
        writer = client.writer
        deadline = time.monotonic() + 20
        # Keep writing until the server's reading stops (our socket buffers fill up).
        while time.monotonic() < deadline:
            writer.write(frame)
            sent += 1
            try:
                await asyncio.wait_for(writer.drain(), 0.2)
            except TimeoutError:
                break
            largest = max(largest, sum(map(len, connection._queue)))
        assert connection._reading_paused
        largest = max(largest, sum(map(len, connection._queue)))
        assert largest < cap + len(frame)
        assert sent * len(frame) > 2 * cap  # we did write far more than the server buffered
        _, joined = await client.receive(11, 3, timeout=15)
        assert joined.error_code == 0
        for _ in range(sent):
            _, answer = await client.receive(18, 3, timeout=15)
            assert answer.error_code == 0
    finally:
        await client.close()


@pytest.mark.asyncio
async def test_a_create_topics_of_absurd_size_is_a_policy_violation(start_server) -> None:
    """Kafka's controller refuses an operation of more than 10,000 records; a hostile CreateTopics
    of 2^31-1 partitions must not be created (Metadata would then describe every partition)."""
    server = await start_server("PLAINTEXT://127.0.0.1:0")
    client = await connect(server.port)
    try:
        huge = build(request_schema(19, 7), {"topics": [
            {"name": "huge", "num_partitions": 2**31 - 1, "replication_factor": 1, "assignments": [], "configs": []},
            {"name": "small", "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}],
            "timeout": 5000, "validate_only": False})
        response = await client.request(huge)
        assert [(t.name, t.error_code, t.error_message) for t in response.topics] == [
            ("huge", 44, "Unable to perform excessively large batch operation."),
            ("small", 44, "Unable to perform excessively large batch operation.")]
        assert server.catalog.get("huge") is None and server.catalog.get("small") is None
        fine = build(request_schema(19, 7), {"topics": [
            {"name": "fine", "num_partitions": 9999, "replication_factor": 1, "assignments": [], "configs": []}],
            "timeout": 5000, "validate_only": True})
        assert (await client.request(fine)).topics[0].error_code == 0
    finally:
        await client.close()


@pytest.mark.asyncio
async def test_connections_per_address_are_bounded_by_default(start_server) -> None:
    """Kafka leaves max.connections.per.ip unbounded; here it defaults to 1,000 (and
    max.connections to 10,000): the 1,001st connection from one address is closed on accept, while
    another address still connects."""
    server = await start_server("PLAINTEXT://127.0.0.1:0")
    assert server.config["max.connections"] == 10000
    writers: list[asyncio.StreamWriter] = []
    try:
        for _ in range(1000):
            _, writer = await asyncio.open_connection("127.0.0.1", server.port, local_addr=("127.0.0.2", 0))
            writers.append(writer)
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port, local_addr=("127.0.0.2", 0))
        writers.append(writer)
        assert await WireClient(reader, writer).closed_by_peer()
        other = await connect(server.port)  # from 127.0.0.1
        assert (await other.request(API_VERSIONS)).error_code == 0
        await other.close()
        await eventually(lambda: len(server.connections) == 1000, message="the 1,000 to stay open")
    finally:
        for writer in writers:
            writer.close()


def test_no_connections_per_address_needs_overrides(tmp_path) -> None:
    """As Kafka: max.connections.per.ip=0 would refuse every client unless some address is excepted."""
    with pytest.raises(ConfigError, match=r"max\.connections\.per\.ip: can be 0 only if"):
        security_config(tmp_path, "PLAINTEXT://127.0.0.1:0", **{"max.connections.per.ip": "0"})
    config = security_config(tmp_path, "PLAINTEXT://127.0.0.1:0", **{"max.connections.per.ip": "0",
                                                                      "max.connections.per.ip.overrides": "10.0.0.1:5"})
    assert config["max.connections.per.ip"] == 0
