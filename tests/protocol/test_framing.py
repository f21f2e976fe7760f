"""The frame decoder under arbitrary chunkings and garbage, with frames taken where they lie or copied out."""

from __future__ import annotations

import itertools
import random
import struct
import tracemalloc
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.errors import FrameTooLarge, InvalidFrame, ProtocolError
from protocol.framing import FrameDecoder, frame

payloads = st.lists(st.binary(min_size=8, max_size=300), min_size=0, max_size=20)


def chunk(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in itertools.pairwise(points)]


@given(payloads, st.lists(st.integers(min_value=0, max_value=10_000), max_size=40))
def test_any_chunking_yields_the_same_frames(frames: list[bytes], cuts: list[int]) -> None:
    stream = b"".join(frame(p) for p in frames)
    decoder = FrameDecoder(max_size=1000)
    out: list[bytes] = []
    for piece in chunk(stream, cuts):
        out.extend(decoder.feed(piece))
    assert out == frames
    assert decoder.buffered == 0


@given(st.lists(st.binary(min_size=8, max_size=6000), min_size=1, max_size=6),
       st.lists(st.integers(min_value=0, max_value=40_000), max_size=40))
def test_frames_larger_than_the_receive_buffer_come_out_whole_under_any_chunking(
        frames: list[bytes], cuts: list[int]) -> None:
    stream = b"".join(frame(p) for p in frames)
    decoder = FrameDecoder(max_size=10_000)
    out: list[bytes] = []
    for piece in chunk(stream, cuts):
        out.extend(bytes(f) for f in decoder.feed(piece))
    assert out == frames
    assert decoder.buffered == 0


def test_a_claimed_size_allocates_nothing_until_its_bytes_arrive() -> None:
    """Four bytes claiming 100 MB, then a trickle: the decoder holds what arrived, not what was claimed."""
    claim = 100 * 1024 * 1024
    decoder = FrameDecoder(max_size=claim)
    tracemalloc.start()
    try:
        assert decoder.feed(struct.pack(">i", claim) + b"h" * 8) == []
        for _ in range(100):
            assert decoder.feed(b"x" * 3000) == []
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert decoder.buffered == 8 + 300_000
    assert peak < 2 * 1024 * 1024  # about the 300 kB that arrived (and a receive buffer), never 100 MB


def test_a_shrunk_receive_buffer_keeps_what_it_held() -> None:
    decoder = FrameDecoder(max_size=1_000_000)
    payload = bytes(range(256)) * 2000  # 512 kB: the receive buffer grows while reads fill it
    stream = frame(payload)
    done: list[bytes] = []
    position = 0
    while len(decoder.get_buffer()) < 64 * 1024:
        room = decoder.get_buffer()
        room[:] = stream[position:position + len(room)]
        position += len(room)
        done += decoder.updated(len(room))
    done += decoder.feed(stream[position:len(frame(payload))])
    small = frame(b"s" * 300)
    done += decoder.feed(small[:150])  # half a frame waits in the (large) receive buffer
    assert decoder.buffered == 150 and len(decoder.get_buffer()) > 64 * 1024
    decoder.shrink()
    assert decoder.buffered == 150 and len(decoder.get_buffer()) <= 1024
    done += decoder.feed(small[150:])
    assert [bytes(f) for f in done] == [payload, b"s" * 300]


@given(st.binary(max_size=2000), st.lists(st.integers(min_value=0, max_value=3000), max_size=20))
def test_garbage_never_raises_anything_but_protocol_errors(garbage: bytes, cuts: list[int]) -> None:
    decoder = FrameDecoder(max_size=512)
    try:
        for piece in chunk(garbage, cuts):
            for got in decoder.feed(piece):
                assert 8 <= len(got) <= 512
    except ProtocolError:
        pass


def test_oversized_and_undersized_frames_are_refused() -> None:
    with pytest.raises(FrameTooLarge):
        FrameDecoder(max_size=100).feed(struct.pack(">i", 101))
    with pytest.raises(InvalidFrame):
        FrameDecoder(max_size=100).feed(struct.pack(">i", -1))
    decoder = FrameDecoder(max_size=100)
    with pytest.raises(InvalidFrame):
        decoder.feed(struct.pack(">i", 2) + b"ab")
    with pytest.raises(InvalidFrame):
        decoder.feed(frame(b"12345678"))  # a poisoned decoder stays poisoned


# -- frames taken where they lie (a sidecar forwarding a request as it arrives) ---------------------

sizes = st.lists(st.tuples(st.integers(min_value=8, max_value=300_000), st.integers(min_value=0, max_value=2**32)),
                 min_size=1, max_size=12)


def payload(size: int, seed: int) -> bytes:
    return random.Random(seed).randbytes(size)


def decode_taking(stream: bytes, cuts: list[int], decisions: list[bool], holding: bool) -> list[bytes]:
    """Feed `stream` in pieces; offers are taken or declined as `decisions` says (cycled). Returns
    the frames in order, the taken ones put together from the views handed over: kept as views
    when `holding` (the decoder must not have overwritten them) and copied at once otherwise."""
    out: list[list[Any]] = []
    calls = itertools.count()

    def offer(head: memoryview, size: int) -> bool:
        assert len(head) >= 8 and len(head) <= size
        if not decisions[next(calls) % len(decisions)]:
            return False
        out.append([head if holding else head.tobytes()])
        return True

    def more(part: memoryview) -> None:
        out[-1].append(part if holding else part.tobytes())

    decoder = FrameDecoder(max_size=1_000_000, offer=offer, more=more, holding=lambda: holding)
    for piece in chunk(stream, cuts):
        view = memoryview(piece)
        while view:  # as a socket read into get_buffer: what fits, then updated()
            room = decoder.get_buffer()
            count = min(len(room), len(view))
            room[:count] = view[:count]
            out.extend([got] for got in decoder.updated(count))
            view = view[count:]
    assert decoder.buffered == 0
    return [b"".join(bytes(part) for part in parts) for parts in out]


@given(sizes, st.lists(st.integers(min_value=0, max_value=4_000_000), max_size=40),
       st.lists(st.booleans(), min_size=1, max_size=8), st.booleans())
@settings(max_examples=60, deadline=None)
def test_taken_and_declined_frames_come_out_whole_and_in_order(
        spec: list[tuple[int, int]], cuts: list[int], decisions: list[bool], holding: bool) -> None:
    frames = [payload(size, seed) for size, seed in spec]
    stream = b"".join(frame(p) for p in frames)
    assert decode_taking(stream, cuts, decisions, holding) == frames


def test_a_frame_is_offered_again_with_more_bytes_until_taken() -> None:
    """A taker may wait for a longer head (the sidecar needs a Produce request's acks)."""
    body = payload(100_000, 1)
    seen: list[int] = []

    def offer(head: memoryview, size: int) -> bool:
        seen.append(len(head))
        return len(head) >= 20_000

    parts: list[bytes] = []
    decoder = FrameDecoder(max_size=1_000_000, offer=offer, more=lambda part: parts.append(part.tobytes()))
    data = frame(body)
    for at in range(0, len(data), 5_000):
        assert decoder.feed(data[at:at + 5_000]) == []
    assert seen[0] < 20_000 <= seen[-1] and seen == sorted(seen)
    assert b"".join(parts) == body[seen[-1]:]
