"""Kafka's 4-byte size-prefixed framing.

A frame is `int32 size` (big-endian, bytes that follow) then `size` bytes. `FrameDecoder` accepts
bytes in arbitrary chunks and hands out complete frames; a size that is negative, too small to hold
a request header, or above the configured maximum raises a `ProtocolError` subclass and the decoder
stays poisoned, because nothing after a bad size can be trusted.
"""

from __future__ import annotations

import struct

from .errors import FrameTooLarge, InvalidFrame

_SIZE = struct.Struct(">i")

# api_key (2) + api_version (2) + correlation_id (4): the least a request can hold.
MIN_REQUEST_SIZE = 8


class FrameDecoder:
    """Incremental frame splitter for one connection."""

    __slots__ = ("_buffer", "_max_size", "_poisoned")

    def __init__(self, max_size: int) -> None:
        self._buffer = bytearray()
        self._max_size = max_size
        self._poisoned = False

    @property
    def buffered(self) -> int:
        return len(self._buffer)

    @property
    def max_size(self) -> int:
        return self._max_size

    @max_size.setter
    def max_size(self, value: int) -> None:
        """A new limit for the frames still to come (a SASL connection's grows once authenticated)."""
        self._max_size = value

    def feed(self, data: bytes) -> list[bytes]:
        """Add received bytes; return every frame completed by them (possibly none)."""
        if self._poisoned:
            raise InvalidFrame("decoder already failed on this connection")
        buffer = self._buffer
        buffer += data
        frames: list[bytes] = []
        start = 0
        end = len(buffer)
        while end - start >= 4:
            (size,) = _SIZE.unpack_from(buffer, start)
            if size < MIN_REQUEST_SIZE:
                self._poisoned = True
                raise InvalidFrame(f"frame size {size} is below the minimum {MIN_REQUEST_SIZE}")
            if size > self._max_size:
                self._poisoned = True
                raise FrameTooLarge(f"frame size {size} exceeds socket.request.max.bytes {self._max_size}")
            if end - start - 4 < size:
                break
            frames.append(bytes(buffer[start + 4 : start + 4 + size]))
            start += 4 + size
        if start:
            del buffer[:start]
        return frames


def frame(payload: bytes) -> bytes:
    """Prefix a payload with its size."""
    return _SIZE.pack(len(payload)) + payload
