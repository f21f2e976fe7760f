"""The frame decoder under arbitrary chunkings and garbage."""

from __future__ import annotations

import itertools
import struct

import pytest
from hypothesis import given
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
