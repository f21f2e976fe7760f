"""Real clients (confluent-kafka, aiokafka) against secured listeners of the real server process."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka import TopicPartition as AioTopicPartition
from aiokafka.errors import (
    GroupAuthorizationFailedError,
    KafkaConnectionError,
    SaslAuthenticationFailed,
)
from aiokafka.helpers import create_ssl_context
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from coordinator.security.jaas import PLAIN_MODULE
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


def _scram_add(data_dir, *specs: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "coordinator", "scram", "add", "--data-dir", str(data_dir), *specs],
                          capture_output=True, text=True, timeout=60)


@pytest.fixture
def sasl_ssl_server(tmp_path, certs) -> Iterator[ServerProcess]:
    """SASL_SSL with SCRAM-SHA-512 only; the first user, alice, made on the command line before start."""
    data_dir = tmp_path / "data"
    added = _scram_add(data_dir, "SCRAM-SHA-512=[name=alice,password=alice-secret]")
    assert added.returncode == 0, added.stderr
    assert "added SCRAM-SHA-512 credential for user alice" in added.stdout
    server = ServerProcess(data_dir, scheme="SASL_SSL", overrides={
        "ssl.keystore.location": str(certs.server.combined), "sasl.enabled.mechanisms": "SCRAM-SHA-512"})
    server.start()
    try:
        yield server
    finally:
        server.stop()


def _sasl(server: ServerProcess, certs, user: str, password: str) -> dict[str, str]:
    return {"bootstrap.servers": server.bootstrap, "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(certs.ca.cert), "sasl.mechanisms": "SCRAM-SHA-512",
            "sasl.username": user, "sasl.password": password}


def _produce(config: dict[str, str], topic: str, count: int) -> None:
    admin = AdminClient(config)
    admin.create_topics([NewTopic(topic, num_partitions=2)])[topic].result(15)
    producer = Producer(config)
    for i in range(count):
        producer.produce(topic, f"m{i}".encode(), partition=i % 2)
    assert producer.flush(15) == 0


def test_confluent_kafka_over_sasl_ssl_scram_512_forms_a_group_and_commits(sasl_ssl_server, certs) -> None:
    config = _sasl(sasl_ssl_server, certs, "alice", "alice-secret")
    topic = f"t-{uuid.uuid4().hex[:8]}"
    _produce(config, topic, 10)
    consumers = [Consumer({**config, "group.id": "secure-group", "auto.offset.reset": "earliest",
                           "enable.auto.commit": False}) for _ in range(2)]
    try:
        for consumer in consumers:
            consumer.subscribe([topic])
        seen: list[bytes] = []

        def all_read() -> bool:
            for consumer in consumers:
                message = consumer.poll(0.2)
                if message is not None and not message.error():
                    seen.append(message.value())
                    consumer.commit(message, asynchronous=False)
            return len(seen) >= 10 and all(c.assignment() for c in consumers)

        wait_until(all_read, 60, message="both members assigned and every message read")
        assert sorted(seen) == sorted(f"m{i}".encode() for i in range(10))
        committed = consumers[0].committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=10)
        assert sorted(tp.offset for tp in committed) == [5, 5]
    finally:
        for consumer in consumers:
            consumer.close()


def test_kafka_admin_clients_create_users_over_sasl_ssl(sasl_ssl_server, certs) -> None:
    """AlterUserScramCredentials/DescribeUserScramCredentials through confluent-kafka's AdminClient."""
    admin = AdminClient(_sasl(sasl_ssl_server, certs, "alice", "alice-secret"))
    upsert = UserScramCredentialUpsertion("bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192),
                                          b"bob-secret")
    admin.alter_user_scram_credentials([upsert])["bob"].result(15)
    described = admin.describe_user_scram_credentials(["bob"])["bob"].result(15)
    assert [(i.mechanism, i.iterations) for i in described.scram_credential_infos] == [
        (ScramMechanism.SCRAM_SHA_512, 8192)]
    bob = AdminClient(_sasl(sasl_ssl_server, certs, "bob", "bob-secret"))
    assert bob.list_topics(timeout=15).cluster_id


def test_confluent_kafka_with_a_wrong_password_gets_its_usual_authentication_error(sasl_ssl_server, certs) -> None:
    errors: list[KafkaError] = []
    producer = Producer({**_sasl(sasl_ssl_server, certs, "alice", "wrong"), "error_cb": errors.append})
    wait_until(lambda: producer.poll(0.2) is not None and any(
        e.code() == KafkaError._AUTHENTICATION for e in errors), 30, message="an authentication error")
    (error,) = {e.str() for e in errors if e.code() == KafkaError._AUTHENTICATION}
    assert "SASL authentication error: Authentication failed during authentication due to invalid credentials " \
           "with SASL mechanism SCRAM-SHA-512" in error
    assert "authentication_failed" in sasl_ssl_server.log()


def test_wrong_passwords_from_librdkafka_each_wait_the_delay_and_are_logged_as_a_count(tmp_path) -> None:
    """Each wrong password is answered only after connection.failed.authentication.delay.ms (a
    client retrying in a loop gets one try per delay), and the server logs the address once, then
    a count, not a line per try."""
    delay, attempts = 0.3, 4
    server = ServerProcess(tmp_path / "data", scheme="SASL_PLAINTEXT", overrides={
        "sasl.enabled.mechanisms": "PLAIN", "connection.failed.authentication.delay.ms": str(int(delay * 1000)),
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": f'{PLAIN_MODULE} required user_carol="carol-secret";'})
    server.start()
    try:
        started = time.monotonic()
        for _ in range(attempts):
            errors: list[KafkaError] = []
            producer = Producer({"bootstrap.servers": server.bootstrap, "security.protocol": "SASL_PLAINTEXT",
                                 "sasl.mechanisms": "PLAIN", "sasl.username": "carol", "sasl.password": "wrong",
                                 "error_cb": errors.append})
            wait_until(lambda producer=producer, errors=errors: producer.poll(0.01) is not None and any(
                e.code() == KafkaError._AUTHENTICATION for e in errors), 30, message="an authentication error")
            del producer
        elapsed = time.monotonic() - started
        assert elapsed >= attempts * delay  # each answer was held for the delay
        assert len([line for line in server.log().splitlines() if '"authentication_failed"' in line]) == 1
    finally:
        server.stop()
    lines = [json.loads(line) for line in server.log().splitlines() if '"authentication_failed"' in line]
    assert [line["host"] for line in lines] == ["127.0.0.1", "127.0.0.1"]  # at once, then the count at stop
    assert lines[0]["count"] == 1 and sum(line["count"] for line in lines) >= attempts
    assert lines[0]["detail"] == "Authentication failed: Invalid username or password"


@pytest.mark.asyncio
async def test_aiokafka_over_sasl_ssl_scram_512_forms_a_group_and_commits(sasl_ssl_server, certs) -> None:
    config = _sasl(sasl_ssl_server, certs, "alice", "alice-secret")
    topic = f"t-{uuid.uuid4().hex[:8]}"
    _produce(config, topic, 6)
    consumer = AIOKafkaConsumer(
        topic, bootstrap_servers=sasl_ssl_server.bootstrap, group_id="aio-secure", auto_offset_reset="earliest",
        enable_auto_commit=False, security_protocol="SASL_SSL", ssl_context=create_ssl_context(cafile=str(certs.ca.cert)),
        sasl_mechanism="SCRAM-SHA-512", sasl_plain_username="alice", sasl_plain_password="alice-secret")
    await consumer.start()
    try:
        values: list[bytes] = []
        while len(values) < 6:
            batches = await asyncio.wait_for(consumer.getmany(timeout_ms=500), 30)
            values += [m.value for messages in batches.values() for m in messages]
        await consumer.commit()
        assert sorted(values) == sorted(f"m{i}".encode() for i in range(6))
        assert [await consumer.committed(AioTopicPartition(topic, p)) for p in (0, 1)] == [3, 3]
    finally:
        await consumer.stop()


@pytest.mark.asyncio
async def test_aiokafka_with_a_wrong_password_fails_authentication(sasl_ssl_server, certs, caplog) -> None:
    """aiokafka's usual way: the bootstrap fails, and its log names the broker's SASL error."""
    caplog.set_level("ERROR", logger="aiokafka")
    consumer = AIOKafkaConsumer(
        bootstrap_servers=sasl_ssl_server.bootstrap, security_protocol="SASL_SSL",
        ssl_context=create_ssl_context(cafile=str(certs.ca.cert)), sasl_mechanism="SCRAM-SHA-512",
        sasl_plain_username="alice", sasl_plain_password="wrong", request_timeout_ms=10000)
    with pytest.raises(KafkaConnectionError, match="Unable to bootstrap"):
        await consumer.start()
    await consumer.stop()
    assert f"[Error 58] {SaslAuthenticationFailed.__name__}: Authentication failed during authentication due to " \
           "invalid credentials with SASL mechanism SCRAM-SHA-512" in caplog.text


@pytest.fixture
def authorized_server(tmp_path, certs) -> Iterator[ServerProcess]:
    """SASL_SSL, SCRAM-SHA-512, ACLs on; admin (super user) and alice made before start."""
    data_dir = tmp_path / "data"
    added = _scram_add(data_dir, "SCRAM-SHA-512=[name=admin,password=admin-secret]",
                       "SCRAM-SHA-512=[name=alice,password=alice-secret]")
    assert added.returncode == 0, added.stderr
    server = ServerProcess(data_dir, scheme="SASL_SSL", overrides={
        "ssl.keystore.location": str(certs.server.combined), "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin"})
    server.start()
    try:
        admin = AdminClient(_sasl(server, certs, "admin", "admin-secret"))
        admin.create_topics([NewTopic("orders", num_partitions=1)])["orders"].result(15)
        producer = Producer(_sasl(server, certs, "admin", "admin-secret"))
        producer.produce("orders", b"o1")
        assert producer.flush(15) == 0
        # Kafka's admin API for ACLs: alice may read the topic and the groups named allowed-*.
        bindings = [
            AclBinding(ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL, "User:alice", "*",
                       AclOperation.READ, AclPermissionType.ALLOW),
            AclBinding(ResourceType.GROUP, "allowed-", ResourcePatternType.PREFIXED, "User:alice", "*",
                       AclOperation.READ, AclPermissionType.ALLOW),
        ]
        for future in admin.create_acls(bindings).values():
            future.result(15)
        found = admin.describe_acls(AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                                                     AclOperation.ANY, AclPermissionType.ANY)).result(15)
        assert sorted(b.name for b in found) == ["allowed-", "orders"]
        yield server
    finally:
        server.stop()


def test_confluent_kafka_without_read_on_a_group_gets_group_authorization_failed(authorized_server, certs) -> None:
    config = _sasl(authorized_server, certs, "alice", "alice-secret")
    allowed = Consumer({**config, "group.id": "allowed-app", "auto.offset.reset": "earliest"})
    denied = Consumer({**config, "group.id": "forbidden", "auto.offset.reset": "earliest"})
    try:
        allowed.subscribe(["orders"])
        message = wait_until(lambda: (m := allowed.poll(0.2)) is not None and not m.error() and m, 30,
                             message="alice reads in a group she may use")
        assert message.value() == b"o1"
        allowed.commit(message, asynchronous=False)
        denied.subscribe(["orders"])
        error = wait_until(lambda: (m := denied.poll(0.2)) is not None and m.error(), 30,
                           message="a group error for the forbidden group")
        assert error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    finally:
        allowed.close()
        denied.close()


@pytest.mark.asyncio
async def test_aiokafka_without_read_on_a_group_gets_group_authorization_failed(authorized_server, certs) -> None:
    consumer = AIOKafkaConsumer(
        "orders", bootstrap_servers=authorized_server.bootstrap, group_id="forbidden", security_protocol="SASL_SSL",
        ssl_context=create_ssl_context(cafile=str(certs.ca.cert)), sasl_mechanism="SCRAM-SHA-512",
        sasl_plain_username="alice", sasl_plain_password="alice-secret")
    try:
        with pytest.raises(GroupAuthorizationFailedError, match="forbidden"):
            await consumer.start()  # aiokafka looks the coordinator up first: FindCoordinator is refused
            await asyncio.wait_for(consumer.getone(), 30)
    finally:
        await consumer.stop()
