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
    """Incremental frame splitter for one connection.

    Frames are cut straight out of the received chunks: a frame inside one chunk is copied once
    (out of a memoryview of it); a frame spread over several chunks is kept as views of them
    until its last byte arrives, then joined, which is its one copy. Only a size prefix split
    between chunks (up to 3 bytes) is buffered."""

    __slots__ = ("_head", "_max_size", "_missing", "_parts", "_poisoned")

    def __init__(self, max_size: int) -> None:
        self._head = bytearray()  # the first bytes of a size prefix split between chunks
        self._parts: list[memoryview] = []  # the received part of a frame spread over chunks
        self._missing = 0  # bytes that frame still needs
        self._max_size = max_size
        self._poisoned = False

    @property
    def buffered(self) -> int:
        return len(self._head) + sum(len(part) for part in self._parts)

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
        frames: list[bytes] = []
        view = memoryview(data)
        position, end = 0, len(data)
        if self._missing:
            take = min(self._missing, end)
            self._parts.append(view[:take])
            self._missing -= take
            position = take
            if self._missing:
                return frames
            frames.append(b"".join(self._parts))
            self._parts = []
        if self._head:
            take = min(4 - len(self._head), end - position)
            self._head += view[position : position + take]
            position += take
            if len(self._head) < 4:
                return frames
            (size,) = _SIZE.unpack_from(self._head, 0)
            self._head.clear()
            position = self._take(frames, view, position, self._checked(size))
        while end - position >= 4:
            (size,) = _SIZE.unpack_from(view, position)
            position = self._take(frames, view, position + 4, self._checked(size))
        if position < end:
            self._head += view[position:end]
        return frames

    def _checked(self, size: int) -> int:
        if size < MIN_REQUEST_SIZE:
            self._poisoned = True
            raise InvalidFrame(f"frame size {size} is below the minimum {MIN_REQUEST_SIZE}")
        if size > self._max_size:
            self._poisoned = True
            raise FrameTooLarge(f"frame size {size} exceeds socket.request.max.bytes {self._max_size}")
        return size

    def _take(self, frames: list[bytes], view: memoryview, position: int, size: int) -> int:
        """The frame of `size` bytes starting at `position` (after its size prefix): whole, or
        its first part kept until the rest arrives. Returns the position after what was taken."""
        end = len(view)
        if end - position >= size:
            frames.append(view[position : position + size].tobytes())
            return position + size
        self._parts = [view[position:end]]
        self._missing = size - (end - position)
        return end


def frame(payload: bytes) -> bytes:
    """Prefix a payload with its size."""
    return _SIZE.pack(len(payload)) + payload
