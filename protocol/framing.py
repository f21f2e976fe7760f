"""Kafka's 4-byte size-prefixed framing.

A frame is `int32 size` (big-endian, bytes that follow) then `size` bytes. `FrameDecoder` cuts
frames out of what a connection receives; a size that is negative, too small to hold a request
header, or above the configured maximum raises a `ProtocolError` subclass and the decoder stays
poisoned, because nothing after a bad size can be trusted. A size is only a claim: no buffer is
sized by it, every buffer grows with the bytes that arrived (four bytes claiming 100 MB cost four
bytes, not 100 MB).
"""

from __future__ import annotations

import struct
from collections.abc import Callable

from .errors import FrameTooLarge, InvalidFrame

_SIZE = struct.Struct(">i")

# api_key (2) + api_version (2) + correlation_id (4): the least a request can hold.
MIN_REQUEST_SIZE = 8

FIRST_BUFFER = 1024
"""The receive buffer starts this small (a connection of a group member carries heartbeats of a
few hundred bytes, and there may be tens of thousands of them) and doubles, up to
`LARGEST_BUFFER`, while reads fill it."""
LARGEST_BUFFER = 256 * 1024
MIN_READ = 512  # less room than this at the end of the receive buffer: make room first
OFFER_AGAIN_UNDER = 64 * 1024
"""A frame declined while arriving is offered again with more bytes until this much of it is in
(it waits in the receive buffer meanwhile); then it is received whole into its own buffer."""

Offer = Callable[[memoryview, int], bool]


class FrameDecoder:
    """Incremental frame splitter for one connection, reading into its own buffer.

    Theory of operation. The connection reads straight into the decoder's receive buffer
    (`get_buffer`, then `updated` with the count: asyncio.BufferedProtocol's pair), so no read
    allocates. Each frame found there is first offered to `offer(head, size)`, with `head` all of
    the frame (size prefix removed) or, for a frame still arriving, the part received so far (at
    least its 8-byte header); the frames after one declined are not offered in the same call
    (they must not overtake it: the caller queues what `updated` returns). An offer taken (True) means the taker uses the bytes where they lie:
    the rest of that frame goes to `more(part)` as it arrives, and none of those bytes is
    overwritten while `holding()` says the taker may still be using them (the buffer is then
    replaced, not reused). A frame not taken is copied out whole and returned by `updated`: one
    inside the buffer is copied once from it; one larger than the buffer is gathered into a buffer
    of its own that grows with each read (reads then stop at its end, so each copies into it only
    its own bytes) and is returned as it is. No buffer is ever allocated for bytes that have not
    arrived: a peer that claims a large frame and sends nothing costs nothing. A frame declined
    while arriving is offered again with more bytes while it fits the receive buffer or less than
    `OFFER_AGAIN_UNDER` of it is in, so a taker may wait for a longer head.

    `feed(data)` hands bytes over instead (copied into the buffer), for callers without a socket.
    """

    __slots__ = ("_buffer", "_end", "_frame", "_frame_size", "_grow", "_holding", "_lent", "_max_size", "_min_size",
                 "_more", "_offer", "_offered", "_poisoned", "_start", "_streaming", "_view")

    def __init__(self, max_size: int, offer: Offer | None = None, more: Callable[[memoryview], None] | None = None,
                 holding: Callable[[], bool] | None = None) -> None:
        self._max_size = max_size
        self._min_size = MIN_REQUEST_SIZE
        self._offer = offer
        self._more = more
        self._holding = holding
        self._buffer = bytearray(FIRST_BUFFER)
        self._view = memoryview(self._buffer)
        self._start = 0  # the unconsumed bytes of `_buffer` (part of a frame) are [_start, _end)
        self._end = 0
        self._offered = 0  # the room the last `get_buffer` offered
        self._grow = False  # a read filled all of it: the next buffer is larger
        self._lent = False  # bytes of `_buffer` were taken where they lie since it was last reused
        self._frame: bytearray | None = None  # a frame larger than `_buffer`, gathered into its own
        self._frame_size = 0  # the size it claims: `_frame` grows to it only as its bytes arrive
        self._streaming = 0  # bytes still to come of the frame taken while arriving
        self._poisoned = False

    @property
    def buffered(self) -> int:
        """Bytes received and held for a frame not complete yet."""
        return len(self._frame) if self._frame is not None else self._end - self._start

    @property
    def missing(self) -> int:
        """Bytes still to come of the frame being received into a buffer here (0: none, or its
        size prefix is not in yet)."""
        if self._frame is not None:
            return self._frame_size - len(self._frame)
        have = self._end - self._start
        if self._streaming or have < 4:
            return 0
        return int(_SIZE.unpack_from(self._view, self._start)[0]) + 4 - have

    @property
    def max_size(self) -> int:
        return self._max_size

    @max_size.setter
    def max_size(self, value: int) -> None:
        """A new limit for the frames still to come (a SASL connection's grows once authenticated)."""
        self._max_size = value

    @property
    def min_size(self) -> int:
        return self._min_size

    @min_size.setter
    def min_size(self, value: int) -> None:
        """A new floor for the frames still to come: a request is at least its 8-byte header, but
        after a SaslHandshake v0 a frame is a bare SASL token, which may be shorter (PLAIN for
        user "a", password "b" is 4 bytes), and Kafka reads those without a floor."""
        self._min_size = value

    def shrink(self) -> None:
        """Give back a receive buffer grown large (its owner stops reading for a while): what it
        holds moves to one just large enough, and the next reads start small again."""
        keep = self._end - self._start
        size = max(FIRST_BUFFER, keep + MIN_READ)
        if size < len(self._buffer):
            buffer = bytearray(size)
            buffer[:keep] = self._view[self._start:self._end]
            self._buffer, self._view = buffer, memoryview(buffer)
            self._start, self._end = 0, keep
            self._lent = self._grow = False

    def get_buffer(self) -> memoryview:
        """Where the next read goes: the receive buffer's free end (for a frame being gathered, at
        most the bytes it still lacks)."""
        if len(self._buffer) - self._end < MIN_READ or (self._grow and len(self._buffer) < LARGEST_BUFFER):
            self._make_room()
        room = self._offered = len(self._buffer) - self._end
        if self._frame is not None:
            room = self._offered = min(room, self._frame_size - len(self._frame))
        return self._view[self._end:self._end + room]

    def updated(self, nbytes: int) -> list[bytes | bytearray]:
        """`nbytes` were read into the last `get_buffer`: the frames they complete and that were
        not taken, in order."""
        if self._poisoned:
            raise InvalidFrame("decoder already failed on this connection")
        self._grow = nbytes == self._offered
        if self._frame is not None:
            self._frame += self._view[self._end:self._end + nbytes]
            if len(self._frame) < self._frame_size:
                return []
            frame, self._frame = self._frame, None
            return [frame]
        self._end += nbytes
        try:
            return self._split()
        except (InvalidFrame, FrameTooLarge):
            self._poisoned = True
            raise

    def feed(self, data: bytes) -> list[bytes | bytearray]:
        """Add received bytes; return every frame completed by them and not taken."""
        frames: list[bytes | bytearray] = []
        view = memoryview(data)
        while view:
            room = self.get_buffer()
            count = min(len(room), len(view))
            room[:count] = view[:count]
            frames += self.updated(count)
            view = view[count:]
        return frames

    def _split(self) -> list[bytes | bytearray]:
        view, position, end = self._view, self._start, self._end
        if self._streaming:
            part = min(self._streaming, end - position)
            if self._more is not None:
                self._more(view[position:position + part])
                self._lent = True
            self._streaming -= part
            position += part
        frames: list[bytes | bytearray] = []
        offer, least, most = self._offer, self._min_size, self._max_size
        while end - position >= 4:
            (size,) = _SIZE.unpack_from(view, position)
            if size < least or size > most:
                self._refuse(size)
            start = position + 4
            have = end - start
            if have >= size:
                position = start + size
                if offer is not None and offer(view[start:position], size):
                    self._lent = True
                else:
                    frames.append(view[start:position].tobytes())
                    offer = None  # the frames after it must not overtake it
                continue
            if offer is not None and have >= MIN_REQUEST_SIZE and offer(view[start:end], size):
                self._lent = True
                self._streaming = size - have
                position = end
            elif 4 + size > len(self._buffer) and (offer is None or have >= OFFER_AGAIN_UNDER):
                self._frame = bytearray(view[start:end])  # grows as the rest arrives
                self._frame_size = size
                position = end
            break
        if position == end and not self._lent:
            position = end = 0
        self._start, self._end = position, end
        return frames

    def _refuse(self, size: int) -> None:
        if size < self._min_size:
            raise InvalidFrame(f"frame size {size} is below the minimum {self._min_size}")
        raise FrameTooLarge(f"frame size {size} exceeds socket.request.max.bytes {self._max_size}")

    def _make_room(self) -> None:
        """Room at the end of the receive buffer: the unconsumed bytes move to its start, or to a
        new (larger, while reads fill it) buffer when a taker may still be using this one."""
        keep = self._end - self._start
        size = len(self._buffer)
        if self._grow or keep + MIN_READ > size:
            size = max(min(2 * size, LARGEST_BUFFER), keep + MIN_READ)
        if size != len(self._buffer) or (self._lent and (self._holding is None or self._holding())):
            buffer = bytearray(size)
            buffer[:keep] = self._view[self._start:self._end]
            self._buffer, self._view = buffer, memoryview(buffer)
        elif keep:
            self._buffer[:keep] = self._buffer[self._start:self._end]
        self._start, self._end = 0, keep
        self._lent = False
        self._grow = False


def frame(payload: bytes) -> bytes:
    """Prefix a payload with its size."""
    return _SIZE.pack(len(payload)) + payload
