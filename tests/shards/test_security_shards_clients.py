"""Real clients with SCRAM and ACLs on a sharded `coordinator serve` (the supervisor and two shards):
confluent-kafka's AdminClient makes a user and its ACLs (librdkafka sends them to the controller,
shard 0); once shard 1's copy has them, the user's consumers, bootstrapped from node 1, read in the
group the ACLs allow (on shard 1) and are refused the other. (Writes arriving at shard 1 itself are
`test_security_shards.py`'s.)"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from coordinator.shards.placement import ShardLayout
from coordinator.shards.reshard import ensure_layout
from protocol.build import build
from protocol.schemas import request_schema
from tests.security.support import sasl_login
from tests.shards.supervised import Supervised, create_topics, group_on_shard
from tests.support.server import wait_until
from tests.support.wire import WireClient

pytestmark = pytest.mark.interop

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Supervised]:
    root = tmp_path / "data"
    ensure_layout(root, ShardLayout(50, 2))
    create_topics(root, {"orders": 1})
    added = subprocess.run([sys.executable, "-m", "coordinator", "scram", "add", "--data-dir", str(root),
                            "SCRAM-SHA-512=[name=admin,password=admin-pw]"], capture_output=True, text=True, timeout=60)
    assert added.returncode == 0, added.stderr
    supervised = Supervised(root, 2, overrides={
        "authorizer.class.name": AUTHORIZER, "super.users": "User:admin", "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "group.initial.rebalance.delay.ms": "0", "history.enable": "false"})
    supervised.scheme = "SASL_PLAINTEXT"
    supervised.start()
    try:
        yield supervised
    finally:
        supervised.stop()


async def wait_for_acls(port: int, count: int) -> None:
    """Poll DescribeAcls at `port` as admin until it lists `count` ACLs (the user came before them)."""
    client = await WireClient.connect(port)
    try:
        assert (await sasl_login(client, "SCRAM-SHA-512", "admin", "admin-pw")).error_code == 0
        deadline = time.monotonic() + 10
        while True:
            described = await client.request(build(request_schema(29, 3), {
                "resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
                "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1}))
            if sum(len(r.acls) for r in described.resources) >= count:
                return
            assert time.monotonic() < deadline, "shard 1's copy never listed the ACLs"
            await asyncio.sleep(0.05)
    finally:
        await client.close()


def config(server: Supervised, node: int, user: str, password: str) -> dict[str, str]:
    return {"bootstrap.servers": f"127.0.0.1:{server.shard_port(node)}", "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": user, "sasl.password": password}


def test_a_user_and_acls_made_through_node_1_decide_for_its_consumers(server) -> None:
    admin = AdminClient(config(server, 1, "admin", "admin-pw"))
    upsert = UserScramCredentialUpsertion("alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
                                          b"alice-pw")
    admin.alter_user_scram_credentials([upsert])["alice"].result(15)
    prefix = f"ok{uuid.uuid4().hex[:6]}"
    acls = [AclBinding(ResourceType.GROUP, prefix, ResourcePatternType.PREFIXED, "User:alice", "*",
                       AclOperation.READ, AclPermissionType.ALLOW),
            AclBinding(ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL, "User:alice", "*",
                       AclOperation.READ, AclPermissionType.ALLOW)]
    for future in admin.create_acls(acls).values():
        future.result(15)
    asyncio.run(wait_for_acls(server.shard_port(1), 2))  # shard 1's copy (within its tail interval)
    producer = Producer(config(server, 0, "admin", "admin-pw"))
    producer.produce("orders", b"for alice")
    assert producer.flush(15) == 0

    allowed = group_on_shard(1, 2, prefix)
    denied = group_on_shard(1, 2, "no")
    alice = config(server, 1, "alice", "alice-pw")
    reader = Consumer({**alice, "group.id": allowed, "auto.offset.reset": "earliest"})
    refused = Consumer({**alice, "group.id": denied, "auto.offset.reset": "earliest"})
    try:
        reader.subscribe(["orders"])
        message = wait_until(lambda: (m := reader.poll(0.5)) is not None and not m.error() and m, 30,
                             message="alice's consumer reads in the allowed group")
        assert message.value() == b"for alice"
        refused.subscribe(["orders"])
        error = wait_until(lambda: (m := refused.poll(0.5)) is not None and m.error() and m.error(), 30,
                           message="alice's consumer refused in the other group")
        assert error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    finally:
        reader.close()
        refused.close()
