"""Forwarded requests stream through the sidecar: a sidecar process in front of an upstream broker
played by the test on 127.0.0.1 (it answers the sidecar's own ApiVersions and Metadata, records
every request's bytes as they arrive and answers Produce once it has read it whole), and a raw
client on the sidecar's listener for that broker.

What is shown: a large Produce reaches the upstream while the client is still sending it, byte for
byte but for the correlation id; forwarded requests streamed, forwarded after waiting and served
here keep the client's order; when the upstream stops reading, the sidecar stops reading the
client instead of buffering what it sends."""

from __future__ import annotations

import asyncio
import contextlib
import struct
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from protocol.build import build
from protocol.client import encode_request
from protocol.codec import encode_response
from protocol.schemas import request_schema, response_schema
from tests.sidecar.conftest import free_base_port
from tests.support.polling import eventually
from tests.support.server import ServerProcess
from tests.support.wire import WireClient, decode_response

pytestmark = pytest.mark.asyncio

PRODUCE, METADATA, API_VERSIONS = 0, 3, 18
PRODUCE_VERSION = 7
MB = 1024 * 1024


@dataclass
class Request:
    api_key: int
    size: int
    data: bytearray = field(default_factory=bytearray)  # what has arrived so far (size prefix removed)


class FakeBroker:
    """Node 1 of an upstream cluster, played by the test."""

    def __init__(self) -> None:
        self.requests: list[Request] = []
        self.reading = asyncio.Event()
        self.reading.set()
        self.port = 0
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    def close(self) -> None:
        if self._server is not None:
            self._server.close()

    def produce_requests(self) -> list[Request]:
        return [r for r in self.requests if r.api_key == PRODUCE]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                size = struct.unpack(">i", await reader.readexactly(4))[0]
                head = await reader.readexactly(8)
                request = Request(struct.unpack_from(">h", head)[0], size, bytearray(head))
                self.requests.append(request)
                while len(request.data) < size:
                    await self.reading.wait()
                    chunk = await reader.read(min(64 * 1024, size - len(request.data)))
                    if not chunk:
                        return
                    request.data += chunk
                _, version, correlation_id = struct.unpack_from(">hhi", request.data)
                answer = self._answer(request.api_key, version, bytes(request.data))
                if answer is not None:
                    writer.write(encode_response(correlation_id, answer))
                    await writer.drain()
        writer.close()

    def _answer(self, api_key: int, version: int, frame: bytes) -> Any:
        if api_key == API_VERSIONS:
            return build(response_schema(API_VERSIONS, version), {"api_keys": [
                {"api_key": PRODUCE, "min_version": 0, "max_version": PRODUCE_VERSION},
                {"api_key": METADATA, "min_version": 0, "max_version": 12},
                {"api_key": API_VERSIONS, "min_version": 0, "max_version": 3}]})
        if api_key == METADATA:
            return build(response_schema(METADATA, version), {
                "brokers": [{"node_id": 1, "host": "127.0.0.1", "port": self.port}], "controller_id": 1, "topics": []})
        if api_key == PRODUCE and produce_acks(frame) != 0:
            return build(response_schema(PRODUCE, version), {"responses": [{"name": "t", "partition_responses": [
                {"index": 0, "error_code": 0, "base_offset": len(self.produce_requests())}]}]})
        return None


def produce_acks(frame: bytes) -> int:
    """The acks of a Produce v3-v8 request (after the client id and the transactional id)."""
    client_id = struct.unpack_from(">h", frame, 8)[0]
    offset = 10 + max(client_id, 0)
    transactional_id = struct.unpack_from(">h", frame, offset)[0]
    return int(struct.unpack_from(">h", frame, offset + 2 + max(transactional_id, 0))[0])


def produce_frame(correlation_id: int, size: int, acks: int = 1) -> bytes:
    """A Produce request of about `size` bytes (its records are opaque to the sidecar and to the
    upstream played here), size prefix included."""
    request = build(request_schema(PRODUCE, PRODUCE_VERSION), {
        "transactional_id": None, "acks": acks, "timeout_ms": 30000, "topic_data": [
            {"name": "t", "partition_data": [{"index": 0, "records": bytes(range(256)) * (size // 256)}]}]})
    return encode_request(PRODUCE, correlation_id, "stream-test", request)


@dataclass
class Rig:
    broker: FakeBroker
    sidecar: ServerProcess
    client: WireClient


@contextlib.asynccontextmanager
async def rig(tmp_path: Path, **overrides: str) -> AsyncIterator[Rig]:
    broker = FakeBroker()
    await broker.start()
    base = free_base_port()
    sidecar = ServerProcess(tmp_path / "sidecar-data", overrides={
        "upstream.bootstrap.servers": f"127.0.0.1:{broker.port}", "sidecar.listener.base.port": str(base),
        **overrides})
    try:
        await asyncio.to_thread(sidecar.start)  # the broker answers the sidecar meanwhile
        client = await WireClient.connect(base + 1)
        try:
            yield Rig(broker, sidecar, client)
        finally:
            await client.close()
    finally:
        await asyncio.to_thread(sidecar.stop)
        broker.close()


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


async def test_a_large_produce_reaches_the_upstream_while_the_client_is_still_sending_it(tmp_path) -> None:
    async with rig(tmp_path) as r:
        await r.client.send_raw(produce_frame(40, 1024))  # the first forwarded request opens the upstream connection
        assert decode_response(PRODUCE, PRODUCE_VERSION, await r.client.read_frame())[0] == 40
        frame = produce_frame(41, 4 * MB)
        half = len(frame) // 2
        await r.client.send_raw(frame[:half])
        # Only the first half has been sent: the upstream already reads it.
        await eventually(lambda: len(r.broker.produce_requests()) == 2 and len(r.broker.produce_requests()[1].data) >= MB,
                    message="the upstream to receive the start of the request")
        assert len(r.broker.produce_requests()[1].data) <= half - 4
        await r.client.send_raw(frame[half:])
        correlation_id, response = decode_response(PRODUCE, PRODUCE_VERSION, await r.client.read_frame())
        assert correlation_id == 41
        assert response.responses[0].partition_responses[0].error_code == 0
        _, upstream = r.broker.produce_requests()
        # Byte for byte, but for the correlation id (the sidecar's own on its upstream connection).
        assert len(upstream.data) == len(frame) - 4
        assert upstream.data[:4] == frame[4:8] and upstream.data[8:] == frame[12:]


async def test_streamed_queued_and_local_requests_are_answered_in_the_clients_order(tmp_path) -> None:
    async with rig(tmp_path) as r:
        api_versions = encode_request(API_VERSIONS, 2, "stream-test",
                                      build(request_schema(API_VERSIONS, 3), {"client_software_name": "t",
                                                                              "client_software_version": "1"}))
        # One write: a large Produce (forwarded as it arrives), ApiVersions (served here), a large
        # Produce with acks=0 (no response) and a small one, both waiting for ApiVersions' answer.
        await r.client.send_raw(produce_frame(1, 2 * MB) + api_versions + produce_frame(3, 2 * MB, acks=0)
                                + produce_frame(4, 4096) + produce_frame(5, 3 * MB))
        answered = []
        for api_key, version in ((PRODUCE, PRODUCE_VERSION), (API_VERSIONS, 3), (PRODUCE, PRODUCE_VERSION),
                                 (PRODUCE, PRODUCE_VERSION)):
            correlation_id, response = decode_response(api_key, version, await r.client.read_frame())
            assert response.error_code == 0 if api_key == API_VERSIONS else (
                response.responses[0].partition_responses[0].error_code == 0)
            answered.append(correlation_id)
        assert answered == [1, 2, 4, 5]
        upstream = r.broker.produce_requests()
        assert [len(p.data) + 4 for p in upstream] == [len(produce_frame(c, s)) for c, s in
                                                        ((1, 2 * MB), (3, 2 * MB), (4, 4096), (5, 3 * MB))]
        assert [produce_acks(bytes(p.data)) for p in upstream] == [1, 0, 1, 1]


async def test_a_request_after_a_parked_join_is_answered_after_it(tmp_path) -> None:
    """JoinGroup is served here and parks for the rebalance delay; a Produce that arrives with it,
    in the same read, must neither overtake it upstream nor be answered before it."""
    async with rig(tmp_path, **{"group.initial.rebalance.delay.ms": "300"}) as r:
        await r.client.send_raw(produce_frame(1, 1024))  # the upstream connection open
        assert decode_response(PRODUCE, PRODUCE_VERSION, await r.client.read_frame())[0] == 1
        join = build(request_schema(11, 5), {
            "group_id": "g", "session_timeout": 10000, "rebalance_timeout": 10000, "member_id": "",
            "group_instance_id": "i", "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}]})
        await r.client.send_raw(encode_request(11, 2, "stream-test", join) + produce_frame(3, 1024))
        correlation_id, joined = decode_response(11, 5, await r.client.read_frame())
        assert (correlation_id, joined.error_code) == (2, 0)
        assert decode_response(PRODUCE, PRODUCE_VERSION, await r.client.read_frame())[0] == 3


async def test_an_upstream_that_stops_reading_stops_the_sidecar_reading_the_client(tmp_path) -> None:
    async with rig(tmp_path) as r:
        assert r.sidecar.proc is not None
        pid = r.sidecar.proc.pid
        frame = produce_frame(1, MB)
        # Warm up (the upstream connection open, the receive buffer at its size), then stop reading.
        await r.client.send_raw(frame)
        await r.client.read_frame()
        before = rss_bytes(pid)
        r.broker.reading.clear()
        sent = 0
        while sent < 64:
            r.client.writer.write(produce_frame(100 + sent, MB))
            sent += 1
            try:
                await asyncio.wait_for(r.client.writer.drain(), 1.0)
            except TimeoutError:
                break
        print(f"the client's writes stopped after {sent} MB")
        assert sent < 64, "the sidecar kept reading while its upstream did not"
        # What stopped the client is kernel socket buffers, not the sidecar's memory.
        assert rss_bytes(pid) - before < 16 * MB, f"{(rss_bytes(pid) - before) / MB:.1f} MB more after {sent} MB"
        r.broker.reading.set()
        for i in range(sent):
            correlation_id, _ = decode_response(PRODUCE, PRODUCE_VERSION, await r.client.read_frame(30))
            assert correlation_id == 100 + i
        assert r.sidecar.ready()
