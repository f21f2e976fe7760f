"""Byte-level helpers for forwarding: request header peeks, correlation id swaps, response framing,
and decoding of the few responses the sidecar must read or rewrite (through `protocol.client`).

A forwarded request is never decoded: only its fixed header prefix (api key, version, correlation
id) is read, and only the correlation id is replaced. Responses are cut from the upstream stream as
whole frames (size prefix included) into one buffer each, the only copy Python makes of them; the
correlation id (the four bytes after the size in every header version) is then replaced in place.
"""

from __future__ import annotations

import struct
from typing import Any

from protocol import client
from protocol.errors import ProtocolError

from ..logging import get_logger
from .lograte import RateLimitedLog

_HEAD = struct.Struct(">hhi")
_SIZE = struct.Struct(">i")
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")

PRODUCE_KEY = 0
ACKS_WITHIN = 1 << 17
"""A Produce request's acks comes after its client id and transactional id (int16-sized strings):
within this many bytes of its start, or the request is malformed."""


class UpstreamProtocolError(ProtocolError):
    """The upstream sent bytes that are not a Kafka response stream (or not the one expected)."""

    reason = "upstream_protocol_error"


def peek_header(frame: bytes | bytearray | memoryview) -> tuple[int, int, int]:
    """(api key, api version, correlation id) of a request frame (size prefix already removed)."""
    return _HEAD.unpack_from(frame, 0)


def reframe_request(head: bytes | bytearray | memoryview, size: int, correlation_id: int) -> list[bytes | memoryview]:
    """The start of a request of `size` bytes (size prefix excluded) whose first bytes (at least its
    8-byte header) are `head`, under another correlation id and size-prefixed for the upstream
    socket, as chunks for `writelines` (the body is not copied). The rest of the request, if
    `head` is not all of it, follows as it is."""
    prefix = _SIZE.pack(size) + bytes(head[:4]) + _I32.pack(correlation_id)
    return [prefix, memoryview(head)[8:]]


def set_correlation_id(frame: bytearray, correlation_id: int) -> bytearray:
    """An upstream response frame (size prefix included) given the client's correlation id."""
    _I32.pack_into(frame, 4, correlation_id)
    return frame


def response_correlation_id(frame: bytearray) -> int:
    return int(_I32.unpack_from(frame, 4)[0])


def expects_response(frame: bytes | bytearray | memoryview, complete: bool = True) -> bool | None:
    """False only for Produce with acks=0, which no broker answers. Produce v3+ starts its body with
    the nullable transactional id (compact from v9), then acks (int16). `frame` may be only the
    first part of a request (`complete` False): None then means that part ends before acks."""
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
        if not complete and len(frame) < ACKS_WITHIN:
            return None  # not here yet
        return True  # malformed: let the upstream judge (and answer or close)
    return bool(acks != 0)


def _body_offset(frame: bytes | bytearray | memoryview, flexible: bool) -> int:
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


def _uvarint(data: bytes | bytearray | memoryview, offset: int) -> tuple[int, int]:
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
    """Cuts an upstream byte stream into response frames (size prefix included). Each frame's
    buffer is allocated once its size is known and filled as chunks arrive."""

    __slots__ = ("_filled", "_frame", "_head", "_max_size")

    def __init__(self, max_size: int) -> None:
        self._head = bytearray()
        self._frame: bytearray | None = None
        self._filled = 0
        self._max_size = max_size

    def feed(self, data: bytes) -> list[bytearray]:
        out: list[bytearray] = []
        view = memoryview(data)
        position, end = 0, len(data)
        while position < end:
            frame = self._frame
            if frame is None:
                take = min(4 - len(self._head), end - position)
                self._head += view[position:position + take]
                position += take
                if len(self._head) < 4:
                    break
                (size,) = _SIZE.unpack_from(self._head, 0)
                if size < 4 or size > self._max_size:
                    raise UpstreamProtocolError(f"upstream response size {size} is out of range")
                frame = self._frame = bytearray(4 + size)
                frame[:4] = self._head
                self._head.clear()
                self._filled = 4
            take = min(len(frame) - self._filled, end - position)
            frame[self._filled:self._filled + take] = view[position:position + take]
            self._filled += take
            position += take
            if self._filled == len(frame):
                out.append(frame)
                self._frame = None
        return out


# ---- the few upstream responses the sidecar must read or rewrite ---------------------------------


def decode_response(api_key: int, version: int, frame: bytes | bytearray) -> Any:
    """The response entity of an upstream response frame (size prefix included)."""
    try:
        _, entity = client.decode_response(api_key, version, memoryview(frame)[4:])
    except client.ResponseDecodeError as exc:
        raise UpstreamProtocolError(f"upstream: {exc}") from exc
    return entity


class ForwardError(ProtocolError):
    """A forwarded request could not be answered (upstream unreachable or gone): the client's
    connection is closed, as a broker that went away would close it. The line saying so is
    rate-limited (`log_limit`): an upstream that dies closes every client connection at once, and
    clients that reconnect while it is away fail again."""

    reason = "upstream_unavailable"
    log_limit = RateLimitedLog(get_logger("coordinator.connection"))


class UpstreamUnavailable(ForwardError):
    """The upstream cannot be reached and the request is not one answered without it
    (`unreachable.Fallback`)."""


# ---- finding the leader hints without decoding a whole Produce or Fetch response -----------------
#
# Produce v10+ and Fetch v16+ carry their NodeEndpoints leader hints as a top-level tagged field
# (tag 0), after every topic and partition. Decoding a Fetch response with kio just to look for it
# costs more than forwarding it, so the response is walked instead: fixed-size fields skipped,
# arrays, strings, records and tagged fields skipped by their lengths (cost by partition count,
# not by bytes). Anything unexpected returns None and the caller decodes.


def _skip_tags(data: bytes | bytearray | memoryview, offset: int) -> tuple[set[int], int]:
    count, offset = _uvarint(data, offset)
    tags = set()
    for _ in range(count):
        tag, offset = _uvarint(data, offset)
        size, offset = _uvarint(data, offset)
        tags.add(tag)
        offset += size
    return tags, offset


def _skip_compact(data: bytes | bytearray | memoryview, offset: int) -> int:
    """A compact string, bytes or records field (length + 1; 0 = null)."""
    length, offset = _uvarint(data, offset)
    return offset + max(length - 1, 0)


def top_level_tags(api_key: int, version: int, body: bytes | bytearray) -> set[int] | None:
    """The tags of a Produce (v10+) or Fetch (v16+) response frame's top-level tagged fields."""
    try:
        _, offset = _skip_tags(body, 8)  # size; response header v1: correlation id, tagged fields
        if api_key == PRODUCE_KEY:
            offset = _skip_produce(body, offset, version)
        else:
            offset = _skip_fetch(body, offset + 10)  # throttle, error code, session id
        tags, offset = _skip_tags(body, offset)
    except (IndexError, struct.error):
        return None
    return tags if offset == len(body) else None


def _skip_produce(data: bytes | bytearray, offset: int, version: int) -> int:
    topics, offset = _uvarint(data, offset)
    for _ in range(topics - 1):
        offset = offset + 16 if version >= 13 else _skip_compact(data, offset)
        partitions, offset = _uvarint(data, offset)
        for _ in range(partitions - 1):
            offset += 4 + 2 + 8 + 8 + 8  # index, error, base offset, append time, log start offset
            errors, offset = _uvarint(data, offset)
            for _ in range(errors - 1):
                offset = _skip_compact(data, offset + 4)
                _, offset = _skip_tags(data, offset)
            offset = _skip_compact(data, offset)  # error message
            _, offset = _skip_tags(data, offset)
        _, offset = _skip_tags(data, offset)
    return offset + 4  # throttle time


def _skip_fetch(data: bytes | bytearray | memoryview, offset: int) -> int:
    topics, offset = _uvarint(data, offset)
    for _ in range(topics - 1):
        offset += 16  # topic id
        partitions, offset = _uvarint(data, offset)
        for _ in range(partitions - 1):
            offset += 4 + 2 + 8 + 8 + 8
            aborted, offset = _uvarint(data, offset)
            for _ in range(aborted - 1):
                _, offset = _skip_tags(data, offset + 16)
            offset = _skip_compact(data, offset + 4)  # preferred read replica, then records
            _, offset = _skip_tags(data, offset)
        _, offset = _skip_tags(data, offset)
    return offset


def fetch_tags_offset(frame: bytes | bytearray | memoryview) -> int | None:
    """Where the top-level tagged fields of a Fetch v13+ response frame (size prefix included)
    begin, or None when `frame` (possibly the first part of one) ends before them. Every byte
    before that offset is header, partitions or records: nothing there names a broker address.
    A read past the end of `frame` means the topics array goes on past it, so None is exact."""
    try:
        _, offset = _skip_tags(frame, 8)  # response header v1: correlation id, tagged fields
        offset = _skip_fetch(frame, offset + 10)  # throttle, error code, session id
    except (IndexError, struct.error):
        return None
    return offset if offset <= len(frame) else None


def find_tag(frame: bytes | bytearray, offset: int, wanted: int) -> tuple[int, int, int] | None:
    """In the tagged-field section at `offset`, which must end the frame: (offset of the tag,
    of its payload, of the payload's end) for tag `wanted`, (-1, -1, -1) when absent, None when the
    section does not parse or does not end at the end of the frame."""
    found = (-1, -1, -1)
    try:
        count, offset = _uvarint(frame, offset)
        for _ in range(count):
            tag_at = offset
            tag, offset = _uvarint(frame, offset)
            size, offset = _uvarint(frame, offset)
            if tag == wanted:
                found = (tag_at, offset, offset + size)
            offset += size
    except IndexError:
        return None
    return found if offset == len(frame) else None
