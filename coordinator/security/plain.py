"""SASL/PLAIN (RFC 4616) as Kafka's PlainSaslServer checks it.

The one client message is `authzid NUL authcid NUL password` (UTF-8). Users and passwords are the
listener's JAAS `user_<name>="<password>"` options. Kafka's messages, shown to the client:
"Authentication failed: username not specified", "... password not specified", "... Invalid
username or password", "... Client requested an authorization id that is different from username".
A message that is not three tokens is a generic failure. Passwords are compared in constant time.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping

from .scram import SaslFailed


class PlainServer:
    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self.user: str | None = None
        self.complete = False

    def evaluate(self, message: bytes) -> bytes:
        if self.complete:
            raise SaslFailed("Unexpected challenge in Sasl server state COMPLETE")
        try:
            text = message.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise SaslFailed("Invalid SASL/PLAIN response: not UTF-8") from exc
        tokens = text.split("\0")
        if len(tokens) != 3:
            raise SaslFailed(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(tokens)}")
        authzid, user, password = tokens
        if not user:
            raise SaslFailed("Authentication failed: username not specified", public=True)
        if not password:
            raise SaslFailed("Authentication failed: password not specified", public=True)
        expected = self._users.get(user)
        # Compare against something even for an unknown user, so timing does not tell them apart.
        matches = hmac.compare_digest((expected or "\0" + password).encode(), password.encode())
        if expected is None or not matches:
            raise SaslFailed("Authentication failed: Invalid username or password", public=True)
        if authzid and authzid != user:
            raise SaslFailed("Authentication failed: Client requested an authorization id that is different "
                             "from username", public=True)
        self.user = user
        self.complete = True
        return b""
