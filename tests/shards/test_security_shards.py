"""SCRAM and ACLs with several shards (issue 14): the security state is shard 0's, every shard
decides with it. Two shard processes over SASL_PLAINTEXT + SCRAM-SHA-512 and the StandardAuthorizer;
`admin` (super user) is added on the command line before start, everything else through the wire,
with raw kio requests sent to the node named by the test (node 0 = shard 0, node 1 = shard 1)."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from coordinator.shards.placement import ShardLayout
from coordinator.shards.reshard import ensure_layout
from protocol.build import build
from protocol.errors import ErrorCode
from protocol.schemas import request_schema
from tests.security.support import sasl_login, upsertion
from tests.shards.cluster import PARTITIONS, ShardCluster, group_on
from tests.support.polling import eventually
from tests.support.wire import WireClient

pytestmark = pytest.mark.asyncio

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
GROUP, LITERAL, PREFIXED, READ, ALLOW, ANY = 3, 3, 4, 3, 3, 1
MECHANISM = "SCRAM-SHA-512"


def req(api_key: int, version: int, **fields):
    return build(request_schema(api_key, version), fields)


def read_group(prefix: str, principal: str = "User:alice") -> dict[str, object]:
    return {"resource_type": GROUP, "resource_name": prefix, "resource_pattern_type": PREFIXED,
            "principal": principal, "host": "*", "operation": READ, "permission_type": ALLOW}


def groups_of(prefix: str) -> list[str]:
    """A group on shard 0 and one on shard 1, both named `prefix-N`."""
    return [group_on(0, prefix=prefix), group_on(1, prefix=prefix)]


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ShardCluster]:
    # A root whose security.sock path is too long for a Unix socket address (107 bytes): reached
    # through the directory's handle (`security_channel._addressable`).
    root = tmp_path / ("a-long-directory-name-" * 4) / "data"
    assert len(str(root / "security.sock")) > 107
    ensure_layout(root, ShardLayout(PARTITIONS, 2))
    added = subprocess.run([sys.executable, "-m", "coordinator", "scram", "add", "--data-dir", str(root),
                            f"{MECHANISM}=[name=admin,password=admin-pw]"], capture_output=True, text=True, timeout=60)
    assert added.returncode == 0, added.stderr
    shards = ShardCluster(root, 2, overrides={
        "authorizer.class.name": AUTHORIZER, "super.users": "User:admin", "sasl.enabled.mechanisms": MECHANISM,
        "log.flush.policy": "none", "history.enable": "false"})
    shards.listen = f"SASL_PLAINTEXT://127.0.0.1:{shards.port}"
    try:
        yield shards.start()
    finally:
        shards.stop()


class Nodes:
    def __init__(self, cluster: ShardCluster) -> None:
        self.cluster = cluster
        self.clients: list[WireClient] = []

    async def login(self, node: int, user: str, password: str) -> tuple[WireClient, int]:
        """A connection to `node` and its SaslAuthenticate error code."""
        client = await WireClient.connect(self.cluster.port + node, client_id=f"{user}-{node}")
        self.clients.append(client)
        return client, (await sasl_login(client, MECHANISM, user, password)).error_code

    async def admin(self, node: int) -> WireClient:
        client, code = await self.login(node, "admin", "admin-pw")
        assert code == ErrorCode.NONE
        return client

    async def alice_joins(self, node: int, group: str) -> int:
        """JoinGroup of alice for `group` at `node` (its coordinator): the error code, with
        MEMBER_ID_REQUIRED meaning the join was let in."""
        client, code = await self.login(node, "alice", "alice-pw")
        assert code == ErrorCode.NONE
        response = await client.request(req(11, 9, group_id=group, session_timeout=10000, rebalance_timeout=10000,
                                             member_id="", group_instance_id=None, protocol_type="consumer",
                                             protocols=[{"name": "range", "metadata": b""}]))
        await client.close()
        self.clients.remove(client)
        return int(response.error_code)

    async def close(self) -> None:
        for client in self.clients:
            await client.close()


async def create_alice_and_acls(nodes: Nodes, via: int, prefix: str) -> None:
    admin = await nodes.admin(via)
    users = await admin.request(req(51, 0, deletions=[], upsertions=[upsertion("alice", "alice-pw")]))
    assert [(r.user, r.error_code) for r in users.results] == [("alice", ErrorCode.NONE)]
    created = await admin.request(req(30, 3, creations=[read_group(prefix)]))
    assert [r.error_code for r in created.results] == [ErrorCode.NONE]


async def test_users_and_acls_written_through_node_1_decide_on_both_shards(cluster) -> None:
    nodes = Nodes(cluster)
    try:
        allowed, denied = groups_of("ok"), groups_of("no")
        await create_alice_and_acls(nodes, 1, "ok-")
        # In force on the node that answered the moment it answered, and on shard 0 (the writer).
        for node in (1, 0):
            assert (await nodes.login(node, "alice", "alice-pw"))[1] == ErrorCode.NONE
            assert (await nodes.login(node, "alice", "wrong"))[1] == ErrorCode.SASL_AUTHENTICATION_FAILED
        for shard in (1, 0):
            assert await nodes.alice_joins(shard, allowed[shard]) == ErrorCode.MEMBER_ID_REQUIRED
            assert await nodes.alice_joins(shard, denied[shard]) == ErrorCode.GROUP_AUTHORIZATION_FAILED
        # Reads on node 1 come from its copy of shard 0's state.
        admin1 = await nodes.admin(1)
        described = await admin1.request(req(29, 3, resource_type_filter=ANY, resource_name_filter=None,
                                              pattern_type_filter=ANY, principal_filter=None, host_filter=None,
                                              operation=ANY, permission_type=ANY))
        assert [(r.resource_name, r.pattern_type) for r in described.resources] == [("ok-", PREFIXED)]
        users = await admin1.request(req(50, 0, users=None))
        assert sorted(u.user for u in users.results) == ["admin", "alice"]
        # The writes went through node 1 to shard 0, which logged them with the principal.
        assert "security_write_forwarded" in cluster.log(0)

        # Deleted through node 0: node 1 stops letting alice in within its tail interval.
        admin0 = await nodes.admin(0)
        deleted = await admin0.request(req(31, 3, filters=[
            {"resource_type_filter": GROUP, "resource_name_filter": "ok-", "pattern_type_filter": PREFIXED,
             "principal_filter": None, "host_filter": None, "operation": ANY, "permission_type": ANY}]))
        assert [len(r.matching_acls) for r in deleted.filter_results] == [1]
        assert await nodes.alice_joins(0, allowed[0]) == ErrorCode.GROUP_AUTHORIZATION_FAILED

        async def denied_on_node_1() -> bool:
            return await nodes.alice_joins(1, allowed[1]) == ErrorCode.GROUP_AUTHORIZATION_FAILED

        await eventually(denied_on_node_1, 5.0, "the deleted ACL to reach shard 1")
    finally:
        await nodes.close()


async def test_a_killed_shard_rebuilds_its_copy_and_shard_0_down_is_a_retriable_timeout(cluster) -> None:
    nodes = Nodes(cluster)
    try:
        allowed, denied = groups_of("ok"), groups_of("no")
        await create_alice_and_acls(nodes, 1, "ok-")
        await nodes.close()
        nodes.clients.clear()

        cluster.kill(1)
        cluster.start_shard(1)  # its copy is rebuilt from shard 0's log
        assert (await nodes.login(1, "alice", "alice-pw"))[1] == ErrorCode.NONE
        assert await nodes.alice_joins(1, allowed[1]) == ErrorCode.MEMBER_ID_REQUIRED
        assert await nodes.alice_joins(1, denied[1]) == ErrorCode.GROUP_AUTHORIZATION_FAILED

        admin1 = await nodes.admin(1)
        cluster.kill(0)
        # Shard 0 down: a write through node 1 is a retriable REQUEST_TIMED_OUT, in bounded time;
        # node 1 still authenticates and decides with its copy.
        started = time.monotonic()
        refused = await admin1.request(req(30, 3, creations=[read_group("no-")]), timeout=30)
        assert [r.error_code for r in refused.results] == [ErrorCode.REQUEST_TIMED_OUT]
        assert time.monotonic() - started < 15
        assert (await nodes.login(1, "alice", "alice-pw"))[1] == ErrorCode.NONE
        assert await nodes.alice_joins(1, allowed[1]) == ErrorCode.MEMBER_ID_REQUIRED

        cluster.start_shard(0)
        created = await admin1.request(req(30, 3, creations=[read_group("no-")]), timeout=30)
        assert [r.error_code for r in created.results] == [ErrorCode.NONE]
        assert await nodes.alice_joins(1, denied[1]) == ErrorCode.MEMBER_ID_REQUIRED
        assert await nodes.alice_joins(0, denied[0]) == ErrorCode.MEMBER_ID_REQUIRED
    finally:
        await nodes.close()
