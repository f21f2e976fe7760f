"""`groups describe` never hides lag: a committed offset above the log end shows as negative lag
(Kafka's kafka-consumer-groups does the same), in the table and in JSON."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.support.clients import produce

pytestmark = pytest.mark.interop


def test_a_committed_offset_above_the_log_end_shows_negative_lag(server, cli) -> None:
    produce(server.bootstrap, "lagged", 5, 1)
    consumer = Consumer({"bootstrap.servers": server.bootstrap, "group.id": "ops-lag", "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition("lagged", 0, 286)], asynchronous=False)
    finally:
        consumer.close()
    [offsets] = cli("groups", "describe", "ops-lag", "--json").json()["offsets"]
    assert (offsets["committed_offset"], offsets["end_offset"], offsets["lag"]) == (286, 5, -281)
    table = cli("groups", "describe", "ops-lag")
    assert ["lagged", "0", "286", "5", "-281"] in [line.split()[:5] for line in table.out.splitlines()]
