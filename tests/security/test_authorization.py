"""ACLs over the wire (issue 17, point 3): Create/Describe/DeleteAcls, and what each API checks,
with raw kio requests from SASL-authenticated principals. The PLAINTEXT listener's anonymous user
is the test's super user (it creates the SCRAM users and the ACLs)."""

from __future__ import annotations

import uuid

import pytest
import pytest_asyncio

from coordinator.node.server import CoordinatorServer
from coordinator.security.store import security_of
from protocol.build import build
from protocol.private import DESCRIBE_GROUP_GENERATIONS
from protocol.schemas import request_schema
from tests.runtime.test_consumer_group_wire import create_topic
from tests.security.conftest import connect, security_config
from tests.security.support import add_user, sasl_login
from tests.support.wire import WireClient

LISTENERS = "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0"
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
TOPIC, GROUP, CLUSTER = 2, 3, 4
LITERAL, PREFIXED = 3, 4
READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, ALL = 3, 4, 5, 6, 7, 8, 2
ALLOW, DENY = 3, 2
GROUP_DENIED, TOPIC_DENIED, CLUSTER_DENIED = 30, 29, 31
UNKNOWN_TOPIC_ID = 100


def req(api_key: int, version: int, **fields):
    return build(request_schema(api_key, version), fields)


def binding(rtype, name, op, principal="User:alice", pattern=LITERAL, permission=ALLOW, host="*"):
    return {"resource_type": rtype, "resource_name": name, "resource_pattern_type": pattern, "principal": principal,
            "host": host, "operation": op, "permission_type": permission}


class Secured:
    def __init__(self, server: CoordinatorServer, admin: WireClient) -> None:
        self.server = server
        self.admin = admin
        self.clients: list[WireClient] = []

    async def create(self, *bindings) -> list[int]:
        response = await self.admin.request(req(30, 3, creations=list(bindings)))
        return [r.error_code for r in response.results]

    async def login(self, user: str) -> WireClient:
        client = await connect(self.server.ports["SASL_PLAINTEXT"], client_id=f"{user}-client")
        self.clients.append(client)
        assert (await sasl_login(client, "SCRAM-SHA-512", user, f"{user}-pw")).error_code == 0
        return client


@pytest_asyncio.fixture
async def secured(start_server):
    server = await start_server(LISTENERS, **{"authorizer.class.name": AUTHORIZER, "sasl.enabled.mechanisms":
                                              "SCRAM-SHA-512", "super.users": "User:ANONYMOUS;User:root"})
    admin = await connect(server.ports["PLAINTEXT"])
    for user in ("alice", "bob"):
        await add_user(admin, user, f"{user}-pw")
    env = Secured(server, admin)
    yield env
    for client in [admin, *env.clients]:
        await client.close()


async def join(client: WireClient, group: str):
    fields = {"group_id": group, "session_timeout": 10000, "rebalance_timeout": 10000, "member_id": "",
              "group_instance_id": None, "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}]}
    response = await client.request(req(11, 9, **fields))
    if response.error_code == 79:
        response = await client.request(req(11, 9, **{**fields, "member_id": response.member_id}))
    return response


def commit(group: str, *topics: str, member: str = "", generation: int = -1):
    return req(8, 9, group_id=group, generation_id_or_member_epoch=generation, member_id=member,
               group_instance_id=None, topics=[{"name": t, "partitions": [
                   {"partition_index": 0, "committed_offset": 5, "committed_leader_epoch": -1,
                    "committed_metadata": ""}]} for t in topics])


@pytest.mark.asyncio
async def test_acls_are_created_described_and_deleted_with_kafkas_apis(secured) -> None:
    assert await secured.create(binding(GROUP, "app-", READ, pattern=PREFIXED), binding(TOPIC, "orders", READ),
                                binding(TOPIC, "orders", READ), binding(CLUSTER, "other", ALTER)) == [0, 0, 0, 42]
    described = await secured.admin.request(req(29, 3, resource_type_filter=1, resource_name_filter=None,
                                                pattern_type_filter=1, principal_filter=None, host_filter=None,
                                                operation=1, permission_type=1))
    assert described.error_code == 0
    assert sorted((r.resource_type, r.resource_name, r.pattern_type, len(r.acls)) for r in described.resources) == [
        (TOPIC, "orders", LITERAL, 1), (GROUP, "app-", PREFIXED, 1)]
    matching = await secured.admin.request(req(29, 3, resource_type_filter=GROUP, resource_name_filter="app-1",
                                               pattern_type_filter=2, principal_filter="User:alice", host_filter=None,
                                               operation=1, permission_type=1))
    assert [(r.resource_name, r.pattern_type) for r in matching.resources] == [("app-", PREFIXED)]
    deleted = await secured.admin.request(req(31, 3, filters=[
        {"resource_type_filter": TOPIC, "resource_name_filter": None, "pattern_type_filter": 1,
         "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1},
        {"resource_type_filter": 0, "resource_name_filter": None, "pattern_type_filter": 1,
         "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1}]))
    assert [(r.error_code, [a.resource_name for a in r.matching_acls]) for r in deleted.filter_results] == [
        (0, ["orders"]), (42, [])]
    assert len(security_of(secured.server.shard.core).acls) == 1


@pytest.mark.asyncio
async def test_acl_and_user_admin_needs_the_cluster(secured) -> None:
    alice = await secured.login("alice")
    created = await alice.request(req(30, 3, creations=[binding(GROUP, "g", READ)]))
    assert [(r.error_code, r.error_message) for r in created.results] == [(CLUSTER_DENIED, "Cluster authorization failed.")]
    described = await alice.request(req(29, 3, resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
                                        principal_filter=None, host_filter=None, operation=1, permission_type=1))
    assert described.error_code == CLUSTER_DENIED
    users = await alice.request(req(50, 0, users=None))
    assert users.error_code == CLUSTER_DENIED
    assert await secured.create(binding(CLUSTER, "kafka-cluster", ALTER)) == [0]
    created = await alice.request(req(30, 3, creations=[binding(GROUP, "g", READ, principal="User:bob")]))
    assert [r.error_code for r in created.results] == [0]
    assert (await alice.request(req(50, 0, users=None))).error_code == 0  # ALTER implies DESCRIBE


@pytest.mark.asyncio
async def test_a_principal_without_read_on_a_group_gets_group_authorization_failed(secured) -> None:
    assert await secured.create(binding(GROUP, "app-", READ, pattern=PREFIXED), binding(TOPIC, "orders", READ),
                                binding(TOPIC, "orders", DESCRIBE, principal="User:bob")) == [0, 0, 0]
    alice, bob = await secured.login("alice"), await secured.login("bob")
    joined = await join(alice, "app-1")
    assert joined.error_code == 0
    assert (await join(bob, "app-1")).error_code == GROUP_DENIED
    assert (await join(alice, "other")).error_code == GROUP_DENIED
    heartbeat = await bob.request(req(12, 4, group_id="app-1", generation_id=joined.generation_id,
                                      member_id=joined.member_id, group_instance_id=None))
    assert heartbeat.error_code == GROUP_DENIED
    found = await bob.request(req(10, 4, key_type=0, coordinator_keys=["app-1"]))
    assert found.coordinators[0].error_code == GROUP_DENIED
    found = await alice.request(req(10, 4, key_type=0, coordinator_keys=["app-1"]))
    assert found.coordinators[0].error_code == 0
    # Commits: the group first, then each topic (the allowed one is committed); the topics exist
    # (an unknown topic would be UNKNOWN_TOPIC_OR_PARTITION once authorized).
    for topic in ("orders", "payments"):
        await create_topic(secured.admin, topic, 1)
    committed = await alice.request(commit("app-simple", "orders", "payments", "ghost"))
    assert {t.name: t.partitions[0].error_code for t in committed.topics} == {
        "orders": 0, "payments": TOPIC_DENIED, "ghost": TOPIC_DENIED}
    committed = await alice.request(commit("app-simple", "orders", "payments"))
    assert {t.name: t.partitions[0].error_code for t in committed.topics} == {"orders": 0, "payments": TOPIC_DENIED}
    assert {t.name: t.partitions[0].error_code for t in (await bob.request(commit("app-simple", "orders"))).topics} == {
        "orders": GROUP_DENIED}
    fetched = await alice.request(req(9, 9, require_stable=False, groups=[
        {"group_id": "app-simple", "member_id": None, "member_epoch": -1, "topics": None},
        {"group_id": "secret", "member_id": None, "member_epoch": -1, "topics": None}]))
    assert [(g.group_id, g.error_code, [t.name for t in g.topics]) for g in fetched.groups] == [
        ("app-simple", 0, ["orders"]), ("secret", GROUP_DENIED, [])]


@pytest.mark.asyncio
async def test_offsets_by_topic_id_are_authorized_by_the_name_of_the_id(secured) -> None:
    # OffsetCommit and OffsetFetch v10 name topics by id: the ACLs name topics, so each id is
    # resolved first (an id nobody knows is UNKNOWN_TOPIC_ID, before any topic ACL is asked), and
    # a refusal names the topic by id as the version does.
    for topic in ("orders", "payments"):
        await create_topic(secured.admin, topic, 1)
    orders, payments = (secured.server.catalog.get(t).topic_id for t in ("orders", "payments"))
    unknown = uuid.UUID(int=12345)
    assert await secured.create(binding(GROUP, "app-", READ, pattern=PREFIXED), binding(TOPIC, "orders", READ),
                                binding(TOPIC, "orders", DESCRIBE)) == [0, 0, 0]
    alice = await secured.login("alice")
    by_id = [{"topic_id": t, "partitions": [{"partition_index": 0, "committed_offset": 5, "committed_metadata": ""}]}
             for t in (orders, payments, unknown)]
    await secured.admin.request(req(8, 10, group_id="app-ids", generation_id_or_member_epoch=-1, member_id="",
                                    group_instance_id=None, topics=by_id[:2]))  # the super user commits both
    committed = await alice.request(req(8, 10, group_id="app-ids", generation_id_or_member_epoch=-1, member_id="",
                                        group_instance_id=None, topics=by_id))
    assert {t.topic_id: t.partitions[0].error_code for t in committed.topics} == {
        orders: 0, payments: TOPIC_DENIED, unknown: UNKNOWN_TOPIC_ID}

    def fetch(topics):
        return req(9, 10, require_stable=False, groups=[
            {"group_id": "app-ids", "member_id": None, "member_epoch": -1, "topics": topics}])

    asked = await alice.request(fetch([{"topic_id": t, "partition_indexes": [0]} for t in (orders, payments, unknown)]))
    assert {t.topic_id: (t.partitions[0].committed_offset, t.partitions[0].error_code)
            for t in asked.groups[0].topics} == {orders: (5, 0), payments: (-1, TOPIC_DENIED),
                                                 unknown: (-1, UNKNOWN_TOPIC_ID)}
    everything = await alice.request(fetch(None))
    assert [t.topic_id for t in everything.groups[0].topics] == [orders]


@pytest.mark.asyncio
async def test_list_describe_and_delete_groups_show_only_what_the_principal_may_see(secured) -> None:
    root_client = secured.admin
    await create_topic(root_client, "orders", 1)
    for group in ("app-1", "hidden"):
        await root_client.request(commit(group, "orders"))
    assert await secured.create(binding(GROUP, "app-", DESCRIBE, pattern=PREFIXED)) == [0]
    alice = await secured.login("alice")
    listed = await alice.request(req(16, 5, states_filter=[], types_filter=[]))
    assert [g.group_id for g in listed.groups] == ["app-1"]
    assert sorted(g.group_id for g in (await root_client.request(req(16, 5, states_filter=[], types_filter=[]))).groups) \
        == ["app-1", "hidden"]
    described = await alice.request(req(15, 5, groups=["app-1", "hidden"], include_authorized_operations=True))
    assert [(g.group_id, g.error_code) for g in described.groups] == [("app-1", 0), ("hidden", GROUP_DENIED)]
    assert described.groups[0].authorized_operations == 1 << DESCRIBE
    deleted = await alice.request(req(42, 2, groups_names=["app-1", "hidden"]))
    assert [(r.group_id, r.error_code) for r in deleted.results] == [("app-1", GROUP_DENIED), ("hidden", GROUP_DENIED)]
    assert await secured.create(binding(GROUP, "app-1", DELETE)) == [0]
    deleted = await alice.request(req(42, 2, groups_names=["app-1", "hidden"]))
    assert sorted((r.group_id, r.error_code) for r in deleted.results) == [("app-1", 0), ("hidden", GROUP_DENIED)]


@pytest.mark.asyncio
async def test_metadata_shows_only_described_topics_and_creating_needs_create(secured) -> None:
    admin = secured.admin
    await admin.request(req(19, 7, topics=[{"name": n, "num_partitions": 1, "replication_factor": 1,
                                            "assignments": [], "configs": []} for n in ("orders", "secret")],
                            timeout=5000, validate_only=False))
    assert await secured.create(binding(TOPIC, "orders", DESCRIBE)) == [0]
    alice = await secured.login("alice")
    everything = await alice.request(req(3, 12, topics=None, allow_auto_topic_creation=False,
                                         include_topic_authorized_operations=False))
    assert [t.name for t in everything.topics] == ["orders"]
    named = await alice.request(req(3, 12, topics=[{"name": "secret", "topic_id": None}, {"name": "new", "topic_id": None}],
                                    allow_auto_topic_creation=True, include_topic_authorized_operations=False))
    assert [(t.name, t.error_code) for t in named.topics] == [("secret", TOPIC_DENIED), ("new", TOPIC_DENIED)]
    created = await alice.request(req(19, 7, topics=[{"name": "mine", "num_partitions": 1, "replication_factor": 1,
                                                      "assignments": [], "configs": []}],
                                      timeout=5000, validate_only=False))
    assert created.topics[0].error_code == TOPIC_DENIED
    assert await secured.create(binding(TOPIC, "mi", CREATE, pattern=PREFIXED),
                                binding(TOPIC, "mi", DESCRIBE, pattern=PREFIXED)) == [0, 0]
    created = await alice.request(req(19, 7, topics=[{"name": "mine", "num_partitions": 1, "replication_factor": 1,
                                                      "assignments": [], "configs": []}],
                                      timeout=5000, validate_only=False))
    assert created.topics[0].error_code == 0
    deleted = await alice.request(req(20, 6, topics=[{"name": "mine", "topic_id": None}], timeout=5000))
    assert deleted.responses[0].error_code == TOPIC_DENIED


@pytest.mark.asyncio
async def test_deny_beats_allow_and_super_users_beat_both(secured) -> None:
    assert await secured.create(binding(GROUP, "*", READ, principal="User:*"),
                                binding(GROUP, "locked", READ, permission=DENY),
                                binding(GROUP, "vault", ALL, principal="User:*", permission=DENY)) == [0, 0, 0]
    alice, bob = await secured.login("alice"), await secured.login("bob")
    assert (await join(alice, "open")).error_code == 0
    assert (await join(alice, "locked")).error_code == GROUP_DENIED
    assert (await join(bob, "locked")).error_code == 0
    assert (await join(bob, "vault")).error_code == GROUP_DENIED
    assert (await join(secured.admin, "vault")).error_code == 0  # a super user is never denied


@pytest.mark.asyncio
async def test_allow_everyone_if_no_acl_found_opens_only_resources_nobody_named(start_server) -> None:
    server = await start_server(LISTENERS, **{"authorizer.class.name": AUTHORIZER, "super.users": "User:ANONYMOUS",
                                              "allow.everyone.if.no.acl.found": "true",
                                              "sasl.enabled.mechanisms": "SCRAM-SHA-512"})
    admin = await connect(server.ports["PLAINTEXT"])
    try:
        await add_user(admin, "alice", "alice-pw")
        created = await admin.request(req(30, 3, creations=[binding(GROUP, "bobs", READ, principal="User:bob")]))
        assert [r.error_code for r in created.results] == [0]
        alice = await connect(server.ports["SASL_PLAINTEXT"])
        assert (await sasl_login(alice, "SCRAM-SHA-512", "alice", "alice-pw")).error_code == 0
        assert (await join(alice, "anyones")).error_code == 0
        assert (await join(alice, "bobs")).error_code == GROUP_DENIED
        await alice.close()
    finally:
        await admin.close()


@pytest.mark.asyncio
async def test_without_an_authorizer_acl_apis_say_security_disabled(start_server) -> None:
    server = await start_server("PLAINTEXT://127.0.0.1:0")
    client = await connect(server.port)
    try:
        created = await client.request(req(30, 3, creations=[binding(GROUP, "g", READ)]))
        assert [(r.error_code, r.error_message) for r in created.results] == [(54, "No Authorizer is configured.")]
        described = await client.request(req(29, 2, resource_type_filter=1, resource_name_filter=None,
                                             pattern_type_filter=1, principal_filter=None, host_filter=None,
                                             operation=1, permission_type=1))
        assert described.error_code == 54
    finally:
        await client.close()


@pytest.mark.asyncio
async def test_acls_are_records_and_survive_a_restart(tmp_path) -> None:
    overrides = {"authorizer.class.name": AUTHORIZER, "super.users": "User:ANONYMOUS",
                 "sasl.enabled.mechanisms": "SCRAM-SHA-512"}
    first = CoordinatorServer(security_config(tmp_path / "shared", LISTENERS, **overrides))
    await first.start()
    try:
        admin = await connect(first.ports["PLAINTEXT"])
        await add_user(admin, "alice", "alice-pw")
        created = await admin.request(req(30, 3, creations=[binding(GROUP, "kept", READ)]))
        assert [r.error_code for r in created.results] == [0]
        await admin.close()
    finally:
        await first.stop()
    second = CoordinatorServer(security_config(tmp_path / "shared", LISTENERS, **overrides))
    await second.start()
    try:
        alice = await connect(second.ports["SASL_PLAINTEXT"])
        assert (await sasl_login(alice, "SCRAM-SHA-512", "alice", "alice-pw")).error_code == 0
        assert (await join(alice, "kept")).error_code == 0
        assert (await join(alice, "other")).error_code == GROUP_DENIED
        await alice.close()
    finally:
        await second.stop()


@pytest.mark.asyncio
async def test_the_data_plane_checks_write_read_and_describe_on_topics(secured) -> None:
    await secured.admin.request(req(19, 7, topics=[{"name": "orders", "num_partitions": 1, "replication_factor": 1,
                                                    "assignments": [], "configs": []}],
                                    timeout=5000, validate_only=False))
    alice = await secured.login("alice")
    produced = await alice.request(req(0, 9, transactional_id=None, acks=1, timeout=5000, topic_data=[
        {"name": "orders", "partition_data": [{"index": 0, "records": b"not even a batch"}]}]))
    assert produced.responses[0].partition_responses[0].error_code == TOPIC_DENIED
    fetched = await alice.request(req(1, 12, replica_id=-1, max_wait=0, min_bytes=1, max_bytes=1 << 20,
                                      isolation_level=0, session_id=0, session_epoch=-1, forgotten_topics_data=[],
                                      rack_id="", topics=[{"topic": "orders", "partitions": [
                                          {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                                           "last_fetched_epoch": -1, "log_start_offset": -1,
                                           "partition_max_bytes": 1 << 20}]}]))
    assert fetched.responses[0].partitions[0].error_code == TOPIC_DENIED
    listed = await alice.request(req(2, 7, replica_id=-1, isolation_level=0, topics=[
        {"name": "orders", "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]))
    assert listed.topics[0].partitions[0].error_code == TOPIC_DENIED
    producer_id = await alice.request(req(22, 4, transactional_id=None, transaction_timeout=60000,
                                          producer_id=-1, producer_epoch=-1))
    assert producer_id.error_code == CLUSTER_DENIED
    assert await secured.create(binding(TOPIC, "orders", WRITE), binding(TOPIC, "orders", READ)) == [0, 0]
    producer_id = await alice.request(req(22, 4, transactional_id=None, transaction_timeout=60000,
                                          producer_id=-1, producer_epoch=-1))
    assert producer_id.error_code == 0  # WRITE on a topic is enough for an idempotent producer (KIP-679)
    listed = await alice.request(req(2, 7, replica_id=-1, isolation_level=0, topics=[
        {"name": "orders", "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]))
    assert listed.topics[0].partitions[0].error_code == 0  # READ implies DESCRIBE


@pytest.mark.asyncio
async def test_the_private_generations_api_is_authorized_as_describe_groups(secured) -> None:
    root_client = secured.admin
    joined = await join(root_client, "app-gen")
    assert joined.error_code == 0
    hidden = await join(root_client, "hidden-gen")
    assert hidden.error_code == 0
    assert await secured.create(binding(GROUP, "app-", DESCRIBE, pattern=PREFIXED)) == [0]
    alice = await secured.login("alice")
    answer = await alice.request(req(DESCRIBE_GROUP_GENERATIONS, 0, groups=["app-gen", "hidden-gen"]))
    assert [(g.group_id, g.error_code, g.generation_id, [m.member_id for m in g.members]) for g in answer.groups] == [
        ("app-gen", 0, 1, [joined.member_id]), ("hidden-gen", GROUP_DENIED, -1, [])]
    only_hidden = await alice.request(req(DESCRIBE_GROUP_GENERATIONS, 0, groups=["hidden-gen"]))
    assert [(g.group_id, g.error_code) for g in only_hidden.groups] == [("hidden-gen", GROUP_DENIED)]


DESCRIBE_CONFIGS_OP, ALTER_CONFIGS_OP = 10, 11


@pytest.mark.asyncio
async def test_group_configs_need_describe_configs_and_alter_configs_on_the_group(secured: Secured) -> None:
    assert await secured.create(binding(GROUP, "cfg-a", ALTER_CONFIGS_OP),
                                binding(GROUP, "cfg-a", DESCRIBE_CONFIGS_OP, principal="User:bob")) == [0, 0]
    alice, bob = await secured.login("alice"), await secured.login("bob")

    def alter(*groups: str):
        return req(44, 1, validate_only=False, resources=[
            {"resource_type": 32, "resource_name": g, "configs": [
                {"name": "consumer.heartbeat.interval.ms", "config_operation": 0, "value": "6000"}]} for g in groups])

    def describe(*groups: str):
        return req(32, 4, include_synonyms=False, include_documentation=False, resources=[
            {"resource_type": 32, "resource_name": g, "configuration_keys": ["consumer.heartbeat.interval.ms"]}
            for g in groups])

    altered = await alice.request(alter("cfg-a", "cfg-b"))
    assert [(r.resource_name, r.error_code) for r in altered.responses] == [("cfg-a", 0), ("cfg-b", GROUP_DENIED)]
    # ALTER_CONFIGS implies DESCRIBE_CONFIGS, as in Kafka.
    described = await alice.request(describe("cfg-a", "cfg-b"))
    assert [(r.resource_name, r.error_code, [c.value for c in r.configs]) for r in described.results] == [
        ("cfg-a", 0, ["6000"]), ("cfg-b", GROUP_DENIED, [])]
    assert [r.error_code for r in (await bob.request(describe("cfg-a"))).results] == [0]
    assert [r.error_code for r in (await bob.request(alter("cfg-a"))).responses] == [GROUP_DENIED]
