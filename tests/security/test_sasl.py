"""SASL on SASL_PLAINTEXT listeners with raw kio requests: the handshake (v1, and v0 with bare
tokens), SCRAM and PLAIN exchanges, what an unauthenticated connection may send, how failures are
delayed and logged, and SCRAM users managed with Kafka's own APIs."""

from __future__ import annotations

import struct
import time

import pytest
from kio.schema.alter_user_scram_credentials.v0.request import (
    AlterUserScramCredentialsRequest,
    ScramCredentialDeletion,
)
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.describe_user_scram_credentials.v0.request import (
    DescribeUserScramCredentialsRequest,
    UserName,
)
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v0.request import SaslHandshakeRequest as SaslHandshakeV0
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from kio.static.primitive import i8

from coordinator.security import scram
from coordinator.security.jaas import PLAIN_MODULE
from tests.security.conftest import connect
from tests.security.support import add_user, sasl_login, upsertion

LISTENERS = "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0"
API_VERSIONS = ApiVersionsRequest(client_software_name="t", client_software_version="1")
METADATA = MetadataRequest(topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False)
GENERIC = "Authentication failed during authentication due to invalid credentials with SASL mechanism {}"


async def _server(start_server, **overrides):
    server = await start_server(LISTENERS, **{"sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512,PLAIN",
                                              "listener.name.sasl_plaintext.plain.sasl.jaas.config":
                                              f'{PLAIN_MODULE} required user_carol="carol-pw";', **overrides})
    admin = await connect(server.ports["PLAINTEXT"])
    try:
        await add_user(admin, "alice", "alice-pw", "SCRAM-SHA-512")
        await add_user(admin, "bob", "bob-pw", "SCRAM-SHA-256")
    finally:
        await admin.close()
    return server


@pytest.mark.asyncio
@pytest.mark.parametrize(("mechanism", "user", "password"), [
    ("SCRAM-SHA-512", "alice", "alice-pw"), ("SCRAM-SHA-256", "bob", "bob-pw"), ("PLAIN", "carol", "carol-pw")])
async def test_a_user_authenticates_then_is_served_as_its_principal(start_server, mechanism, user, password) -> None:
    server = await _server(start_server)
    client = await connect(server.ports["SASL_PLAINTEXT"])
    try:
        assert (await client.request(API_VERSIONS)).error_code == 0
        response = await sasl_login(client, mechanism, user, password)
        assert response.error_code == 0 and response.error_message is None
        assert (await client.request(METADATA)).brokers[0].port == server.ports["SASL_PLAINTEXT"]
        (connection,) = [c for c in server.connections if c.listener == "SASL_PLAINTEXT"]
        assert connection.principal == f"User:{user}"
        # A second handshake is no longer part of an authentication: Kafka's ILLEGAL_SASL_STATE.
        assert (await client.request(SaslHandshakeRequest(mechanism=mechanism))).error_code == 34
        again = await client.request(SaslAuthenticateRequest(auth_bytes=b"x"))
        assert again.error_code == 34
    finally:
        await client.close()


@pytest.mark.asyncio
@pytest.mark.parametrize(("mechanism", "user", "password", "message"), [
    ("SCRAM-SHA-512", "alice", "wrong", GENERIC.format("SCRAM-SHA-512")),
    ("SCRAM-SHA-512", "nobody", "alice-pw", GENERIC.format("SCRAM-SHA-512")),
    ("SCRAM-SHA-256", "alice", "alice-pw", GENERIC.format("SCRAM-SHA-256")),  # alice has no SHA-256 credential
    ("PLAIN", "carol", "wrong", "Authentication failed: Invalid username or password"),
])
async def test_bad_credentials_are_answered_then_the_connection_closes(start_server, mechanism, user, password,
                                                                       message) -> None:
    server = await _server(start_server)
    client = await connect(server.ports["SASL_PLAINTEXT"])
    try:
        response = await sasl_login(client, mechanism, user, password)
        assert (response.error_code, response.error_message) == (58, message)
        assert await client.closed_by_peer()
    finally:
        await client.close()


@pytest.mark.asyncio
async def test_an_unknown_mechanism_gets_the_enabled_list_and_a_close(start_server) -> None:
    server = await _server(start_server)
    client = await connect(server.ports["SASL_PLAINTEXT"])
    try:
        response = await client.request(SaslHandshakeRequest(mechanism="GSSAPI"))
        assert response.error_code == 33
        assert list(response.mechanisms) == ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"]
        assert await client.closed_by_peer()
    finally:
        await client.close()


@pytest.mark.asyncio
@pytest.mark.parametrize("first", [METADATA, SaslAuthenticateRequest(auth_bytes=b"n,,n=alice,r=x")])
async def test_an_unauthenticated_connection_gets_nothing_but_api_versions_and_sasl(start_server, first) -> None:
    server = await _server(start_server)
    client = await connect(server.ports["SASL_PLAINTEXT"])
    try:
        await client.send(first)
        assert await client.closed_by_peer()
    finally:
        await client.close()


@pytest.mark.asyncio
async def test_a_request_other_than_sasl_authenticate_mid_exchange_is_illegal(start_server) -> None:
    server = await _server(start_server)
    client = await connect(server.ports["SASL_PLAINTEXT"])
    try:
        assert (await client.request(SaslHandshakeRequest(mechanism="SCRAM-SHA-512"))).error_code == 0
        await client.send(METADATA)
        assert await client.closed_by_peer()
    finally:
        await client.close()


@pytest.mark.asyncio
async def test_a_large_frame_before_authentication_closes_the_connection(start_server) -> None:
    server = await _server(start_server, **{"sasl.server.max.receive.size": "1024"})
    client = await connect(server.ports["SASL_PLAINTEXT"])
    try:
        assert (await client.request(SaslHandshakeRequest(mechanism="SCRAM-SHA-512"))).error_code == 0
        await client.send(SaslAuthenticateRequest(auth_bytes=b"n,,n=alice,r=" + b"x" * 2000))
        assert await client.closed_by_peer()
    finally:
        await client.close()


@pytest.mark.asyncio
async def test_scram_credentials_are_managed_with_kafkas_apis_and_errors(start_server) -> None:
    server = await _server(start_server)
    admin = await connect(server.ports["PLAINTEXT"])
    try:
        described = await admin.request(DescribeUserScramCredentialsRequest(users=None))
        assert {(r.user, tuple((c.mechanism, c.iterations) for c in r.credential_infos)) for r in described.results} == {
            ("alice", ((2, 4096),)), ("bob", ((1, 4096),))}
        described = await admin.request(DescribeUserScramCredentialsRequest(
            users=(UserName(name="alice"), UserName(name="zoe"), UserName(name="bob"), UserName(name="bob"))))
        assert [(r.user, r.error_code, r.error_message) for r in described.results] == [
            ("alice", 0, None),
            ("zoe", 91, "Attempt to describe a user credential that does not exist: zoe"),
            ("bob", 92, "Cannot describe SCRAM credentials for the same user twice in a single request: bob")]
        altered = await admin.request(AlterUserScramCredentialsRequest(
            deletions=(ScramCredentialDeletion(name="bob", mechanism=i8(1)),
                       ScramCredentialDeletion(name="zoe", mechanism=i8(1)),
                       ScramCredentialDeletion(name="x", mechanism=i8(9))),
            upsertions=(upsertion("dave", "pw", iterations=1024), upsertion("erin", "pw", iterations=20000),
                        upsertion("", "pw"), upsertion("alice", "new-pw"), upsertion("alice", "again"))))
        assert sorted((r.user, r.error_code, r.error_message) for r in altered.results) == [
            ("", 93, "Username must not be empty"),
            ("alice", 92, "A user credential cannot be altered twice in the same request"),
            ("bob", 0, None),
            ("dave", 93, "Too few iterations"),
            ("erin", 93, "Too many iterations"),
            ("x", 33, "Unknown SCRAM mechanism"),
            ("zoe", 91, "Attempt to delete a user credential that does not exist")]
        client = await connect(server.ports["SASL_PLAINTEXT"])
        try:
            assert (await sasl_login(client, "SCRAM-SHA-256", "bob", "bob-pw")).error_code == 58
        finally:
            await client.close()
    finally:
        await admin.close()


@pytest.mark.asyncio
async def test_credentials_are_records_in_the_log_and_survive_a_restart(tmp_path, start_server) -> None:
    from coordinator.node.server import CoordinatorServer
    from tests.security.conftest import security_config

    overrides = {"sasl.enabled.mechanisms": "SCRAM-SHA-512"}
    first = CoordinatorServer(security_config(tmp_path / "shared", LISTENERS, **overrides))
    await first.start()
    try:
        admin = await connect(first.ports["PLAINTEXT"])
        await add_user(admin, "alice", "alice-pw")
        await admin.close()
    finally:
        await first.stop()
    second = CoordinatorServer(security_config(tmp_path / "shared", LISTENERS, **overrides))
    await second.start()
    try:
        client = await connect(second.ports["SASL_PLAINTEXT"])
        assert (await sasl_login(client, "SCRAM-SHA-512", "alice", "alice-pw")).error_code == 0
        await client.close()
    finally:
        await second.stop()


def _token(data: bytes) -> bytes:
    return struct.pack(">i", len(data)) + data


@pytest.mark.asyncio
async def test_sasl_handshake_v0_and_v1_are_advertised_as_kafka_4_serves_them(start_server) -> None:
    server = await _server(start_server)
    client = await connect(server.ports["SASL_PLAINTEXT"])
    try:
        versions = {k.api_key: (k.min_version, k.max_version) for k in (await client.request(API_VERSIONS)).api_keys}
        assert versions[17] == (0, 1)  # older librdkafka (kcat 1.7.1) logs in only when v0 is there
        assert versions[36] == (0, 2)
    finally:
        await client.close()


@pytest.mark.asyncio
async def test_after_a_v0_handshake_plain_is_a_bare_token_answered_by_an_empty_one(start_server) -> None:
    server = await _server(start_server)
    client = await connect(server.ports["SASL_PLAINTEXT"])
    try:
        handshake = await client.request(SaslHandshakeV0(mechanism="PLAIN"))
        assert (handshake.error_code, list(handshake.mechanisms)) == (0, ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"])
        await client.send_raw(_token(b"\0carol\0carol-pw"))
        assert await client.read_frame() == b""  # Kafka's PLAIN answers an empty token, size-prefixed
        assert (await client.request(METADATA)).brokers[0].port == server.ports["SASL_PLAINTEXT"]
        (connection,) = [c for c in server.connections if c.listener == "SASL_PLAINTEXT"]
        assert connection.principal == "User:carol"
    finally:
        await client.close()


@pytest.mark.asyncio
async def test_after_a_v0_handshake_a_token_shorter_than_a_request_header_is_read(start_server) -> None:
    # "\0a\0b" is 4 bytes: below any request's 8-byte header, but a legal PLAIN token.
    server = await _server(start_server, **{"listener.name.sasl_plaintext.plain.sasl.jaas.config":
                                            f'{PLAIN_MODULE} required user_a="b";'})
    client = await connect(server.ports["SASL_PLAINTEXT"])
    try:
        assert (await client.request(SaslHandshakeV0(mechanism="PLAIN"))).error_code == 0
        await client.send_raw(_token(b"\0a\0b"))
        assert await client.read_frame() == b""
        assert (await client.request(METADATA)).brokers  # and requests are requests again
        (connection,) = [c for c in server.connections if c.listener == "SASL_PLAINTEXT"]
        assert connection.principal == "User:a"
    finally:
        await client.close()


@pytest.mark.asyncio
async def test_after_a_v0_handshake_scram_runs_over_bare_tokens(start_server) -> None:
    server = await _server(start_server)
    client = await connect(server.ports["SASL_PLAINTEXT"])
    try:
        assert (await client.request(SaslHandshakeV0(mechanism="SCRAM-SHA-512"))).error_code == 0
        exchange = scram.ScramClient(scram.SCRAM_SHA_512, "alice", "alice-pw")
        await client.send_raw(_token(exchange.first()))
        server_first = await client.read_frame()
        assert server_first.startswith(b"r=")
        await client.send_raw(_token(exchange.final(server_first)))
        exchange.verify(await client.read_frame())  # the server proved it knows alice's key
        assert (await client.request(METADATA)).brokers
    finally:
        await client.close()


@pytest.mark.asyncio
async def test_a_wrong_password_after_a_v0_handshake_gets_no_answer_and_a_close(start_server) -> None:
    server = await _server(start_server)
    client = await connect(server.ports["SASL_PLAINTEXT"])
    try:
        assert (await client.request(SaslHandshakeV0(mechanism="PLAIN"))).error_code == 0
        await client.send_raw(_token(b"\0carol\0wrong-pw"))
        assert await client.reader.read(65536) == b""  # no token, no Kafka response: the close alone
    finally:
        await client.close()


@pytest.mark.asyncio
async def test_failed_logins_wait_for_the_delay_and_are_logged_once_per_address_with_a_count(start_server) -> None:
    from structlog.testing import capture_logs

    server = await _server(start_server, **{"connection.failed.authentication.delay.ms": "200"})
    attempts = 5
    with capture_logs() as logs:
        started = time.monotonic()
        for _ in range(attempts):
            client = await connect(server.ports["SASL_PLAINTEXT"])
            try:
                response = await sasl_login(client, "PLAIN", "carol", "wrong")
                assert response.error_code == 58
                assert await client.closed_by_peer()
            finally:
                await client.close()
        elapsed = time.monotonic() - started
        lines = [e for e in logs if e["event"] == "authentication_failed"]
        assert [(e["host"], e["count"]) for e in lines] == [("127.0.0.1", 1)]  # the first at once, the rest counted
        await server.stop()
    assert elapsed >= attempts * 0.2  # each answer waited for the delay
    lines = [e for e in logs if e["event"] == "authentication_failed"]
    assert [e["count"] for e in lines] == [1, attempts - 1]  # the count not logged yet is written at stop
    assert lines[-1]["detail"] == "Authentication failed: Invalid username or password"
    assert not [e for e in logs if e.get("reason") == "authentication_failed"]  # no line per attempt


@pytest.mark.asyncio
async def test_a_failed_login_is_answered_only_after_the_delay(start_server) -> None:
    server = await _server(start_server, **{"connection.failed.authentication.delay.ms": "300"})
    client = await connect(server.ports["SASL_PLAINTEXT"])
    try:
        assert (await client.request(SaslHandshakeRequest(mechanism="PLAIN"))).error_code == 0
        started = time.monotonic()
        response = await client.request(SaslAuthenticateRequest(auth_bytes=b"\0carol\0wrong"))
        assert time.monotonic() - started >= 0.3
        assert response.error_code == 58
        assert await client.closed_by_peer()
    finally:
        await client.close()
