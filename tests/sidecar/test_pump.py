"""The response pump over real sockets: an upstream broker on 127.0.0.1 played by the test (it reads
the forwarded request frames and writes kio-encoded responses, in parts when it matters) and a real
client connection whose accepted transport the pump writes to.

What is shown: large responses reach the client while the upstream is still sending them
(streaming), byte for byte with the client's correlation id; pipelined responses come out in
order; leader hints are rewritten when the response is held whole and blanked, never leaked, when
its head was already streamed; a broken upstream fails every waiting request."""

from __future__ import annotations

import asyncio
import contextlib
import struct
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

from coordinator.sidecar.pump import BLANK_TAG, STREAM_AFTER, ResponsePump
from coordinator.sidecar.wire import ForwardError, UpstreamProtocolError, fetch_tags_offset
from protocol.build import build
from protocol.client import encode_request
from protocol.codec import encode_response
from protocol.schemas import request_schema, response_schema
from tests.support.wire import decode_response

pytestmark = pytest.mark.asyncio

FETCH, METADATA, PRODUCE, API_VERSIONS = 1, 3, 0, 18
UPSTREAM_HOST = "10.9.8.7"


class Endpoints:
    def address(self, node_id: int) -> tuple[str, int]:
        return "sidecar.local", 19092 + node_id

    @property
    def coordinators(self) -> list[tuple[int, str, int]]:
        return [(1_000_000, "sidecar.local", 9092)]


@dataclass
class Rig:
    pump: ResponsePump
    upstream_reader: asyncio.StreamReader
    upstream_writer: asyncio.StreamWriter
    client_reader: asyncio.StreamReader

    async def upstream_request(self) -> tuple[int, int, int]:
        """The next forwarded request as the upstream sees it: (api key, version, correlation id)."""
        size = struct.unpack(">i", await asyncio.wait_for(self.upstream_reader.readexactly(4), 10))[0]
        frame = await asyncio.wait_for(self.upstream_reader.readexactly(size), 10)
        api_key, version, correlation_id = struct.unpack_from(">hhi", frame)
        return api_key, version, correlation_id

    async def upstream_send(self, data: bytes) -> None:
        self.upstream_writer.write(data)
        await self.upstream_writer.drain()

    async def client_read(self, count: int) -> bytes:
        return await asyncio.wait_for(self.client_reader.readexactly(count), 10)

    async def client_frame(self) -> bytes:
        size = struct.unpack(">i", await self.client_read(4))[0]
        return struct.pack(">i", size) + await self.client_read(size)


@contextlib.asynccontextmanager
async def rig() -> AsyncIterator[Rig]:
    loop = asyncio.get_running_loop()
    upstream_side: asyncio.Future[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = loop.create_future()
    client_side: asyncio.Future[asyncio.Transport] = loop.create_future()

    async def on_upstream(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream_side.set_result((reader, writer))

    class Accepted(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            client_side.set_result(transport)  # type: ignore[arg-type]

    upstream = await asyncio.start_server(on_upstream, "127.0.0.1", 0)
    clients = await loop.create_server(Accepted, "127.0.0.1", 0)
    client_reader, client_writer = await asyncio.open_connection("127.0.0.1", clients.sockets[0].getsockname()[1])
    client_transport = await asyncio.wait_for(client_side, 10)
    pump = await ResponsePump.open("127.0.0.1", upstream.sockets[0].getsockname()[1], client_transport, Endpoints())
    upstream_reader, upstream_writer = await asyncio.wait_for(upstream_side, 10)
    try:
        yield Rig(pump, upstream_reader, upstream_writer, client_reader)
    finally:
        pump.close()
        client_writer.close()
        client_transport.close()
        upstream_writer.close()
        upstream.close()
        clients.close()


def request(api_key: int, version: int, correlation_id: int, description: dict[str, Any]) -> bytes:
    """A client's request frame, size prefix removed (as the connection hands it to a route)."""
    return encode_request(api_key, correlation_id, "pump-test", build(request_schema(api_key, version), description))[4:]


def fetch_request(correlation_id: int, version: int = 16) -> bytes:
    return request(FETCH, version, correlation_id, {"topics": [], "forgotten_topics_data": []})


def fetch_response(correlation_id: int, records: bytes, hints: bool, version: int = 16) -> bytes:
    """A Fetch response as an upstream broker sends it: one partition with `records`, and when
    `hints`, a NOT_LEADER_OR_FOLLOWER partition with KIP-951 NodeEndpoints naming an upstream host."""
    partitions = [{"partition_index": 0, "error_code": 0, "high_watermark": 10, "records": records}]
    if hints:
        partitions.append({"partition_index": 1, "error_code": 6, "high_watermark": -1, "records": None,
                           "current_leader": {"leader_id": 2, "leader_epoch": 5}})
    return encode_response(correlation_id, build(response_schema(FETCH, version), {
        "responses": [{"topic_id": uuid.UUID(int=7), "partitions": partitions}],
        "node_endpoints": [{"node_id": 2, "host": UPSTREAM_HOST, "port": 9092, "rack": None}] if hints else []}))


def as_client_sees(frame: bytes, correlation_id: int) -> bytes:
    return frame[:4] + struct.pack(">i", correlation_id) + frame[8:]


async def test_a_large_fetch_response_streams_to_the_client_before_the_upstream_has_sent_it_all() -> None:
    async with rig() as r:
        done = r.pump.send(fetch_request(41), FETCH, 16, 41, True)
        assert done is not None
        _, _, upstream_id = await r.upstream_request()
        frame = fetch_response(upstream_id, bytes(range(256)) * 8192, hints=False)  # 2 MB of records
        half = len(frame) // 2
        await r.upstream_send(frame[:half])
        first = await r.client_read(half)  # times out unless the pump forwards before the response is whole
        assert not done.done()
        await r.upstream_send(frame[half:])
        rest = await r.client_read(len(frame) - half)
        assert first + rest == as_client_sees(frame, 41)
        await asyncio.wait_for(done, 10)


async def test_pipelined_responses_come_out_in_order_with_the_clients_correlation_ids() -> None:
    async with rig() as r:
        sent = [
            r.pump.send(request(METADATA, 12, 7, {"topics": None}), METADATA, 12, 7, True),
            r.pump.send(fetch_request(8), FETCH, 16, 8, True),
            r.pump.send(request(PRODUCE, 9, 9, {"acks": 0, "timeout": 1000, "topic_data": []}), PRODUCE, 9, 9, False),
            r.pump.send(request(API_VERSIONS, 3, 10, {}), API_VERSIONS, 3, 10, True),
        ]
        assert sent[2] is None  # acks=0: no answer is waited for
        seen = [await r.upstream_request() for _ in range(4)]
        assert [key for key, _, _ in seen] == [METADATA, FETCH, PRODUCE, API_VERSIONS]
        metadata = encode_response(seen[0][2], build(response_schema(METADATA, 12), {
            "brokers": [{"node_id": 1, "host": UPSTREAM_HOST, "port": 9092, "rack": None}], "cluster_id": "c",
            "controller_id": 1, "topics": []}))
        fetch = fetch_response(seen[1][2], b"r" * 300_000, hints=False)
        versions = encode_response(seen[3][2], build(response_schema(API_VERSIONS, 3), {"api_keys": []}))
        await r.upstream_send(metadata + fetch + versions)  # one write: the pump splits the stream
        correlation_id, got_metadata = decode_response(METADATA, 12, (await r.client_frame())[4:])
        assert correlation_id == 7
        assert [(b.host, int(b.port)) for b in got_metadata.brokers] == [
            ("sidecar.local", 19093), ("sidecar.local", 9092)]
        assert await r.client_frame() == as_client_sees(fetch, 8)
        assert await r.client_frame() == as_client_sees(versions, 10)
        for future in (sent[0], sent[1], sent[3]):
            assert future is not None
            await asyncio.wait_for(future, 10)


async def test_leader_hints_in_a_small_fetch_response_are_rewritten_to_our_listener() -> None:
    async with rig() as r:
        r.pump.send(fetch_request(5, 17), FETCH, 17, 5, True)
        _, _, upstream_id = await r.upstream_request()
        await r.upstream_send(fetch_response(upstream_id, b"r" * 1000, hints=True, version=17))
        frame = await r.client_frame()
        correlation_id, response = decode_response(FETCH, 17, frame[4:])
        assert correlation_id == 5
        assert [(int(e.node_id), e.host, int(e.port)) for e in response.node_endpoints] == [(2, "sidecar.local", 19094)]
        assert UPSTREAM_HOST.encode() not in frame


async def test_leader_hints_behind_a_streamed_head_are_blanked_not_leaked() -> None:
    async with rig() as r:
        r.pump.send(fetch_request(6), FETCH, 16, 6, True)
        _, _, upstream_id = await r.upstream_request()
        records = b"q" * (4 * STREAM_AFTER)
        frame = fetch_response(upstream_id, records, hints=True)
        half = len(frame) // 2
        await r.upstream_send(frame[:half])
        head = await r.client_read(half)  # streamed: the size is on the wire before the hints arrive
        await r.upstream_send(frame[half:])
        rest = await r.client_read(len(frame) - half)
        received = head + rest
        assert len(received) == len(frame)
        assert UPSTREAM_HOST.encode() not in received
        # The hints became one unknown tag of zeros, which clients skip (KIP-482) and then refresh
        # Metadata on NOT_LEADER_OR_FOLLOWER. kio rejects unknown tags, so it reads the response
        # without that section.
        tags_at = fetch_tags_offset(received)
        assert tags_at is not None
        count, tag, size = received[tags_at], received[tags_at + 1], received[tags_at + 2]
        assert (count, tag) == (1, BLANK_TAG) and received[tags_at + 3:] == bytes(size)
        correlation_id, response = decode_response(FETCH, 16, received[4:tags_at] + b"\x00")
        assert correlation_id == 6
        assert not response.node_endpoints
        partitions = response.responses[0].partitions
        assert bytes(partitions[0].records) == records
        assert int(partitions[1].error_code) == 6 and int(partitions[1].current_leader.leader_id) == 2


async def test_an_upstream_that_dies_mid_response_fails_every_waiting_request() -> None:
    async with rig() as r:
        first = r.pump.send(fetch_request(1), FETCH, 16, 1, True)
        second = r.pump.send(fetch_request(2), FETCH, 16, 2, True)
        _, _, upstream_id = await r.upstream_request()
        frame = fetch_response(upstream_id, b"z" * 500_000, hints=False)
        await r.upstream_send(frame[:1000])
        await r.client_read(1000)
        r.upstream_writer.transport.abort()
        for future in (first, second):
            assert future is not None
            with pytest.raises(ForwardError):
                await asyncio.wait_for(future, 10)
        assert r.pump.closed
        with pytest.raises(ForwardError):
            r.pump.send(fetch_request(3), FETCH, 16, 3, True)


async def test_a_response_to_another_request_breaks_the_stream() -> None:
    async with rig() as r:
        waiting = r.pump.send(fetch_request(1), FETCH, 16, 1, True)
        _, _, upstream_id = await r.upstream_request()
        await r.upstream_send(fetch_response(upstream_id + 1, b"z", hints=False))
        assert waiting is not None
        with pytest.raises(UpstreamProtocolError, match="correlation id"):
            await asyncio.wait_for(waiting, 10)
