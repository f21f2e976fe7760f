"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka speaks them.

Credentials (Kafka's ScramFormatter): SaltedPassword = PBKDF2-HMAC(password, salt, iterations);
ClientKey = HMAC(SaltedPassword, "Client Key"); StoredKey = H(ClientKey); ServerKey =
HMAC(SaltedPassword, "Server Key"). The server keeps salt, StoredKey, ServerKey and iterations,
never the password (AlterUserScramCredentials sends the salted password, never the password).
Iterations are at least 4096 (Kafka's minimum for both mechanisms) and at most 16384 (Kafka's
`ScramControlManager.MAX_ITERATIONS`).

`ScramServer` is one exchange, Kafka's `ScramSaslServer`:

    client-first  n,[a=authzid],n=saslname,r=client-nonce[,ext]     (gs2 flag n only: no channel binding)
    server-first  r=client-nonce+server-nonce,s=base64(salt),i=iterations
    client-final  c=base64(gs2 header),r=nonce[,ext],p=base64(ClientProof)
    server-final  v=base64(ServerSignature)

Failures raise `SaslFailed`: with `public=False` (Kafka's SaslException) the client is told only
"Authentication failed during authentication due to invalid credentials with SASL mechanism X"; an
unknown user, a wrong proof, a bad message all look the same to it. An authorization id other than
the user name is public (Kafka's SaslAuthenticationException message). The server nonce is random,
so the exchange is not replayable; the client proof is compared in constant time.

`ScramClient` is the other side (the sidecar authenticating to its upstream).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass

MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384


@dataclass(frozen=True, slots=True)
class ScramMechanism:
    name: str
    hash_name: str
    type_id: int
    """Kafka's `ScramMechanism.type()` on the wire (AlterUserScramCredentials): 1 and 2."""

    def hmac(self, key: bytes, data: bytes) -> bytes:
        return hmac.new(key, data, self.hash_name).digest()

    def hash(self, data: bytes) -> bytes:
        return hashlib.new(self.hash_name, data).digest()


SCRAM_SHA_256 = ScramMechanism("SCRAM-SHA-256", "sha256", 1)
SCRAM_SHA_512 = ScramMechanism("SCRAM-SHA-512", "sha512", 2)
BY_NAME = {m.name: m for m in (SCRAM_SHA_256, SCRAM_SHA_512)}
BY_TYPE = {m.type_id: m for m in (SCRAM_SHA_256, SCRAM_SHA_512)}


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


class SaslFailed(Exception):
    """The exchange failed. `public`: the message may be shown to the client (Kafka's
    SaslAuthenticationException); otherwise the client gets the generic message."""

    def __init__(self, message: str, public: bool = False) -> None:
        super().__init__(message)
        self.public = public


def salted_password(mechanism: ScramMechanism, password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(mechanism.hash_name, password.encode(), salt, iterations)


def credential_from_salted(mechanism: ScramMechanism, salted: bytes, salt: bytes, iterations: int) -> ScramCredential:
    client_key = mechanism.hmac(salted, b"Client Key")
    return ScramCredential(salt, mechanism.hash(client_key), mechanism.hmac(salted, b"Server Key"), iterations)


def new_credential(mechanism: ScramMechanism, password: str, iterations: int = MIN_ITERATIONS,
                   salt: bytes | None = None) -> ScramCredential:
    salt = salt if salt is not None else secrets.token_bytes(32)
    return credential_from_salted(mechanism, salted_password(mechanism, password, salt, iterations), salt, iterations)


def username(sasl_name: str) -> str:
    """ScramFormatter.username: '=2C' is ',' and '=3D' is '=' (RFC 5802 saslname)."""
    return sasl_name.replace("=2C", ",").replace("=3D", "=")


def sasl_name(user: str) -> str:
    return user.replace("=", "=3D").replace(",", "=2C")


# ScramMessages' grammar (ASCII values, printable nonces, canonical base64).
_SASLNAME = r"(?:[\x01-\x2B\x2D-\x3C\x3E-\x7F]|=2C|=3D)+"
_VALUE = r"[\x01-\x2B\x2D-\x7F]+"
_PRINTABLE = r"[\x21-\x2B\x2D-\x7E]+"
_BASE64 = r"(?:[a-zA-Z0-9/+]{4})*(?:[a-zA-Z0-9/+]{3}=|[a-zA-Z0-9/+]{2}==)?"
_EXTENSIONS = rf"(?:,[A-Za-z]+={_VALUE})*"
_CLIENT_FIRST = re.compile(
    rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,(?P<bare>(?:m={_VALUE},)?n=(?P<saslname>{_SASLNAME}),"
    rf"r=(?P<nonce>{_PRINTABLE})(?P<extensions>{_EXTENSIONS}))")
_CLIENT_FINAL = re.compile(
    rf"c=(?P<channel>{_BASE64}),r=(?P<nonce>{_PRINTABLE})(?P<extensions>{_EXTENSIONS}),p=(?P<proof>{_BASE64})")
_SERVER_FIRST = re.compile(rf"r=(?P<nonce>{_PRINTABLE}),s=(?P<salt>{_BASE64}),i=(?P<iterations>[0-9]+)(?:{_EXTENSIONS})")
_SERVER_FINAL = re.compile(rf"(?:e=(?P<error>{_VALUE})|v=(?P<signature>{_BASE64}))(?:{_EXTENSIONS})")


def _nonce() -> str:
    """Kafka's ScramFormatter.secureRandomString: 130 random bits in base 36."""
    value = secrets.randbits(130)
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while value:
        value, digit = divmod(value, 36)
        out = digits[digit] + out
    return out or "0"


def _text(message: bytes) -> str:
    try:
        return message.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SaslFailed("Invalid SCRAM message: not UTF-8") from exc


class ScramServer:
    """One server-side SCRAM exchange. `lookup(user)` returns the user's credential or None."""

    def __init__(self, mechanism: ScramMechanism, lookup: Callable[[str], ScramCredential | None],
                 nonce: Callable[[], str] = _nonce) -> None:
        self.mechanism = mechanism
        self._lookup = lookup
        self._new_nonce = nonce
        self._first: tuple[str, str] | None = None  # (client-first-bare, server-first)
        self._nonce = ""
        self._credential: ScramCredential | None = None
        self.user: str | None = None
        self.complete = False

    def evaluate(self, message: bytes) -> bytes:
        if self.complete:
            raise SaslFailed("Unexpected challenge in Sasl server state COMPLETE")
        if self._first is None:
            return self._client_first(_text(message))
        return self._client_final(_text(message))

    def _client_first(self, text: str) -> bytes:
        match = _CLIENT_FIRST.fullmatch(text)
        if match is None:
            raise SaslFailed(f"Invalid SCRAM client first message format: {text[:64]!r}")
        extensions = dict(e.split("=", 1) for e in match.group("extensions").split(",")[1:])
        if extensions.get("tokenauth", "").lower() == "true":
            raise SaslFailed("Token Authentication failed: delegation tokens are not supported")
        user = username(match.group("saslname"))
        credential = self._lookup(user)
        if credential is None:
            raise SaslFailed("Authentication failed: Invalid user credentials")
        authzid = match.group("authzid")
        if authzid and authzid != user:
            raise SaslFailed("Authentication failed: Client requested an authorization id that is different "
                             "from username", public=True)
        if credential.iterations < MIN_ITERATIONS:
            raise SaslFailed(f"Iterations {credential.iterations} is less than the minimum {MIN_ITERATIONS} "
                             f"for {self.mechanism.name}")
        self._nonce = match.group("nonce") + self._new_nonce()
        server_first = f"r={self._nonce},s={base64.b64encode(credential.salt).decode()},i={credential.iterations}"
        self._first = (match.group("bare"), server_first)
        self._credential = credential
        self.user = user
        return server_first.encode()

    def _client_final(self, text: str) -> bytes:
        match = _CLIENT_FINAL.fullmatch(text)
        if match is None:
            raise SaslFailed("Invalid SCRAM client final message format")
        if match.group("nonce") != self._nonce:
            raise SaslFailed("Invalid client nonce in the final client message.")
        assert self._first is not None and self._credential is not None
        without_proof = f"c={match.group('channel')},r={match.group('nonce')}"
        auth_message = f"{self._first[0]},{self._first[1]},{without_proof}".encode()
        proof = base64.b64decode(match.group("proof"))
        credential = self._credential
        signature = self.mechanism.hmac(credential.stored_key, auth_message)
        if len(proof) != len(signature):
            raise SaslFailed("Invalid client credentials")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(self.mechanism.hash(client_key), credential.stored_key):
            raise SaslFailed("Invalid client credentials")
        self.complete = True
        self._credential = None
        server_signature = self.mechanism.hmac(credential.server_key, auth_message)
        return b"v=" + base64.b64encode(server_signature)


class ScramClient:
    """The client side of one exchange: `first()`, `final(server_first)`, `verify(server_final)`."""

    def __init__(self, mechanism: ScramMechanism, user: str, password: str, nonce: str | None = None,
                 salted_cache: dict[tuple[str, bytes, int], bytes] | None = None) -> None:
        self.mechanism = mechanism
        self._password = password
        self._cache = salted_cache
        self._bare = f"n={sasl_name(user)},r={nonce or _nonce()}"
        self._auth_message = b""
        self._salted = b""

    def first(self) -> bytes:
        return f"n,,{self._bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        text = _text(server_first)
        match = _SERVER_FIRST.fullmatch(text)
        client_nonce = self._bare.split(",r=", 1)[1]
        if match is None or not match.group("nonce").startswith(client_nonce):
            raise SaslFailed(f"Invalid SCRAM server first message: {text[:64]!r}")
        iterations = int(match.group("iterations"))
        if iterations < MIN_ITERATIONS:
            raise SaslFailed(f"Server asked for {iterations} iterations, below the minimum {MIN_ITERATIONS}")
        try:
            salt = base64.b64decode(match.group("salt"), validate=True)
        except binascii.Error as exc:
            raise SaslFailed("Invalid salt in the SCRAM server first message") from exc
        key = (self.mechanism.name, salt, iterations)
        cached = self._cache.get(key) if self._cache is not None else None
        self._salted = cached or salted_password(self.mechanism, self._password, salt, iterations)
        if self._cache is not None and cached is None:
            self._cache[key] = self._salted
        without_proof = f"c=biws,r={match.group('nonce')}"
        self._auth_message = f"{self._bare},{text},{without_proof}".encode()
        client_key = self.mechanism.hmac(self._salted, b"Client Key")
        signature = self.mechanism.hmac(self.mechanism.hash(client_key), self._auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> None:
        match = _SERVER_FINAL.fullmatch(_text(server_final))
        if match is None or match.group("error") is not None:
            raise SaslFailed(f"SCRAM server final message: {server_final[:64]!r}")
        expected = self.mechanism.hmac(self.mechanism.hmac(self._salted, b"Server Key"), self._auth_message)
        if not hmac.compare_digest(base64.b64decode(match.group("signature")), expected):
            raise SaslFailed("Invalid server signature in the SCRAM server final message")
