"""The client side of the wire: what this project sends as a Kafka client, and the answers it reads.

The sidecar (to its upstream cluster), the upstream SASL login, the admin CLI and the benchmarks all
speak to a Kafka broker as clients. They build a request entity (`request_class` or
`protocol.build.build`), frame it with `encode_request`, and read the answer with `decode_response`;
none of them touches kio directly. The server side (decoding requests, encoding responses) is
`protocol.codec`; the two sides share the schema look-up of `protocol.schemas`, so a version that
Kafka 4 removed (`protocol.legacy`) is found the same way on both.

Also here, because they are kio's too: the embedded consumer protocol that classic groups carry as
opaque bytes (`decode_consumer_protocol`), which the admin CLI reads for DescribeGroups.
"""

from __future__ import annotations

import importlib
import io
import struct
from collections.abc import Callable
from functools import cache
from typing import Any, Literal

from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32

from .errors import ProtocolError
from .schemas import request_schema, response_schema

_SIZE = struct.Struct(">i")
_VERSION = struct.Struct(">h")


class ResponseDecodeError(ProtocolError):
    """Bytes that are not the response they were expected to be (truncated, or another API's)."""

    reason = "malformed_response"


def request_class(api_key: int, api_version: int) -> Any:
    """The request entity class of an API version (kio's, or `protocol.legacy`'s)."""
    return request_schema(api_key, api_version)


def response_class(api_key: int, api_version: int) -> Any:
    """The response entity class of an API version (kio's, or `protocol.legacy`'s)."""
    return response_schema(api_key, api_version)


def encode_request(api_key: int, correlation_id: int, client_id: str | None, request: Any) -> bytes:
    """A request entity with its header, prefixed by the frame size: the bytes a client sends."""
    cls = type(request)
    # Kafka's rule (ApiMessageType): request header v2 for flexible versions, v1 otherwise.
    header_cls = RequestHeaderV2 if cls.__flexible__ else RequestHeaderV1
    buffer = io.BytesIO()
    buffer.write(b"\x00\x00\x00\x00")
    entity_writer(header_cls)(
        buffer,
        header_cls(
            request_api_key=i16(api_key),
            request_api_version=cls.__version__,
            correlation_id=i32(correlation_id),
            client_id=client_id,
        ),
    )
    entity_writer(cls)(buffer, request)
    data = buffer.getbuffer()
    _SIZE.pack_into(data, 0, len(data) - 4)
    del data
    return buffer.getvalue()


@cache
def _response_readers(api_key: int, api_version: int) -> tuple[Callable[..., Any], Callable[..., Any]]:
    cls = response_schema(api_key, api_version)
    return entity_reader(cls.__header_schema__), entity_reader(cls)


def decode_response(api_key: int, api_version: int, payload: bytes | bytearray | memoryview) -> tuple[int, Any]:
    """(correlation id, response entity) of a response frame without its size prefix.

    Raises `ResponseDecodeError` for bytes that are not that response."""
    header_reader, body_reader = _response_readers(api_key, api_version)
    data = bytes(payload)
    try:
        header, offset = header_reader(data, 0)
        body, _ = body_reader(data, offset)
    except Exception as exc:  # kio raises several types for bytes it cannot read; all mean the same
        raise ResponseDecodeError(
            f"cannot decode api {api_key} v{api_version} response: {type(exc).__name__}: {exc}") from exc
    return int(header.correlation_id), body


# ---- the embedded consumer protocol (ConsumerProtocolSubscription / ConsumerProtocolAssignment) ----

_CONSUMER_PROTOCOL_VERSIONS = range(4)
_CONSUMER_PROTOCOL_SCHEMAS = {
    "assignment": "consumer_protocol_assignment",
    "subscription": "consumer_protocol_subscription",
}


@cache
def _consumer_protocol_readers(kind: str) -> tuple[Callable[..., Any], ...]:
    module = _CONSUMER_PROTOCOL_SCHEMAS[kind]
    name = "ConsumerProtocolAssignment" if kind == "assignment" else "ConsumerProtocolSubscription"
    return tuple(
        entity_reader(getattr(importlib.import_module(f"kio.schema.{module}.v{v}.data"), name))
        for v in _CONSUMER_PROTOCOL_VERSIONS
    )


def decode_consumer_protocol(kind: Literal["assignment", "subscription"], data: bytes) -> Any:
    """The entity of a version-prefixed ConsumerProtocolAssignment or ConsumerProtocolSubscription.

    Versions only append fields, so a version newer than the newest known one is read as that one
    (its prefix), as Kafka's `ConsumerProtocol` does. Raises ValueError for bytes that are not one."""
    if len(data) < 2:
        raise ValueError(f"consumer protocol {kind} shorter than its version")
    (version,) = _VERSION.unpack_from(data, 0)
    if version < 0:
        raise ValueError(f"negative consumer protocol version {version}")
    readers = _consumer_protocol_readers(kind)
    try:
        value, _ = readers[min(version, len(readers) - 1)](data, 2)
    except Exception as exc:  # kio raises several types for truncated or bad bytes
        raise ValueError(f"malformed consumer protocol v{version} data: {exc}") from exc
    return value
