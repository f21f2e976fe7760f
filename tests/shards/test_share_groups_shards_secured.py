"""Share groups placed on embedded shard 1 over a node whose only listener is SASL_PLAINTEXT, under
the StandardAuthorizer: the shards reach one another as Kafka's brokers do (``inter.broker.listener.name``
with the listener's own JAAS credentials, ``coordinator/security/peers.py``).

- Named: shard 0 forwards the group's ShareFetch to shard 1 and shard 1 reads shard 0's data plane,
  both as the coordinator's user (a super user, as Kafka's brokers are): a real ShareConsumer gets
  every record once.
- Not named (no PLAINTEXT listener either): the shards cannot reach one another, so shard 1 still
  refuses its share groups in Kafka's words (``coordinator/share/unserved.py``): the consumer stops
  with UNSUPPORTED_VERSION, and both shards said at start-up why (``share_forwarding_unavailable``).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaException, Producer, ShareConsumer

from protocol.errors import ErrorCode
from tests.interop.share_support import all_records, consume_until
from tests.shards.cluster import ShardCluster, group_on
from tests.support.server import free_port_block, wait_until

pytestmark = pytest.mark.interop

PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
TOPIC = "secured"
PARTITIONS = 2
COUNT = 200


@pytest.fixture
def secured(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[ShardCluster]:
    """Two embedded shards on one SASL_PLAINTEXT listener (PLAIN: admin, and coordinator, the
    processes' own user, both super users); ``inter.broker.listener.name`` named when the test's
    parameter says so."""
    named: bool = request.param
    port = free_port_block(2)
    overrides = {"topics": f"{TOPIC}:{PARTITIONS}", "share.auto.offset.reset": "earliest",
                 "group.share.heartbeat.interval.ms": "500", "sasl.enabled.mechanisms": "PLAIN",
                 "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                 "super.users": "User:admin;User:coordinator",
                 "listener.name.sasl_plaintext.plain.sasl.jaas.config":
                     f'{PLAIN_MODULE} required username="coordinator" password="coordinator-pw" '
                     f'user_admin="admin-pw" user_coordinator="coordinator-pw";'}
    if named:
        overrides["inter.broker.listener.name"] = "SASL_PLAINTEXT"
    cluster = ShardCluster(tmp_path / "data", 2, port=port, listen=f"SASL_PLAINTEXT://127.0.0.1:{port}",
                           overrides=overrides)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


def as_admin(cluster: ShardCluster, shard: int = 0) -> dict[str, str]:
    return {"bootstrap.servers": cluster.bootstrap(shard), "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": "PLAIN", "sasl.username": "admin", "sasl.password": "admin-pw"}


@pytest.mark.parametrize("secured", [True], indirect=True)
def test_a_group_on_shard_1_is_served_through_the_named_sasl_listener(secured: ShardCluster) -> None:
    producer = Producer({**as_admin(secured), "enable.idempotence": False})
    for i in range(COUNT):  # as ShareSetup.produce: record i to partition i % PARTITIONS
        producer.produce(TOPIC, value=f"value-{i}".encode(), partition=i % PARTITIONS)
    assert producer.flush(30) == 0
    consumer = ShareConsumer({**as_admin(secured), "group.id": group_on(1, prefix="sasl")})
    consumer.subscribe([TOPIC])
    seen: list[tuple[int, int]] = []
    try:
        consume_until(consumer, lambda: len(seen) >= COUNT, seen, timeout=20)
    finally:
        consumer.close()
    assert sorted(seen) == sorted(all_records(COUNT))  # each once


@pytest.mark.parametrize("secured", [False], indirect=True)
def test_without_a_listener_to_reach_shard_0_a_group_on_shard_1_is_refused_in_kafkas_words(
        secured: ShardCluster) -> None:
    group = group_on(1, prefix="refused")
    consumer = ShareConsumer({**as_admin(secured), "group.id": group})
    consumer.subscribe([TOPIC])
    errors: list[KafkaException] = []
    deadline = time.monotonic() + 15
    try:
        while not errors and time.monotonic() < deadline:
            try:
                assert not [m for m in consumer.poll(0.5) if m.error() is None], "records for an unserved group"
            except KafkaException as exc:
                errors.append(exc)
    finally:
        consumer.close()
    assert errors, "the consumer was left waiting"
    assert errors[0].args[0].code() == ErrorCode.UNSUPPORTED_VERSION
    assert all("share_forwarding_unavailable" in secured.log(k) for k in (0, 1))
    wait_until(lambda: f'"group": "{group}"' in secured.log(1) and "share_group_not_served" in secured.log(1),
               message="shard 1 logging why")
