"""The subscription-topics parser (v0 prefix of any ConsumerProtocolSubscription version)."""

from __future__ import annotations

import contextlib
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coordinator.core.consumer_protocol import encode_subscription, parse_subscription_topics

topic_names = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=30)


@given(st.lists(topic_names, max_size=10), st.integers(0, 3), st.none() | st.binary(max_size=20))
def test_topics_of_every_version(topics: list[str], version: int, user_data: bytes | None) -> None:
    data = encode_subscription(topics, version, user_data)
    assert parse_subscription_topics(data) == frozenset(topics)


def test_future_versions_are_read_by_their_prefix() -> None:
    data = encode_subscription(["a", "b"], version=3) + b"future fields"
    data = struct.pack(">h", 7) + data[2:]
    assert parse_subscription_topics(data) == {"a", "b"}


@pytest.mark.parametrize(
    "data",
    [b"", b"\x00", struct.pack(">hi", -1, 0), struct.pack(">hi", 0, -1), struct.pack(">hih", 0, 1, 5) + b"ab"],
)
def test_malformed_raises_value_error(data: bytes) -> None:
    with pytest.raises(ValueError):
        parse_subscription_topics(data)


@given(st.binary(max_size=64))
def test_random_bytes_never_raise_anything_else(data: bytes) -> None:
    with contextlib.suppress(ValueError):
        parse_subscription_topics(data)
