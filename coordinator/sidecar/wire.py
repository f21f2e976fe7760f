"""Byte-level helpers for forwarding: request header peeks, correlation id swaps, response framing,
and kio decoding/encoding of the few responses the sidecar must read or rewrite.

A forwarded request is never decoded: only its fixed header prefix (api key, version, correlation
id) is read, and only the correlation id is replaced. Responses are split from the upstream stream
by their size prefix; their first four bytes are the correlation id in every header version.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Callable
from functools import cache
from typing import Any

from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32

from protocol.errors import ProtocolError
from protocol.schemas import request_schema, response_schema

_HEAD = struct.Struct(">hhi")
_SIZE = struct.Struct(">i")
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")

PRODUCE_KEY = 0


class UpstreamProtocolError(ProtocolError):
    """The upstream sent bytes that are not a Kafka response stream (or not the one expected)."""

    reason = "upstream_protocol_error"


def peek_header(frame: bytes) -> tuple[int, int, int]:
    """(api key, api version, correlation id) of a request frame (size prefix already removed)."""
    return _HEAD.unpack_from(frame, 0)


def reframe_request(frame: bytes, correlation_id: int) -> bytes:
    """The same request with another correlation id, size-prefixed for the upstream socket."""
    return b"".join((_SIZE.pack(len(frame)), frame[:4], _I32.pack(correlation_id), frame[8:]))


def reframe_response(body: bytes, correlation_id: int) -> bytes:
    """An upstream response body (size prefix removed) with the client's correlation id, framed."""
    return b"".join((_SIZE.pack(len(body)), _I32.pack(correlation_id), body[4:]))


def response_correlation_id(body: bytes) -> int:
    if len(body) < 4:
        raise UpstreamProtocolError(f"response of {len(body)} bytes has no correlation id")
    return int(_I32.unpack_from(body, 0)[0])


def expects_response(frame: bytes) -> bool:
    """False only for Produce with acks=0, which no broker answers. Produce v3+ starts its body with
    the nullable transactional id (compact from v9), then acks (int16)."""
    api_key, version, _ = _HEAD.unpack_from(frame, 0)
    if api_key != PRODUCE_KEY:
        return True
    try:
        offset = _body_offset(frame, version >= 9)
        if version >= 9:
            length, offset = _uvarint(frame, offset)
            offset += max(length - 1, 0)
        else:
            (length,) = _I16.unpack_from(frame, offset)
            offset += 2 + max(length, 0)
        (acks,) = _I16.unpack_from(frame, offset)
    except (struct.error, IndexError):
        return True  # malformed: let the upstream judge (and answer or close)
    return bool(acks != 0)


def _body_offset(frame: bytes, flexible: bool) -> int:
    """Skip the request header: key, version, correlation id, client id (int16 string), then the
    header's tagged fields when flexible."""
    client_len: int = _I16.unpack_from(frame, 8)[0]
    offset = 10 + max(client_len, 0)
    if flexible:
        count, offset = _uvarint(frame, offset)
        for _ in range(count):
            _, offset = _uvarint(frame, offset)
            size, offset = _uvarint(frame, offset)
            offset += size
    return offset


def _uvarint(data: bytes, offset: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = data[offset]
        offset += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, offset
        shift += 7
        if shift > 35:
            raise IndexError("varint too long")


class ResponseSplitter:
    """Splits an upstream byte stream into response bodies (size prefix removed)."""

    __slots__ = ("_buffer", "_max_size")

    def __init__(self, max_size: int) -> None:
        self._buffer = bytearray()
        self._max_size = max_size

    def feed(self, data: bytes) -> list[bytes]:
        buffer = self._buffer
        buffer += data
        out: list[bytes] = []
        start, end = 0, len(buffer)
        while end - start >= 4:
            (size,) = _SIZE.unpack_from(buffer, start)
            if size < 4 or size > self._max_size:
                raise UpstreamProtocolError(f"upstream response size {size} is out of range")
            if end - start - 4 < size:
                break
            out.append(bytes(buffer[start + 4: start + 4 + size]))
            start += 4 + size
        if start:
            del buffer[:start]
        return out


# ---- kio, for the requests the sidecar makes and the responses it rewrites --------------------


@cache
def _response_readers(api_key: int, version: int) -> tuple[Callable[..., Any], Callable[..., Any]]:
    cls = response_schema(api_key, version)
    return entity_reader(cls.__header_schema__), entity_reader(cls)


def decode_response(api_key: int, version: int, body: bytes) -> Any:
    """The kio response entity of an upstream response body (size prefix removed)."""
    header_reader, body_reader = _response_readers(api_key, version)
    try:
        _, offset = header_reader(body, 0)
        entity, _ = body_reader(body, offset)
    except Exception as exc:  # kio raises several types for bad bytes; all mean the same
        raise UpstreamProtocolError(
            f"cannot decode upstream response to api {api_key} v{version}: {type(exc).__name__}: {exc}") from exc
    return entity


def encode_request(api_key: int, correlation_id: int, client_id: str, request: Any) -> bytes:
    """A kio request entity with its header, framed."""
    cls = type(request)
    header_cls = RequestHeaderV2 if cls.__flexible__ else RequestHeaderV1
    buffer = io.BytesIO()
    buffer.write(b"\x00\x00\x00\x00")
    entity_writer(header_cls)(buffer, header_cls(
        request_api_key=i16(api_key), request_api_version=cls.__version__,
        correlation_id=i32(correlation_id), client_id=client_id))
    entity_writer(cls)(buffer, request)
    data = buffer.getbuffer()
    _SIZE.pack_into(data, 0, len(data) - 4)
    del data
    return buffer.getvalue()


def request_class(api_key: int, version: int) -> Any:
    return request_schema(api_key, version)


class ForwardError(ProtocolError):
    """A forwarded request could not be answered (upstream unreachable or gone): the client's
    connection is closed, as a broker that went away would close it."""

    reason = "upstream_unavailable"
