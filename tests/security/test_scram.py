"""SCRAM (RFC 5802/7677) and PLAIN exchanges, and the JAAS line, without sockets."""

from __future__ import annotations

import base64

import pytest

from coordinator.security import jaas, scram
from coordinator.security.plain import PlainServer
from coordinator.security.scram import SaslFailed, ScramClient, ScramServer

# RFC 7677 section 3: user "user", password "pencil".
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"


def test_the_rfc_7677_exchange_byte_for_byte() -> None:
    credential = scram.new_credential(scram.SCRAM_SHA_256, "pencil", 4096, RFC_SALT)
    server = ScramServer(scram.SCRAM_SHA_256, {"user": credential}.get, nonce=lambda: RFC_SERVER_NONCE)
    client = ScramClient(scram.SCRAM_SHA_256, "user", "pencil", nonce=RFC_CLIENT_NONCE)
    assert client.first() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    server_first = server.evaluate(client.first())
    assert server_first == (b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,"
                            b"i=4096")
    final = client.final(server_first)
    assert final == (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                     b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    server_final = server.evaluate(final)
    assert server_final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    client.verify(server_final)
    assert server.complete and server.user == "user"


@pytest.mark.parametrize("mechanism", [scram.SCRAM_SHA_256, scram.SCRAM_SHA_512])
def test_a_wrong_password_or_an_unknown_user_fails_alike(mechanism) -> None:
    users = {"alice": scram.new_credential(mechanism, "right")}
    for user, password in (("alice", "wrong"), ("bob", "right")):
        server = ScramServer(mechanism, users.get)
        client = ScramClient(mechanism, user, password)
        with pytest.raises(SaslFailed) as failure:
            server.evaluate(client.final(server.evaluate(client.first())))
        assert not failure.value.public and not server.complete


def test_names_with_commas_and_equals_are_escaped_and_authzid_must_match() -> None:
    mechanism = scram.SCRAM_SHA_512
    server = ScramServer(mechanism, {"a,b=c": scram.new_credential(mechanism, "pw")}.get)
    client = ScramClient(mechanism, "a,b=c", "pw")
    assert b"n=a=2Cb=3Dc," in client.first()
    server.evaluate(client.final(server.evaluate(client.first())))
    assert server.user == "a,b=c"
    other = ScramServer(mechanism, {"alice": scram.new_credential(mechanism, "pw")}.get)
    with pytest.raises(SaslFailed, match="authorization id that is different") as failure:
        other.evaluate(b"n,a=mallory,n=alice,r=abc")
    assert failure.value.public


@pytest.mark.parametrize("message", [b"", b"garbage", b"y,,n=alice,r=x", b"n,,n=alice", b"\xff\xfe",
                                     b"p=tls-unique,,n=alice,r=x", b"n,,m=ext,n=alice,r=x,,"])
def test_malformed_client_first_messages_fail(message) -> None:
    server = ScramServer(scram.SCRAM_SHA_256, {"alice": scram.new_credential(scram.SCRAM_SHA_256, "pw")}.get)
    with pytest.raises(SaslFailed):
        server.evaluate(message)


def test_a_tampered_nonce_in_the_final_message_fails() -> None:
    mechanism = scram.SCRAM_SHA_256
    server = ScramServer(mechanism, {"alice": scram.new_credential(mechanism, "pw")}.get)
    client = ScramClient(mechanism, "alice", "pw")
    final = client.final(server.evaluate(client.first()))
    with pytest.raises(SaslFailed, match="nonce"):
        server.evaluate(final.replace(b",r=", b",r=x", 1))


def test_plain_checks_users_with_kafka_messages() -> None:
    server = PlainServer({"alice": "secret"})
    assert server.evaluate(b"\0alice\0secret") == b"" and server.user == "alice"
    for message, text in ((b"\0alice\0nope", "Invalid username or password"),
                          (b"\0bob\0secret", "Invalid username or password"),
                          (b"\0\0secret", "username not specified"), (b"\0alice\0", "password not specified"),
                          (b"bob\0alice\0secret", "authorization id that is different")):
        with pytest.raises(SaslFailed, match=text) as failure:
            PlainServer({"alice": "secret"}).evaluate(message)
        assert failure.value.public
    with pytest.raises(SaslFailed, match="expected 3 tokens") as failure:
        PlainServer({"alice": "secret"}).evaluate(b"alice")
    assert not failure.value.public


def test_jaas_lines_as_kafka_writes_them() -> None:
    entry = jaas.parse('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
                       'password="admin-secret" user_admin="admin-secret" user_alice="a \\"quoted\\" pw";')
    assert entry.module == jaas.PLAIN_MODULE and entry.flag == "required"
    assert entry.plain_users == {"admin": "admin-secret", "alice": 'a "quoted" pw'}
    assert jaas.parse(f"{jaas.SCRAM_MODULE} required username=bob password=pw;").options == {
        "username": "bob", "password": "pw"}
    for bad in ("", "Module", f"{jaas.PLAIN_MODULE} maybe;", f"{jaas.PLAIN_MODULE} required user_a=;",
                f"{jaas.PLAIN_MODULE} required user_a=\"x\""):
        with pytest.raises(jaas.JaasError):
            jaas.parse(bad)
