"""A forwarded share request is authorized where the client connected (``coordinator/share/forward.py``):
a sidecar of two shards in front of Apache Kafka 4.0 with an authorizer, whose first listener (and so
every broker's listener) is SASL and whose second, PLAINTEXT, is where the shards forward. alice may
READ the group and one topic, not the other: on every connection to the broker's listener, whichever
shard the kernel hands it to (the holder, or the one forwarding), the topic she may not read is
TOPIC_AUTHORIZATION_FAILED and the other served; bob, without READ on the group, is refused whole.
A client sending ShareForward itself (no CLUSTER_ACTION) is refused CLUSTER_AUTHORIZATION_FAILED."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from protocol.build import build
from protocol.client import encode_request
from protocol.private import SHARE_FORWARD
from protocol.schemas import request_schema
from tests.security.conftest import connect
from tests.security.support import add_user, sasl_login
from tests.security.test_authorization import GROUP, READ, TOPIC, binding, req
from tests.shards.cluster import ShardCluster, group_on
from tests.share.test_forward import BROKER, PARTITIONS, make_topic
from tests.sidecar.conftest import free_base_port
from tests.sidecar.test_share_groups import MEMBER, heartbeat
from tests.support.kafka import KafkaBroker
from tests.support.polling import eventually
from tests.support.server import free_port_block
from tests.support.wire import WireClient

pytestmark = pytest.mark.interop

GROUP_DENIED, TOPIC_DENIED, CLUSTER_DENIED, UNKNOWN_TOPIC_ID = 30, 29, 31, 100


@pytest.fixture(scope="module")
def secured_shards(kafka_broker: KafkaBroker, tmp_path_factory: pytest.TempPathFactory
                   ) -> Iterator[tuple[ShardCluster, int, int]]:
    """The sidecar, its broker listeners' base port and its PLAINTEXT listener's port (shard 0's)."""
    sasl, plain, base = free_port_block(2), free_port_block(2), free_base_port()
    cluster = ShardCluster(tmp_path_factory.mktemp("share-forward-acl") / "data", 2, port=sasl,
                           listen=f"SASL_PLAINTEXT://127.0.0.1:{sasl},PLAINTEXT://127.0.0.1:{plain}", overrides={
                               "upstream.bootstrap.servers": kafka_broker.bootstrap,
                               "sidecar.listener.base.port": str(base), "share.auto.offset.reset": "earliest",
                               "log.flush.policy": "none",
                               "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                               "sasl.enabled.mechanisms": "SCRAM-SHA-512", "super.users": "User:ANONYMOUS"})
    try:
        cluster.start()
        yield cluster, base, plain
    finally:
        cluster.stop()


def share_fetch(group: str, topics: list[Any]) -> Any:
    return req(78, 2, group_id=group, member_id=MEMBER, share_session_epoch=0, max_wait=0, min_bytes=1,
               max_bytes=1 << 20, max_records=500, batch_size=500, forgotten_topics_data=[],
               topics=[{"topic_id": t, "partitions": [{"partition_index": p, "acknowledgement_batches": []}
                                                      for p in range(PARTITIONS)]} for t in topics])


async def login(port: int, user: str) -> WireClient | None:
    client = await connect(port, client_id=f"{user}-client")
    if (await sasl_login(client, "SCRAM-SHA-512", user, f"{user}-pw")).error_code == 0:
        return client
    await client.close()
    return None  # the user not yet mirrored to the shard this connection reached


async def topic_id(admin: WireClient, topic: str) -> uuid.UUID:
    answer = await admin.request(req(3, 12, topics=[{"topic_id": None, "name": topic}],
                                     allow_auto_topic_creation=False, include_topic_authorized_operations=False))
    return answer.topics[0].topic_id  # type: ignore[no-any-return]


@pytest.mark.asyncio
async def test_a_forwarded_share_fetch_is_authorized_where_the_client_connected(
        secured_shards: tuple[ShardCluster, int, int], kafka_broker: KafkaBroker) -> None:
    _, base, plain = secured_shards
    readable, secret = make_topic(kafka_broker), make_topic(kafka_broker)
    group = group_on(1, prefix=f"acl-{uuid.uuid4().hex[:4]}")  # held by shard 1
    admin = await connect(plain)  # ANONYMOUS: the super user
    holder = await connect(plain + 1)
    try:
        for user in ("alice", "bob"):
            await add_user(admin, user, f"{user}-pw")
        created = await admin.request(req(30, 3, creations=[binding(GROUP, group, READ), binding(TOPIC, readable, READ)]))
        assert [r.error_code for r in created.results] == [0, 0]

        async def shard_1_has_the_acls() -> bool:
            """Shard 1 checks with its copy of shard 0's ACLs, which follows shard 0's log: a
            connection the kernel hands to shard 1 sees the new ACLs only once the copy has them."""
            described = await holder.request(req(29, 3, resource_type_filter=1, resource_name_filter=None,
                                                 pattern_type_filter=1, principal_filter=None, host_filter=None,
                                                 operation=1, permission_type=1))
            names = {r.resource_name for r in described.resources}
            return {group, readable} <= names

        await eventually(shard_1_has_the_acls, timeout=10, message="shard 1's copy of the new ACLs")
        joined = await holder.request(heartbeat(group, 0, [readable, secret]))  # the member, made by the super user
        assert joined.error_code == 0, joined
        ids = [await topic_id(admin, readable), await topic_id(admin, secret)]

        async def alice_fetches() -> dict[uuid.UUID, set[int]] | None:
            """Each topic's partition codes for a ShareFetch of alice's on a new connection; None
            while the shard it reached does not know the new topics yet (UNKNOWN_TOPIC_ID)."""
            alice = await login(base + BROKER, "alice")
            if alice is None:
                return None
            try:
                answer = await alice.request(share_fetch(group, ids))
            finally:
                await alice.close()
            assert answer.error_code == 0, answer
            codes = {t.topic_id: {int(p.error_code) for p in t.partitions} for t in answer.responses}
            return None if UNKNOWN_TOPIC_ID in set().union(*codes.values()) else codes

        for _ in range(6):  # the kernel hands each connection to either shard
            codes = await eventually(alice_fetches, timeout=15, interval=0.1, message="alice's answer")
            assert codes == {ids[0]: {0}, ids[1]: {TOPIC_DENIED}}

        for _ in range(4):
            bob = await eventually(lambda: login(base + BROKER, "bob"), timeout=10, message="bob's login")
            try:
                refused = await bob.request(share_fetch(group, ids))
            finally:
                await bob.close()
            assert refused.error_code == GROUP_DENIED and not refused.responses, refused
    finally:
        await admin.close()
        await holder.close()


@pytest.mark.asyncio
async def test_share_forward_from_a_client_without_cluster_action_is_refused(
        secured_shards: tuple[ShardCluster, int, int]) -> None:
    """Only a peer (CLUSTER_ACTION on the cluster) may hand a holder a share request: alice, sending
    ShareForward herself, would otherwise pass the ACLs checked where a client connects."""
    cluster, _, plain = secured_shards
    admin = await connect(plain)
    try:
        await add_user(admin, "carol", "carol-pw")
    finally:
        await admin.close()
    carol = await eventually(lambda: login(cluster.port + 1, "carol"), timeout=10, message="carol's login on shard 1")
    try:
        inner = encode_request(78, 3, "carol", share_fetch(group_on(1), [uuid.uuid4()]))
        answer = await carol.request(build(request_schema(SHARE_FORWARD, 0), {"node_id": BROKER, "request": inner}))
        assert (answer.error_code, answer.response) == (CLUSTER_DENIED, b"")
    finally:
        await carol.close()
