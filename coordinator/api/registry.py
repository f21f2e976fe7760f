"""The one registry of implemented APIs, and what a handler is handed.

Every served API is an `ApiDeclaration` (`declaration.py`; `ApiHandler` names it where a factory
builds one): its key, the versions it really serves, the callable that turns a decoded kio request
into a kio response, and its rules. The ApiVersions answer, the codec's version check and the
README's table of supported APIs are all generated from this registry, so an API is advertised
exactly when, and with exactly the versions that, it is implemented. The registry refuses a
declaration that is not closed (`declaration.check_declared`): start-up stops with one line.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

import msgspec

from .declaration import ApiDeclaration, DeclarationError, check_declared, is_bound

ANONYMOUS = "User:ANONYMOUS"


class RequestContext(msgspec.Struct, frozen=True, gc=False):
    """What a handler may know about the request besides its body."""

    connection_id: int
    client_id: str
    client_host: str
    api_key: int
    api_version: int
    correlation_id: int
    listener: str = "PLAINTEXT"
    """The name of the listener the request arrived on (Metadata answers with its endpoints)."""
    principal: str = ANONYMOUS
    """Who sent it: `User:<name>` after SASL, the certificate's `User:<DN>` on SSL, else ANONYMOUS."""
    authz: Any = None
    """The `security.authorizer.Authorizer` when `authorizer.class.name` is set, else None: a
    handler checks `ctx.authz is not None` before anything else, so no authorizer costs one test."""
    node_id: int | None = None
    """The upstream broker whose listener the request arrived on (sidecar mode's per-broker
    listeners: a client sends it there as to that broker), else None."""


class Deferred(msgspec.Struct, frozen=True, gc=False):
    """A response that is not ready yet: `pending` resolves with a value `convert` turns into it.

    The connection converts when `pending` is done, so a deferred reply costs one future and one
    callback; a second future chained to the first would cost another callback and loop turn per
    reply (a join makes every member of its group wait for a log entry). Cancelling `pending` is
    how the connection says it went away."""

    pending: asyncio.Future[Any]
    convert: Callable[[Any], Any]
    decided: bool = False
    """The response is decided and `pending` waits only for the log to make its own records
    durable (not for other requests: a parked JoinGroup is not decided). The connection may then
    serve its next request meanwhile; the replies still leave in request order."""


def is_pending(result: Any) -> bool:
    """A handler's result that is not the response yet: a `Deferred` or an awaitable."""
    return result.__class__ is Deferred or asyncio.isfuture(result) or asyncio.iscoroutine(result)


async def response_of(result: Any) -> Any:
    """The response a handler's result stands for, awaited if it is pending: for a wrapper that
    does something after the inner handler (cancelling it cancels what it waits for)."""
    if result.__class__ is Deferred:
        return result.convert(await result.pending)
    if asyncio.isfuture(result) or asyncio.iscoroutine(result):
        return await result
    return result


Handler = Callable[[RequestContext, Any], "Any | Awaitable[Any] | Deferred"]
"""Returns the kio response entity of the request's version (or an `EncodedResponse`), an
awaitable of it, or a `Deferred`."""


ApiHandler = ApiDeclaration
"""The name the handler factories use: an API's declaration, with its handler bound."""


class ApiRegistry:
    """api_key -> ApiHandler; built once at start-up."""

    def __init__(self, handlers: Iterable[ApiHandler] = ()) -> None:
        self._handlers: dict[int, ApiHandler] = {}
        for handler in handlers:
            self.add(handler)

    def add(self, handler: ApiHandler) -> None:
        """Raises `DeclarationError` (one line) for an API declared twice or not safely."""
        if handler.api_key in self._handlers:
            raise DeclarationError(f"api {handler.name} (key {handler.api_key}) declared twice")
        check_declared(handler)
        if not is_bound(handler):  # registered without the node's assembly: no checks were bound
            raise DeclarationError(f"api {handler.name} (key {handler.api_key}) registered before it was bound "
                                   "to its shard and checks (node/apis.assemble)")
        self._handlers[handler.api_key] = handler

    def get(self, api_key: int) -> ApiHandler | None:
        return self._handlers.get(api_key)

    def version_ranges(self) -> Mapping[int, tuple[int, int]]:
        return {k: (h.min_version, h.max_version) for k, h in sorted(self._handlers.items())}

    def __iter__(self) -> Any:
        return iter(sorted(self._handlers.values(), key=lambda h: h.api_key))
