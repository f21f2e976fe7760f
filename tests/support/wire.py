"""A raw Kafka-protocol client for tests: kio-encoded requests over a real socket."""

from __future__ import annotations

import asyncio
import contextlib
import struct
from typing import Any

from kio.serial import entity_reader

from protocol.build import build
from protocol.client import encode_request
from protocol.schemas import request_schema as load_request_schema
from protocol.schemas import response_schema as load_response_schema


def decode_response(api_key: int, api_version: int, payload: bytes) -> tuple[int, Any]:
    cls = load_response_schema(api_key, api_version)
    header, offset = entity_reader(cls.__header_schema__)(payload, 0)
    body, _ = entity_reader(cls)(payload, offset)
    return header.correlation_id, body


class WireClient:
    """One connection; `request()` sends a kio request and returns the decoded response."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, client_id: str = "wire-test") -> None:
        self.reader = reader
        self.writer = writer
        self.client_id = client_id
        self._correlation = 0

    @classmethod
    async def connect(cls, port: int, host: str = "127.0.0.1", client_id: str = "wire-test") -> WireClient:
        reader, writer = await asyncio.open_connection(host, port)
        return cls(reader, writer, client_id)

    def next_correlation(self) -> int:
        self._correlation += 1
        return self._correlation

    async def send(self, request: Any, correlation_id: int | None = None) -> int:
        cid = self.next_correlation() if correlation_id is None else correlation_id
        self.writer.write(encode_request(int(request.__api_key__), cid, self.client_id, request))
        await self.writer.drain()
        return cid

    async def send_raw(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def read_frame(self, timeout: float = 10.0) -> bytes:
        size_bytes = await asyncio.wait_for(self.reader.readexactly(4), timeout)
        (size,) = struct.unpack(">i", size_bytes)
        return await asyncio.wait_for(self.reader.readexactly(size), timeout)

    async def receive(self, api_key: int, api_version: int, timeout: float = 10.0) -> tuple[int, Any]:
        return decode_response(api_key, api_version, await self.read_frame(timeout))

    async def request(self, request: Any, timeout: float = 10.0) -> Any:
        cid = await self.send(request)
        got, body = await self.receive(int(request.__api_key__), int(request.__version__), timeout)
        assert got == cid, f"correlation id {got} != {cid}"
        return body

    async def closed_by_peer(self, timeout: float = 5.0) -> bool:
        """True when the server closes the connection (EOF or reset) before `timeout`."""
        try:
            data = await asyncio.wait_for(self.reader.read(65536), timeout)
        except (ConnectionResetError, BrokenPipeError):
            return True
        return data == b""

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(ConnectionError, BrokenPipeError):
            await self.writer.wait_closed()


def request(api_key: int, version: int, **fields: Any) -> Any:
    """A kio request entity of `api_key` at `version` from its fields (kio's names)."""
    return build(load_request_schema(api_key, version), fields)


async def call(port: int, req: Any, timeout: float = 20.0) -> Any:
    """One request on a connection of its own: its decoded response."""
    client = await WireClient.connect(port)
    try:
        return await client.request(req, timeout=timeout)
    finally:
        await client.close()
