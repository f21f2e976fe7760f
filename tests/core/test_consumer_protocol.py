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


# ---- whole messages (the online migration reads and writes them) ---------------------------------


def _kio_subscription(version: int, topics: list[str], owned: dict[str, list[int]], rack: str | None) -> bytes:
    """The same subscription written by kio's generated ConsumerProtocolSubscription (Kafka's schema)."""
    import importlib

    from kio.serial import entity_writer

    module = importlib.import_module(f"kio.schema.consumer_protocol_subscription.v{version}.data")
    fields: dict[str, object] = {"topics": tuple(topics), "user_data": b"ud"}
    if version >= 1:
        fields["owned_partitions"] = tuple(
            module.TopicPartition(topic=t, partitions=tuple(ps)) for t, ps in owned.items()
        )
    if version >= 2:
        fields["generation_id"] = 7
    if version >= 3:
        fields["rack_id"] = rack
    import io

    buffer = io.BytesIO()
    buffer.write(struct.pack(">h", version))
    entity_writer(module.ConsumerProtocolSubscription)(buffer, module.ConsumerProtocolSubscription(**fields))
    return buffer.getvalue()


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_read_subscription_reads_kafkas_layout(version: int) -> None:
    from coordinator.core.consumer_protocol import read_subscription

    data = _kio_subscription(version, ["a", "b"], {"a": [1, 0]}, "rack-1")
    sub = read_subscription(data)
    assert (sub.version, sub.topics, sub.user_data) == (version, ("a", "b"), b"ud")
    assert dict(sub.owned_partitions) == ({"a": frozenset({0, 1})} if version >= 1 else {})
    assert sub.generation_id == (7 if version >= 2 else -1)
    assert sub.rack_id == ("rack-1" if version >= 3 else None)
    assert read_subscription(encode_subscription(["a", "b"], version, b"ud", {"a": [0, 1]}, 7, "rack-1")) == sub
    if version == 3:
        # A newer version is read as the newest known, its extra fields ignored (Kafka's checkSubscriptionVersion).
        assert read_subscription(struct.pack(">h", 9) + data[2:] + b"\x00").rack_id == "rack-1"


def test_write_assignment_is_read_back_by_kafkas_schema() -> None:
    import importlib

    from kio.serial import entity_reader

    from coordinator.core.consumer_protocol import read_assignment, write_assignment

    for version in (0, 1, 3, 5):
        data = write_assignment({"b": [2], "a": [1, 0]}, version)
        module = importlib.import_module(f"kio.schema.consumer_protocol_assignment.v{min(version, 3)}.data")
        decoded, _ = entity_reader(module.ConsumerProtocolAssignment)(data, 2)
        assert struct.unpack(">h", data[:2])[0] == min(version, 3)
        assert {t.topic: sorted(t.partitions) for t in decoded.assigned_partitions} == {"a": [0, 1], "b": [2]}
        assert decoded.user_data is None
        assert read_assignment(data).partitions == {"a": frozenset({0, 1}), "b": frozenset({2})}


@pytest.mark.parametrize("data", [b"", b"\x00", b"\x00\x00\x00\x00\x00\x01\x00", b"\xff\xff\x00\x00\x00\x00"])
def test_malformed_whole_messages_raise_value_error(data: bytes) -> None:
    from coordinator.core.consumer_protocol import read_assignment, read_subscription

    with pytest.raises(ValueError):
        read_subscription(data)
    with pytest.raises(ValueError):
        read_assignment(data)
