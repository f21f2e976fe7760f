"""Share requests forwarded between the shards over a secured listener, as the coordinator's own user
(``inter.broker.listener.name``, ``coordinator/security/peers.py``): sidecars of two shards in front of
Apache Kafka 4.0 with an authorizer.

- Only SASL_PLAINTEXT listeners, the shards forwarding as the SCRAM user ``coordinator`` (its
  password in the listener's ScramLoginModule line): while the holder knows that user with another
  password, and then while the user lacks CLUSTER_ACTION, a ShareFetch reaching the non-holder is
  answered NOT_LEADER_OR_FOLLOWER; once CLUSTER_ACTION is granted, it is served.
- A PLAINTEXT listener for the clients and a SASL_SSL one the shards forward on (PLAIN, the
  coordinator a super user, the peer's certificate trusted by the listener's own key store): an
  anonymous client reaching the non-holder is served, and ShareForward from ``User:ANONYMOUS`` on
  the PLAINTEXT listener is refused CLUSTER_AUTHORIZATION_FAILED.
- A forwarding listener that is not a listener, or a SASL one without the coordinator's
  credentials, stops start-up with one line and exit code 2."""

from __future__ import annotations

import ssl
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from coordinator.share.apis import SHARE_GROUP_DESCRIBE
from protocol.client import encode_request
from protocol.errors import ErrorCode
from tests.runtime.test_startup import assert_one_line_exit_2, run_serve
from tests.security.conftest import Certificates, connect
from tests.security.conftest import certs as certs  # the fixture: the session's test certificates
from tests.security.support import add_user, sasl_login
from tests.security.test_authorization import CLUSTER, GROUP, READ, TOPIC, binding, req
from tests.shards.cluster import ShardCluster, group_on
from tests.share.test_forward import BROKER, PARTITIONS, forward, make_topic
from tests.sidecar.conftest import free_base_port
from tests.sidecar.test_share_groups import acquired, join, share_fetch
from tests.support.clients import produce
from tests.support.kafka import KafkaBroker
from tests.support.polling import eventually
from tests.support.server import free_port, free_port_block
from tests.support.wire import WireClient

pytestmark = pytest.mark.interop

CLUSTER_ACTION = 9  # Kafka's AclOperation code
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
RECORDS = 10


def sidecar(kafka: KafkaBroker, base: int, **overrides: str) -> dict[str, str]:
    return {"upstream.bootstrap.servers": kafka.bootstrap, "sidecar.listener.base.port": str(base),
            "share.auto.offset.reset": "earliest", "log.flush.policy": "none",
            "authorizer.class.name": STANDARD_AUTHORIZER, **overrides}


@pytest.fixture(scope="module")
def sasl_shards(kafka_broker: KafkaBroker, tmp_path_factory: pytest.TempPathFactory
                ) -> Iterator[tuple[ShardCluster, int]]:
    """Two shards whose one listener is SASL_PLAINTEXT (PLAIN for admin, a super user; SCRAM for the
    coordinator's own user); their broker listeners' base port."""
    port, base = free_port_block(2), free_base_port()
    cluster = ShardCluster(tmp_path_factory.mktemp("share-forward-sasl") / "data", 2, port=port,
                           listen=f"SASL_PLAINTEXT://127.0.0.1:{port}", overrides=sidecar(
                               kafka_broker, base, **{
                                   "sasl.enabled.mechanisms": "SCRAM-SHA-512,PLAIN", "super.users": "User:admin",
                                   "listener.name.sasl_plaintext.plain.sasl.jaas.config":
                                       f'{PLAIN_MODULE} required user_admin="admin-pw";',
                                   "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config":
                                       f'{SCRAM_MODULE} required username="coordinator" password="coordinator-pw";',
                                   "inter.broker.listener.name": "SASL_PLAINTEXT",
                                   "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512"}))
    try:
        cluster.start()
        yield cluster, base
    finally:
        cluster.stop()


async def login(port: int, mechanism: str, user: str, password: str,
                context: ssl.SSLContext | None = None) -> WireClient | None:
    client = await connect(port, context, client_id=f"{user}-client")
    if (await sasl_login(client, mechanism, user, password)).error_code == 0:
        return client
    await client.close()
    return None


async def admin_on(port: int) -> WireClient:
    client = await login(port, "PLAIN", "admin", "admin-pw")
    assert client is not None
    return client


async def on_shard_0(port: int, group: str, open_: Any) -> WireClient:
    """A connection to the broker's listener (either shard's, by the kernel's choice) that reached
    shard 0, where ShareGroupDescribe of shard 1's group is NOT_COORDINATOR: its share requests are
    forwarded."""
    for _ in range(50):
        client = await open_(port)
        described = await client.request(req(SHARE_GROUP_DESCRIBE, 1, group_ids=[group],
                                             include_authorized_operations=False))
        if described.groups[0].error_code == ErrorCode.NOT_COORDINATOR:
            return client  # type: ignore[no-any-return]
        await client.close()
    raise AssertionError("50 connections in a row reached shard 1")


def codes(answer: Any) -> set[int]:
    assert answer.error_code == 0, answer
    return {int(p.error_code) for t in answer.responses for p in t.partitions}


@pytest.mark.asyncio
async def test_the_shards_forward_as_the_coordinators_user_which_must_authenticate_and_hold_cluster_action(
        sasl_shards: tuple[ShardCluster, int], kafka_broker: KafkaBroker) -> None:
    cluster, base = sasl_shards
    topic = make_topic(kafka_broker)
    produce(kafka_broker.bootstrap, topic, RECORDS, PARTITIONS)
    group = group_on(1, prefix=f"sec-{uuid.uuid4().hex[:4]}")  # held by shard 1
    admin, holder = await admin_on(cluster.port), await admin_on(cluster.port + 1)
    client = await on_shard_0(base + BROKER, group, admin_on)
    try:
        _, tps = await join(holder, group, topic)
        fetch = share_fetch(group, 0, tps.topic_id, list(range(PARTITIONS)))

        # The holder knows `coordinator` with another password than the one the shards log in with.
        await add_user(admin, "coordinator", "not-the-configured-password")
        wrong = await eventually(lambda: login(cluster.port + 1, "SCRAM-SHA-512", "coordinator",
                                               "not-the-configured-password"), timeout=10, message="shard 1's copy")
        await wrong.close()
        assert codes(await client.request(fetch)) == {ErrorCode.NOT_LEADER_OR_FOLLOWER}
        await eventually(lambda: "SASL authentication as coordinator (SCRAM-SHA-512) failed" in cluster.log(0),
                         timeout=10, message="shard 0's share_forward_failed line")

        # The configured password, but no CLUSTER_ACTION: the holder refuses the forwarded request.
        await add_user(admin, "coordinator", "coordinator-pw")
        peer = await eventually(lambda: login(cluster.port + 1, "SCRAM-SHA-512", "coordinator", "coordinator-pw"),
                                timeout=10, message="shard 1's copy of the new password")
        try:
            inner = encode_request(78, 3, "peer", fetch)
            refused = await peer.request(forward(BROKER, inner))
            assert (refused.error_code, refused.response) == (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, b"")
        finally:
            await peer.close()
        assert codes(await client.request(fetch)) == {ErrorCode.NOT_LEADER_OR_FOLLOWER}

        # CLUSTER_ACTION granted, as Kafka's brokers are super users: served, every record acquired.
        created = await admin.request(req(30, 3, creations=[
            binding(CLUSTER, "kafka-cluster", CLUSTER_ACTION, principal="User:coordinator")]))
        assert [r.error_code for r in created.results] == [0]

        async def served() -> Any:
            answer = await client.request(fetch)
            return answer if codes(answer) == {ErrorCode.NONE} else None

        answer = await eventually(served, timeout=15, interval=0.2, message="the forwarded fetch served")
        assert sum(last - first + 1 for ranges in acquired(answer).values() for first, last in ranges) == RECORDS
    finally:
        for c in (admin, holder, client):
            await c.close()


@pytest.fixture(scope="module")
def tls_shards(kafka_broker: KafkaBroker, certs: Certificates, tmp_path_factory: pytest.TempPathFactory
               ) -> Iterator[tuple[ShardCluster, int, int]]:
    """Two shards: a PLAINTEXT listener first (so the broker listeners are PLAINTEXT, for anonymous
    clients) and a SASL_SSL one the shards forward on, with no trust store of its own. Also the
    SASL_SSL port (shard 0's) and the broker listeners' base."""
    plain, secured, base = free_port_block(2), free_port_block(2), free_base_port()
    cluster = ShardCluster(tmp_path_factory.mktemp("share-forward-tls") / "data", 2, port=plain,
                           listen=f"PLAINTEXT://127.0.0.1:{plain},SASL_SSL://127.0.0.1:{secured}", overrides=sidecar(
                               kafka_broker, base, **{
                                   "listener.name.sasl_ssl.ssl.keystore.location": str(certs.server.combined),
                                   "sasl.enabled.mechanisms": "PLAIN", "super.users": "User:coordinator",
                                   "listener.name.sasl_ssl.plain.sasl.jaas.config":
                                       f'{PLAIN_MODULE} required username="coordinator" password="coordinator-pw" '
                                       'user_coordinator="coordinator-pw";',
                                   "inter.broker.listener.name": "sasl_ssl"}))
    try:
        cluster.start()
        yield cluster, secured, base
    finally:
        cluster.stop()


@pytest.mark.asyncio
async def test_over_sasl_ssl_an_anonymous_client_is_served_but_cannot_forward_itself(
        tls_shards: tuple[ShardCluster, int, int], kafka_broker: KafkaBroker, certs: Certificates) -> None:
    cluster, secured, base = tls_shards
    topic = make_topic(kafka_broker)
    produce(kafka_broker.bootstrap, topic, RECORDS, PARTITIONS)
    group = group_on(1, prefix=f"tls-{uuid.uuid4().hex[:4]}")

    async def as_coordinator(port: int) -> WireClient:
        client = await login(port, "PLAIN", "coordinator", "coordinator-pw", certs.client_context())
        assert client is not None
        return client

    admin, holder = await as_coordinator(secured), await as_coordinator(secured + 1)
    anonymous = None
    try:
        created = await admin.request(req(30, 3, creations=[
            binding(GROUP, group, READ, principal="User:ANONYMOUS"),
            binding(TOPIC, topic, READ, principal="User:ANONYMOUS")]))
        assert [r.error_code for r in created.results] == [0, 0]
        _, tps = await join(holder, group, topic)
        fetch = share_fetch(group, 0, tps.topic_id, list(range(PARTITIONS)))

        # ShareForward from User:ANONYMOUS on shard 1's PLAINTEXT listener: not a peer any more.
        direct = await WireClient.connect(cluster.port + 1)
        try:
            refused = await direct.request(forward(BROKER, encode_request(78, 3, "anonymous", fetch)))
            assert (refused.error_code, refused.response) == (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, b"")
        finally:
            await direct.close()

        anonymous = await on_shard_0(base + BROKER, group, WireClient.connect)

        async def served() -> Any:
            answer = await anonymous.request(fetch)  # type: ignore[union-attr]
            return answer if codes(answer) == {ErrorCode.NONE} else None  # ACLs not yet on shard 0's copy

        answer = await eventually(served, timeout=15, interval=0.2, message="the forwarded fetch served")
        assert sum(last - first + 1 for ranges in acquired(answer).values() for first, last in ranges) == RECORDS
    finally:
        for c in (admin, holder, anonymous):
            if c is not None:
                await c.close()


@pytest.mark.parametrize(("listeners", "overrides", "expected"), [
    ("SASL_PLAINTEXT://127.0.0.1:{p}", ("inter.broker.listener.name=INTERNAL",),
     ("inter.broker.listener.name", "INTERNAL is not a listener")),
    ("SASL_PLAINTEXT://127.0.0.1:{p}", ("inter.broker.listener.name=SASL_PLAINTEXT",),
     ("listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config", "username and password")),
    ("SASL_PLAINTEXT://127.0.0.1:{p}", ("inter.broker.listener.name=SASL_PLAINTEXT",
                                        "sasl.mechanism.inter.broker.protocol=PLAIN"),
     ("sasl.mechanism.inter.broker.protocol", "PLAIN is not enabled")),
])
def test_a_forwarding_listener_that_cannot_work_stops_start_up(tmp_path, listeners, overrides, expected) -> None:
    args = ["--listen", listeners.format(p=free_port()), "--metrics-listen", "", "--data-dir", str(tmp_path / "data"),
            "--override", "upstream.bootstrap.servers=127.0.0.1:1", "--override", "coordinator.shards=2",
            "--shard", "0"]
    for item in overrides:
        args += ["--override", item]
    assert_one_line_exit_2(run_serve(*args), *expected)
