"""Decoding the embedded consumer protocol that DescribeGroups returns for classic consumer groups."""

from __future__ import annotations

import importlib
import io
import struct

import pytest
from kio.serial import entity_writer

from coordinator.admin.assignment import decode_assignment, decode_subscription
from coordinator.core.consumer_protocol import encode_subscription


def encoded_assignment(version: int, partitions: dict[str, list[int]], tail: bytes = b"") -> bytes:
    module = importlib.import_module(f"kio.schema.consumer_protocol_assignment.v{min(version, 3)}.data")
    value = module.ConsumerProtocolAssignment(
        assigned_partitions=tuple(module.TopicPartition(topic=t, partitions=tuple(ps)) for t, ps in partitions.items()),
        user_data=None,
    )
    buffer = io.BytesIO()
    buffer.write(struct.pack(">h", version))
    entity_writer(type(value))(buffer, value)
    return buffer.getvalue() + tail


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_every_known_version_decodes_to_sorted_topic_partitions(version: int) -> None:
    data = encoded_assignment(version, {"b": [2, 0], "a": [1]})
    assert decode_assignment(data) == {"a": [1], "b": [0, 2]}


def test_a_newer_version_is_read_as_its_known_prefix() -> None:
    assert decode_assignment(encoded_assignment(7, {"t": [3]}, tail=b"\x00\x01future")) == {"t": [3]}


def test_an_empty_assignment_means_none_yet() -> None:
    assert decode_assignment(b"") == {}


@pytest.mark.parametrize("data", [b"\x00", b"\xff\xff\x00\x00", b"\x00\x00\x00\x00\x00\x05\x00\x03ab"])
def test_bytes_that_are_not_an_assignment_raise_value_error(data: bytes) -> None:
    with pytest.raises(ValueError):
        decode_assignment(data)


def test_subscription_topics_and_generation() -> None:
    assert decode_subscription(encode_subscription(["x", "y"], version=0)).topics == ("x", "y")
    # encode_subscription writes generation -1 for v2+: unknown.
    assert decode_subscription(encode_subscription(["x"], version=3)).generation_id is None
    with pytest.raises(ValueError):
        decode_subscription(b"\x00")
