"""TLS listeners and several listeners at once (issue 17, point 1), over real sockets."""

from __future__ import annotations

import asyncio
import ssl

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.metadata.v12.request import MetadataRequest

from coordinator.security import tls
from tests.security.conftest import connect

API_VERSIONS = ApiVersionsRequest(client_software_name="t", client_software_version="1")


def _listeners(*pairs: str) -> str:
    return ",".join(f"{p}://127.0.0.1:0" for p in pairs)


@pytest.mark.asyncio
async def test_an_ssl_listener_serves_kafka_requests_over_tls_with_a_pem_keystore_file(start_server, certs) -> None:
    server = await start_server(_listeners("SSL"), **{"ssl.keystore.location": str(certs.server.combined)})
    client = await connect(server.port, certs.client_context())
    try:
        response = await client.request(API_VERSIONS)
        assert response.error_code == 0 and response.api_keys
        peer = client.writer.get_extra_info("peercert")
        assert dict(x[0] for x in peer["subject"])["commonName"] == "localhost"
    finally:
        await client.close()


@pytest.mark.asyncio
async def test_a_plaintext_client_cannot_talk_to_an_ssl_listener(start_server, certs) -> None:
    server = await start_server(_listeners("SSL"), **{"ssl.keystore.location": str(certs.server.combined)})
    client = await connect(server.port)
    try:
        await client.send(API_VERSIONS)
        assert await client.closed_by_peer()
    finally:
        await client.close()


@pytest.mark.asyncio
async def test_inline_pem_key_and_chain_are_a_keystore_too(start_server, certs) -> None:
    server = await start_server(_listeners("SSL"), **{
        "ssl.keystore.key": certs.server.key.read_text().replace("\n", "\\n"),
        "ssl.keystore.certificate.chain": certs.server.cert.read_text().replace("\n", "\\n")})
    client = await connect(server.port, certs.client_context())
    try:
        assert (await client.request(API_VERSIONS)).error_code == 0
    finally:
        await client.close()


@pytest.mark.asyncio
async def test_several_listeners_each_advertise_their_own_endpoint(start_server, certs) -> None:
    """Metadata and FindCoordinator answer with the endpoint of the listener asked on (Kafka)."""
    server = await start_server(
        "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,INTERNAL://127.0.0.1:0",
        **{"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,INTERNAL:SSL",
           "ssl.keystore.location": str(certs.server.combined)})
    ports = server.ports
    assert len(set(ports.values())) == 3
    for name, context in (("PLAINTEXT", None), ("SSL", certs.client_context()), ("INTERNAL", certs.client_context())):
        client = await connect(ports[name], context)
        try:
            metadata = await client.request(MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                                            include_topic_authorized_operations=False))
            assert [(b.host, b.port) for b in metadata.brokers] == [("127.0.0.1", ports[name])]
            found = await client.request(FindCoordinatorRequest(key_type=0, coordinator_keys=("g",)))
            assert found.coordinators[0].port == ports[name]
        finally:
            await client.close()


@pytest.mark.asyncio
async def test_required_client_auth_refuses_a_client_without_a_trusted_certificate(start_server, certs) -> None:
    server = await start_server(_listeners("SSL"), **{
        "ssl.keystore.location": str(certs.server.combined), "ssl.client.auth": "required",
        "ssl.truststore.location": str(certs.ca.cert)})
    for pair in (None, certs.mallory):  # no certificate; one from another authority
        with pytest.raises((ssl.SSLError, ConnectionError, asyncio.IncompleteReadError)):
            client = await connect(server.port, certs.client_context(pair))
            try:
                await client.request(API_VERSIONS, timeout=5)
            finally:
                await client.close()
    client = await connect(server.port, certs.client_context(certs.alice))
    try:
        assert (await client.request(API_VERSIONS)).error_code == 0
        (connection,) = server.connections
        assert connection.principal == "User:CN=alice,OU=eng,O=Example\\, Inc.,C=FR"
    finally:
        await client.close()


@pytest.mark.asyncio
async def test_requested_client_auth_accepts_both_and_names_the_certificate(start_server, certs) -> None:
    server = await start_server(_listeners("SSL"), **{
        "ssl.keystore.location": str(certs.server.combined), "ssl.client.auth": "requested",
        "ssl.truststore.certificates": certs.ca.cert.read_text().replace("\n", "\\n")})
    anonymous = await connect(server.port, certs.client_context())
    alice = await connect(server.port, certs.client_context(certs.alice))
    try:
        for client in (anonymous, alice):
            assert (await client.request(API_VERSIONS)).error_code == 0
        principals = sorted(c.principal for c in server.connections)
        assert principals == ["User:ANONYMOUS", "User:CN=alice,OU=eng,O=Example\\, Inc.,C=FR"]
    finally:
        await anonymous.close()
        await alice.close()


def test_distinguished_names_are_written_as_java_writes_them() -> None:
    subject = ((("countryName", "FR"),), (("organizationName", "A+B"),), (("commonName", " x"),),
               (("emailAddress", "a@b.c"),))
    assert tls.distinguished_name(subject) == "1.2.840.113549.1.9.1=#16056140622e63,CN=\\ x,O=A\\+B,C=FR"
    assert tls.principal(None) == "User:ANONYMOUS"
