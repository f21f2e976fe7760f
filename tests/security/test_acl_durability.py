"""An ACL or SCRAM change decides nothing before the log entry carrying it is durable (issue 17,
point 3): the one release rule applied to the authorizer's and SASL's view, as Kafka's brokers apply
an ACL when its metadata record is committed.

The first tests run the real server in this process on a filesystem whose fsyncs the test holds
(a gate), so "written but not durable" lasts as long as the test needs; the last kills a server
process with SIGKILL while ACL changes are in flight and checks what the restarted server holds.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from coordinator.node.server import CoordinatorServer
from coordinator.recordlog.fs import AppendHandle
from coordinator.runtime import durable
from coordinator.security.store import security_of
from tests.security.conftest import connect, security_config
from tests.security.support import add_user, sasl_login, upsertion
from tests.security.test_authorization import (
    AUTHORIZER,
    DESCRIBE,
    GROUP,
    GROUP_DENIED,
    LISTENERS,
    READ,
    TOPIC,
    TOPIC_DENIED,
    binding,
    req,
)
from tests.support.polling import eventually
from tests.support.server import ServerProcess, wait_until
from tests.support.wire import WireClient

SASL_AUTHENTICATION_FAILED = 58


class FsyncGate:
    """Holds every fsync of the record log while closed (the committer's thread waits on it)."""

    def __init__(self) -> None:
        self._open = threading.Event()
        self._open.set()
        self.held = 0
        """fsyncs waiting at the gate now."""
        self._lock = threading.Lock()

    def close(self) -> None:
        self._open.clear()

    def open(self) -> None:
        self._open.set()

    def wait(self) -> None:
        with self._lock:
            self.held += 1
        self._open.wait()
        with self._lock:
            self.held -= 1


class _GatedHandle:
    def __init__(self, inner: AppendHandle, gate: FsyncGate) -> None:
        self._inner = inner
        self._gate = gate

    def write(self, data: bytes) -> None:
        self._inner.write(data)

    def fsync(self) -> None:
        self._gate.wait()
        self._inner.fsync()

    def size(self) -> int:
        return self._inner.size()

    def truncate(self, size: int) -> None:
        self._inner.truncate(size)

    def close(self) -> None:
        self._inner.close()


class GatedFileSystem(durable.TimedFileSystem):
    def __init__(self, gate: FsyncGate) -> None:
        self.gate = gate

    def open_append(self, path: str) -> AppendHandle:
        return _GatedHandle(super().open_append(path), self.gate)


class Env:
    def __init__(self, server: CoordinatorServer, gate: FsyncGate, admin: WireClient) -> None:
        self.server = server
        self.gate = gate
        self.admin = admin
        self.clients: list[WireClient] = [admin]

    async def client(self, user: str | None = None) -> WireClient:
        if user is None:
            client = await connect(self.server.ports["PLAINTEXT"])
        else:
            client = await connect(self.server.ports["SASL_PLAINTEXT"], client_id=f"{user}-client")
            assert (await sasl_login(client, "SCRAM-SHA-512", user, f"{user}-pw")).error_code == 0
        self.clients.append(client)
        return client

    async def held(self, request, changed) -> asyncio.Task:
        """Send `request` from a fresh admin connection with fsyncs held; returns once the shard
        has handled it (`changed()`) and its entry waits at the gate, its reply not sent."""
        client = await self.client()
        self.gate.close()
        task = asyncio.ensure_future(client.request(request))
        await eventually(lambda: changed() and self.gate.held > 0)
        assert not task.done()
        return task


@pytest_asyncio.fixture
async def gated(tmp_path) -> AsyncIterator[Env]:
    gate = FsyncGate()
    server = CoordinatorServer(security_config(
        tmp_path, LISTENERS, **{"authorizer.class.name": AUTHORIZER, "sasl.enabled.mechanisms": "SCRAM-SHA-512",
                                "super.users": "User:ANONYMOUS", "log.flush.policy": "always"}))
    server._fs = GatedFileSystem(gate)  # the record log's filesystem (opened by start())
    await server.start()
    env = Env(server, gate, await connect(server.ports["PLAINTEXT"]))
    try:
        await add_user(env.admin, "alice", "alice-pw")
        created = await env.admin.request(req(19, 7, topics=[{"name": "orders", "num_partitions": 1,
                                                              "replication_factor": 1, "assignments": [],
                                                              "configs": []}], timeout=5000, validate_only=False))
        assert created.topics[0].error_code == 0
        yield env
    finally:
        gate.open()
        for client in env.clients:
            await client.close()
        await server.stop()


async def described(client: WireClient, topic: str) -> int:
    response = await client.request(req(3, 12, topics=[{"name": topic, "topic_id": None}],
                                        allow_auto_topic_creation=False, include_topic_authorized_operations=False))
    return int(response.topics[0].error_code)


async def coordinator_of(client: WireClient, group: str) -> int:
    response = await client.request(req(10, 4, key_type=0, coordinator_keys=[group]))
    return int(response.coordinators[0].error_code)


@pytest.mark.asyncio
async def test_a_new_acl_allows_nothing_until_its_record_is_durable(gated: Env) -> None:
    alice = await gated.client("alice")
    assert await described(alice, "orders") == TOPIC_DENIED
    assert await coordinator_of(alice, "g") == GROUP_DENIED
    acls = security_of(gated.server.shard.core).acls
    pending = await gated.held(req(30, 3, creations=[binding(TOPIC, "orders", DESCRIBE), binding(GROUP, "g", READ)]),
                               lambda: len(acls) == 2)
    # The shard has handled CreateAcls (DeleteAcls would already match them), but its entry is not
    # durable: a crash now would forget them, so they must not have allowed anything yet.
    assert await described(alice, "orders") == TOPIC_DENIED
    assert await coordinator_of(alice, "g") == GROUP_DENIED
    gated.gate.open()
    assert [r.error_code for r in (await pending).results] == [0, 0]
    assert await described(alice, "orders") == 0
    assert await coordinator_of(alice, "g") == 0


@pytest.mark.asyncio
async def test_a_deleted_acl_keeps_allowing_until_the_deletion_is_durable(gated: Env) -> None:
    assert [r.error_code for r in (await gated.admin.request(
        req(30, 3, creations=[binding(TOPIC, "orders", DESCRIBE)]))).results] == [0]
    alice = await gated.client("alice")
    assert await described(alice, "orders") == 0
    acls = security_of(gated.server.shard.core).acls
    pending = await gated.held(req(31, 3, filters=[
        {"resource_type_filter": TOPIC, "resource_name_filter": "orders", "pattern_type_filter": 3,
         "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1}]), lambda: not acls)
    assert await described(alice, "orders") == 0  # the deletion could still be undone by a crash
    gated.gate.open()
    assert [len(r.matching_acls) for r in (await pending).filter_results] == [1]
    assert await described(alice, "orders") == TOPIC_DENIED


@pytest.mark.asyncio
async def test_a_new_scram_user_cannot_log_in_until_its_credential_is_durable(gated: Env) -> None:
    credentials = security_of(gated.server.shard.core).credentials
    pending = await gated.held(req(51, 0, deletions=[], upsertions=[upsertion("carol", "carol-pw")]),
                               lambda: ("carol", 2) in credentials)
    carol = await connect(gated.server.ports["SASL_PLAINTEXT"])
    gated.clients.append(carol)
    assert (await sasl_login(carol, "SCRAM-SHA-512", "carol", "carol-pw")).error_code == SASL_AUTHENTICATION_FAILED
    gated.gate.open()
    assert [r.error_code for r in (await pending).results] == [0]
    assert (await gated.client("carol")) is not None  # logs in (asserted by `client`)


def _acl_names(response) -> set[str]:
    return {r.resource_name for r in response.resources}


@pytest.mark.asyncio
async def test_after_sigkill_the_acls_are_what_clients_were_told(tmp_path) -> None:
    """ACL creations and deletions one after another, the server killed with SIGKILL while one is in
    flight: after a restart every acknowledged change is there, and nothing else but possibly the
    one change whose answer never came."""
    server = ServerProcess(tmp_path / "data", scheme="PLAINTEXT", overrides={
        "authorizer.class.name": AUTHORIZER, "super.users": "User:ANONYMOUS"})
    delete_filter = {"resource_type_filter": TOPIC, "pattern_type_filter": 3, "principal_filter": None,
                     "host_filter": None, "operation": 1, "permission_type": 1}
    try:
        server.start()
        for round_number in range(3):
            client = await WireClient.connect(server.port)
            acknowledged: set[str] = set(_acl_names(await client.request(req(
                29, 3, resource_type_filter=TOPIC, resource_name_filter=None, pattern_type_filter=1,
                principal_filter=None, host_filter=None, operation=1, permission_type=1))))
            in_flight: tuple[str, str] | None = None
            killed = False
            for i in range(400):
                name = f"t{round_number}-{i}"
                if i % 3 == 2:  # delete one acknowledged earlier
                    victim = sorted(acknowledged)[0]
                    in_flight = ("delete", victim)
                    request = req(31, 3, filters=[{**delete_filter, "resource_name_filter": victim}])
                else:
                    in_flight = ("create", name)
                    request = req(30, 3, creations=[binding(TOPIC, name, READ)])
                cid = await client.send(request)
                if i == 150 + 40 * round_number:
                    assert server.proc is not None
                    server.proc.kill()  # SIGKILL: no shutdown code runs
                    server.proc.wait(10)
                    killed = True
                    break
                got, response = await client.receive(int(request.__api_key__), int(request.__version__))
                assert got == cid
                if in_flight[0] == "create":
                    assert [r.error_code for r in response.results] == [0]
                    acknowledged.add(name)
                else:
                    assert [len(r.matching_acls) for r in response.filter_results] == [1]
                    acknowledged.discard(in_flight[1])
                in_flight = None
            assert killed
            await client.close()
            server.start()
            client = await WireClient.connect(server.port)
            held = _acl_names(await client.request(req(
                29, 3, resource_type_filter=TOPIC, resource_name_filter=None, pattern_type_filter=1,
                principal_filter=None, host_filter=None, operation=1, permission_type=1)))
            await client.close()
            assert in_flight is not None
            kind, name = in_flight
            undecided = acknowledged | {name} if kind == "create" else acknowledged - {name}
            assert held in (acknowledged, undecided), (sorted(held ^ acknowledged), in_flight)
    finally:
        server.stop()
    wait_until(lambda: server.proc is None or server.proc.poll() is not None, message="server stopped")
