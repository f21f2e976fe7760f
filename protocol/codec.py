"""Request decoding and response encoding with kio.

`RequestCodec` turns one frame into a `DecodedRequest` (header fields plus the kio request entity of
the exact version) and a response entity into a framed byte string with the right header version.
The hot requests are read by `fastdecode`'s direct decoders (the same entities), kio reads the rest
and whatever those decoders do not vouch for.

Rules (Kafka's `RequestHeader.json`, `ApiMessageType.requestHeaderVersion`, KIP-511):
- request header v2 for flexible versions of an API, v1 otherwise (client id stays an int16 string);
- response header v1 for flexible versions, v0 otherwise, except ApiVersions which always uses v0
  (kio encodes that exception in each entity's `__header_schema__`);
- an unknown API key, or a version outside the served range, is a `ProtocolError` (the connection is
  closed), except ApiVersions: a too-new ApiVersions is answered, so it decodes to a request flagged
  `unsupported_version` with no body;
- a request claiming an array larger than the bytes it holds is refused before kio sees it
  (`guard.py`: kio would reserve memory for it, and a failed reservation aborts the process), and so
  is a compact string over 32,767 bytes, as Kafka's parsers refuse it (no name too long for an older
  version's INT16 string is ever stored).
"""

from __future__ import annotations

import io
import struct
from collections.abc import Callable, Mapping
from functools import cache
from typing import Any

import msgspec
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.serial import entity_reader, entity_writer

from . import guard
from .errors import MalformedRequest, UnknownApiKey, UnsupportedVersion
from .fastdecode import DECODERS as FAST_DECODERS
from .fastencode import ENCODERS as FAST_ENCODERS
from .fastencode import Description
from .framing import MIN_REQUEST_SIZE
from .schemas import request_schema

API_VERSIONS_KEY = 18

_HEAD = struct.Struct(">hhi")
_SIZE = struct.Struct(">i")

VersionRanges = Mapping[int, tuple[int, int]]


class DecodedRequest(msgspec.Struct, frozen=True, gc=False):
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str
    body: Any
    """The kio request entity; None when `unsupported_version` is set."""
    unsupported_version: bool = False
    """Only for ApiVersions: the client asked for a version above the served range."""


@cache
def _request_plan(api_key: int, api_version: int) -> tuple[Callable[..., Any], Callable[..., Any]]:
    schema = request_schema(api_key, api_version)
    header = RequestHeaderV2 if schema.__flexible__ else RequestHeaderV1
    return entity_reader(header), entity_reader(schema)


_HEADER_V2_READER = entity_reader(RequestHeaderV2)
_HEADER_V1_READER = entity_reader(RequestHeaderV1)


class RequestCodec:
    """Decodes frames against the table of served API versions."""

    def __init__(self, served: VersionRanges) -> None:
        self._served = dict(served)

    def decode(self, frame: bytes) -> DecodedRequest:
        if len(frame) < MIN_REQUEST_SIZE:
            raise MalformedRequest(f"request of {len(frame)} bytes is shorter than its header")
        api_key, api_version, correlation_id = _HEAD.unpack_from(frame, 0)
        served = self._served.get(api_key)
        if served is None:
            raise UnknownApiKey(f"api key {api_key} is not served")
        low, high = served
        if not low <= api_version <= high:
            if api_key == API_VERSIONS_KEY and api_version > high:
                return self._too_new_api_versions(frame, api_version, correlation_id)
            raise UnsupportedVersion(
                f"api key {api_key} version {api_version} is outside {low}..{high}"
            )
        fast = FAST_DECODERS.get((api_key, api_version))
        if fast is not None and (decoded := fast(frame)) is not None:  # the hot requests: `fastdecode`
            return DecodedRequest(api_key, api_version, correlation_id, decoded[0], decoded[1])
        guard.check(api_key, api_version, frame)
        header_reader, body_reader = _request_plan(api_key, api_version)
        try:
            header, offset = header_reader(frame, 0)
            body, _ = body_reader(frame, offset)
        except Exception as exc:  # kio raises several types for bad bytes; all mean the same
            raise MalformedRequest(
                f"cannot decode api key {api_key} v{api_version}: {type(exc).__name__}: {exc}"
            ) from exc
        return DecodedRequest(api_key, api_version, correlation_id, header.client_id or "", body)

    @staticmethod
    def _too_new_api_versions(frame: bytes, api_version: int, correlation_id: int) -> DecodedRequest:
        # KIP-511: the body is not parsed; a client id is still useful for the log line.
        reader = _HEADER_V2_READER if api_version >= 3 else _HEADER_V1_READER
        try:
            header, _ = reader(frame, 0)
            client_id = header.client_id or ""
        except Exception:
            client_id = ""
        return DecodedRequest(API_VERSIONS_KEY, api_version, correlation_id, client_id, None, True)


@cache
def _response_writers(cls: Any) -> tuple[Callable[..., Any], Callable[..., Any], Any]:
    header_cls = cls.__header_schema__
    return entity_writer(header_cls), entity_writer(cls), header_cls


class EncodedResponse(msgspec.Struct, frozen=True, gc=False):
    """A response already framed by a `fastencode` encoder, with the description it was encoded
    from and its (api key, version) (for the per-error-code metric). A struct: built in C, once per
    hot response."""

    data: bytes
    description: Description
    key: tuple[int, int]


def encode_described(api_key: int, api_version: int, correlation_id: int, description: Description
                     ) -> EncodedResponse | None:
    """Encode a response description with the precompiled `struct` encoder of its API version
    (Heartbeat, ConsumerGroupHeartbeat, OffsetCommit, ShareFetch; proven byte-for-byte equal to kio's encoding of
    `build(schema, description)`), or None when that version has none."""
    key = (api_key, api_version)
    fast = FAST_ENCODERS.get(key)
    if fast is None:
        return None
    return EncodedResponse(fast(correlation_id, description), description, key)


def encode_response(correlation_id: int, response: Any) -> bytes:
    """Encode a kio response entity with its header, prefixed by the frame size (kio's writers)."""
    header_writer, body_writer, header_cls = _response_writers(response.__class__)
    buffer = io.BytesIO()
    buffer.write(b"\x00\x00\x00\x00")
    header_writer(buffer, header_cls(correlation_id=correlation_id))
    body_writer(buffer, response)
    data = buffer.getbuffer()
    _SIZE.pack_into(data, 0, len(data) - 4)
    del data
    return buffer.getvalue()
