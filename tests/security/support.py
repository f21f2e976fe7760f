"""Raw-protocol helpers for the security tests: SASL exchanges and SCRAM users over kio requests."""

from __future__ import annotations

import secrets

from kio.schema.alter_user_scram_credentials.v0.request import (
    AlterUserScramCredentialsRequest,
    ScramCredentialUpsertion,
)
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from kio.static.primitive import i8, i32

from coordinator.security import scram
from tests.support.wire import WireClient


async def sasl_login(client: WireClient, mechanism: str, user: str, password: str):
    """Handshake and authenticate; returns the last SaslAuthenticate response (error or not)."""
    handshake = await client.request(SaslHandshakeRequest(mechanism=mechanism))
    assert handshake.error_code == 0, handshake
    if mechanism == "PLAIN":
        return await client.request(SaslAuthenticateRequest(auth_bytes=f"\0{user}\0{password}".encode()))
    scram_client = scram.ScramClient(scram.BY_NAME[mechanism], user, password)
    first = await client.request(SaslAuthenticateRequest(auth_bytes=scram_client.first()))
    if first.error_code:
        return first
    final = await client.request(SaslAuthenticateRequest(auth_bytes=scram_client.final(first.auth_bytes)))
    if not final.error_code:
        scram_client.verify(final.auth_bytes)
    return final


def upsertion(user: str, password: str, mechanism: str = "SCRAM-SHA-512", iterations: int = 4096):
    chosen = scram.BY_NAME[mechanism]
    salt = secrets.token_bytes(16)
    return ScramCredentialUpsertion(name=user, mechanism=i8(chosen.type_id), iterations=i32(iterations), salt=salt,
                                    salted_password=scram.salted_password(chosen, password, salt, iterations))


async def add_user(client: WireClient, user: str, password: str, mechanism: str = "SCRAM-SHA-512") -> None:
    response = await client.request(AlterUserScramCredentialsRequest(
        deletions=(), upsertions=(upsertion(user, password, mechanism),)))
    assert [r.error_code for r in response.results] == [0], response
