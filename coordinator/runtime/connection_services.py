"""What a client connection sees of the world around it: the node (`ConnectionServices`, built once
by the node and handed to every connection, never the server) and, in sidecar mode, its route to
an upstream broker (`Route`, a protocol the sidecar's route meets). `runtime/connection.py` is
the connection itself."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from .auth import Authorizing, FailedAuthentications

if TYPE_CHECKING:
    from protocol.codec import RequestCodec

    from ..api.registry import ApiRegistry
    from .connection_table import ConnectionTable


class Route(Protocol):
    """What a connection asks of its route to an upstream broker (sidecar mode; the sidecar's
    `sidecar.forwarder.Route` is one): the connection drives it, it never knows the sidecar."""

    local_keys: frozenset[int]
    """The api keys served here; any other frame is forwarded."""
    node_id: int | None
    """The upstream broker the listener stands for (None: the coordinator's own listener)."""

    @property
    def connected(self) -> bool: ...
    @property
    def holding(self) -> bool: ...
    def attach(self, client: asyncio.Transport, flow: Callable[[bool], None] | None = None) -> None: ...
    def pause(self) -> None: ...
    def resume(self) -> None: ...
    def forward(self, frame: bytes | bytearray) -> asyncio.Future[Any]: ...
    def start(self, head: memoryview, size: int) -> asyncio.Future[None] | None: ...
    def more(self, part: memoryview) -> None: ...
    def close(self) -> None: ...



@dataclasses.dataclass(frozen=True, slots=True)
class ConnectionServices:
    """What a connection needs of the node it belongs to, and nothing more (never the server):
    the node builds it once and hands it to every connection."""

    max_request_bytes: int
    """`socket.request.max.bytes`: the largest frame, and what a connection buffers before it pauses."""
    connections: ConnectionTable
    """The node's open connections and its `queued.max.request.bytes` budget."""
    codec: RequestCodec
    registry: ApiRegistry
    authorizer: Authorizing | None
    """Handed to handlers as `ctx.authz`; None without `authorizer.class.name`."""
    auth_failures: FailedAuthentications
    wait_loaded: Callable[[], Awaitable[None]]
    """Resolves once the node's state is loaded: requests wait for it."""
