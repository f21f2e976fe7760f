"""Shard 0's data plane read over the wire by an embedded shard k >= 1 that holds share groups.

On an embedded node of several shards every partition is led by shard 0 (the data plane is its
process's), while a share group's state lives on the shard its id hashes to. Shard k serves such a
group with sidecar mode's record source (``upstream.UpstreamSource``: Fetch ``read_committed``,
ListOffsets, the append poller), given this stand-in for the upstream cluster: one broker, shard 0,
leading every partition, reached over one connection to its forwarding listener
(``inter.broker.listener.name``, with that listener's TLS and the node's own SASL credentials,
``security/peers.py``), as shard 0 reaches shard k with ShareForward. So there is no second Fetch
client and no second poller.

- **The connection.** Opened on the first call and again after it fails, closes (shard 0
  restarting) or leaves a call unanswered for ``CALL_TIMEOUT_S``: a call that cannot reach shard 0
  raises ``ForwardError``, which the source turns into
  a retriable ``SourceUnavailable`` (LEADER_NOT_AVAILABLE), one line and no traceback.
- **Versions.** Shard 0 is this same program, so each request is sent at the highest version the
  source asks for (all within what the data plane serves).
- **Topics.** By name, from the shared catalog (``catalog/shared.py``): every shard reads the same
  ``topics.json``, so the ids a client names are the ones shard 0 knows.
- **Authorization.** Shard 0 checks these requests as any client's: with an authorizer, the
  coordinator's user on the forwarding listener (``User:ANONYMOUS`` over PLAINTEXT) needs READ and
  DESCRIBE on the topics share groups read (or to be a super user).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from ..catalog import TopicSource
from ..runtime.apis.view import Node
from ..security.upstream import UpstreamSecurity
from ..sidecar.upstream import UpstreamConnection
from ..sidecar.wire import ForwardError

CONNECT_TIMEOUT_S = 5.0
"""Shard 0 not accepting (and authenticating) a connection within this: the read is unavailable now."""
CALL_TIMEOUT_S = 10.0
"""Shard 0 not answering a read within this (every read is sent with no wait): the connection is
closed and reopened by the next call, as the sidecar's upstream client does."""


class ShardZeroClient:
    """The ``call_node``/``call_any`` part of ``UpstreamClient``, every call to shard 0."""

    def __init__(self, shard_zero: Callable[[], Node], security: UpstreamSecurity | None) -> None:
        self._shard_zero = shard_zero
        self._security = security
        self._opening: asyncio.Future[UpstreamConnection] | None = None

    async def call_node(self, node_id: int, api_key: int, request: Any) -> Any:
        connection = await self._connection()
        try:
            return await asyncio.wait_for(connection.call(api_key, request), CALL_TIMEOUT_S)
        except TimeoutError as exc:  # shard 0 stalled: later requests on this connection would queue behind
            connection.close()
            raise ForwardError(f"shard 0 at {connection.address}: no answer within {CALL_TIMEOUT_S:.0f} s") from exc

    async def call_any(self, api_key: int, request: Any) -> tuple[Any, str]:
        node = self._shard_zero()
        return await self.call_node(node.node_id, api_key, request), f"{node.host}:{node.port}"

    async def _connection(self) -> UpstreamConnection:
        opening = self._opening
        if opening is not None and opening.done() and (
                opening.cancelled() or opening.exception() is not None or opening.result().closed):
            opening = None
        if opening is None:
            node = self._shard_zero()
            opening = asyncio.ensure_future(UpstreamConnection.open(node.host, node.port, CONNECT_TIMEOUT_S,
                                                                    self._security))
            opening.add_done_callback(_retrieved)
            self._opening = opening
        return await asyncio.shield(opening)


class ShardZeroCluster:
    """What ``UpstreamSource`` reads of an ``UpstreamCluster``: shard 0 as the one broker."""

    def __init__(self, catalog: TopicSource, shard_zero: Callable[[], Node],
                 security: UpstreamSecurity | None) -> None:
        self.catalog = catalog
        self._shard_zero = shard_zero
        self.client = ShardZeroClient(shard_zero, security)

    @property
    def brokers(self) -> dict[int, tuple[str, int]]:
        node = self._shard_zero()
        return {node.node_id: (node.host, node.port)}

    def version_for(self, api_key: int, highest: int, lowest: int = 0) -> int | None:
        return highest  # shard 0 runs this program: it serves what the source sends

    def request_refresh(self) -> None:
        """Nothing to refresh: shard 0 leads every partition; a failed connection is reopened on the next call."""


def _retrieved(future: asyncio.Future[UpstreamConnection]) -> None:
    if not future.cancelled():
        future.exception()  # a failed open is answered to its callers; never "exception was never retrieved"
