"""TxnOffsetCommit under an authorizer in sidecar mode, as Kafka's KafkaApis authorizes it: WRITE on
the transactional id (else every partition TRANSACTIONAL_ID_AUTHORIZATION_FAILED), READ on the group
(GROUP_AUTHORIZATION_FAILED), READ on each topic (TOPIC_AUTHORIZATION_FAILED for that topic's
partitions only; the rest is forwarded). Raw requests from a SCRAM principal; the upstream is
librdkafka's mock cluster."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from tests.security.conftest import connect, start_server  # noqa: F401 (fixture)
from tests.security.support import add_user, sasl_login
from tests.security.test_authorization import (
    ALLOW,
    AUTHORIZER,
    GROUP,
    LITERAL,
    READ,
    TOPIC,
    WRITE,
    req,
)
from tests.support.polling import eventually
from tests.support.wire import WireClient

from .conftest import free_base_port, start_mock_cluster, stop_process

pytestmark = pytest.mark.interop

TRANSACTIONAL_ID = 5  # Kafka's ResourceType.TRANSACTIONAL_ID
TXN_DENIED, GROUP_DENIED, TOPIC_DENIED = 53, 30, 29
DENIALS = {TXN_DENIED, GROUP_DENIED, TOPIC_DENIED}


def allow(resource_type: int, name: str, operation: int) -> dict[str, Any]:
    return {"resource_type": resource_type, "resource_name": name, "resource_pattern_type": LITERAL,
            "principal": "User:alice", "host": "*", "operation": operation, "permission_type": ALLOW}


def txn_commit(group: str, *topics: str) -> Any:
    return req(28, 3, transactional_id="tx-a", group_id=group, producer_id=1, producer_epoch=0, generation_id=-1,
               member_id="", group_instance_id=None, topics=[{"name": t, "partitions": [
                   {"partition_index": 0, "committed_offset": 5, "committed_leader_epoch": -1,
                    "committed_metadata": ""}]} for t in topics])


def codes(response: Any) -> dict[str, int]:
    return {t.name: int(p.error_code) for t in response.topics for p in t.partitions}


@pytest_asyncio.fixture
async def secured_sidecar(start_server) -> AsyncIterator[tuple[WireClient, WireClient]]:  # noqa: F811
    proc, bootstrap = start_mock_cluster(1)
    try:
        server = await start_server("PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0", **{
            "authorizer.class.name": AUTHORIZER, "sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "super.users": "User:ANONYMOUS", "upstream.bootstrap.servers": bootstrap,
            "sidecar.listener.base.port": str(free_base_port())})
        admin = await connect(server.ports["PLAINTEXT"])
        await add_user(admin, "alice", "alice-pw")
        alice = await connect(server.ports["SASL_PLAINTEXT"], client_id="alice")
        assert (await sasl_login(alice, "SCRAM-SHA-512", "alice", "alice-pw")).error_code == 0
        try:
            yield admin, alice
        finally:
            await alice.close()
            await admin.close()
    finally:
        stop_process(proc)


@pytest.mark.asyncio
async def test_txn_offset_commit_needs_write_on_the_id_read_on_the_group_and_each_topic(secured_sidecar) -> None:
    admin, alice = secured_sidecar
    for topic in ("readable", "secret"):  # created upstream through the sidecar (auto-create)
        await admin.request(req(3, 12, topics=[{"topic_id": None, "name": topic}], allow_auto_topic_creation=True,
                                include_topic_authorized_operations=False))
    created = await admin.request(req(30, 3, creations=[
        allow(GROUP, "g", READ), allow(TOPIC, "readable", READ)]))
    assert [r.error_code for r in created.results] == [0, 0]
    assert codes(await alice.request(txn_commit("g", "readable", "secret"))) == {
        "readable": TXN_DENIED, "secret": TXN_DENIED}
    await admin.request(req(30, 3, creations=[allow(TRANSACTIONAL_ID, "tx-a", WRITE)]))
    assert codes(await alice.request(txn_commit("other-group", "readable"))) == {"readable": GROUP_DENIED}
    answers: list[dict[str, int]] = []

    async def forwarded() -> bool:
        answers.append(codes(await alice.request(txn_commit("g", "readable", "secret"))))
        return answers[-1]["readable"] != 3  # UNKNOWN_TOPIC_OR_PARTITION until the catalog has it

    await eventually(forwarded, timeout=20, interval=0.1, message="the topics in the sidecar's catalog")
    assert answers[-1]["secret"] == TOPIC_DENIED
    assert answers[-1]["readable"] not in DENIALS  # checked here, then the upstream's own answer
