"""Real clients (confluent-kafka, aiokafka) against secured listeners of the real server process."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.server import ServerProcess, wait_until

pytestmark = pytest.mark.interop


def test_confluent_kafka_produces_and_consumes_over_an_ssl_listener(tmp_path, certs) -> None:
    server = ServerProcess(tmp_path / "data", scheme="SSL",
                           overrides={"ssl.keystore.location": str(certs.server.combined)})
    server.start()
    try:
        tls = {"bootstrap.servers": server.bootstrap, "security.protocol": "SSL",
               "ssl.ca.location": str(certs.ca.cert)}
        topic = f"t-{uuid.uuid4().hex[:8]}"
        admin = AdminClient(tls)
        admin.create_topics([NewTopic(topic, num_partitions=1)])[topic].result(15)
        producer = Producer(tls)
        producer.produce(topic, b"over tls")
        assert producer.flush(15) == 0
        consumer = Consumer({**tls, "group.id": "tls-group", "auto.offset.reset": "earliest"})
        try:
            consumer.subscribe([topic])
            message = wait_until(lambda: (m := consumer.poll(0.5)) is not None and not m.error() and m, 30,
                                 message="a message over TLS")
            assert message.value() == b"over tls"
        finally:
            consumer.close()
    finally:
        server.stop()
