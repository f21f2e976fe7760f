"""One listener of our own per upstream broker, on a port that does not move.

Port rule: upstream broker N is presented at `sidecar.listener.base.port + N`, bound on the host of
`listeners` and advertised on `sidecar.listener.advertised.host` (default: the host of
`advertised.listeners`, itself defaulting to `listeners`). The rule
depends only on configuration and the broker's node id, so a restarted coordinator or a standby
taking over opens the same ports and clients' cached metadata stays valid. The coordinator's own
node (FindCoordinator for groups) is the `listeners` address, with id `sidecar.node.id`; with
several shards (`coordinator.shards`) shard k is node `sidecar.node.id + k` on each listener's port + k.

With several shards every shard opens every broker's listener, with SO_REUSEPORT: the kernel hands
each new client connection to one of the shards listening, so forwarding uses every process (per
connection, whatever the number of brokers), and a shard that dies takes only its own connections
with it (clients reconnect and land on a live shard). Forwarding keeps no state beyond a
connection, so any shard can carry any broker's connections. One shard binds as before (no
SO_REUSEPORT): a second process on the same ports is refused rather than shares them.

With the log upstream (`coordinator.log.storage=upstream`) the instances share these ports too
(SO_REUSEPORT, on one host) or stand behind one advertised host (`sidecar.listener.advertised.host`):
broker N has one address whichever instance a client asked, and it outlives any one instance.

Listeners are opened only by the data directory's owner (a standby opens them when it takes over),
for every broker in the latest upstream Metadata; a broker that appears later gets its listener on
the refresh that shows it. A port that cannot be bound is logged and tried again on the next refresh.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable, Sequence

from ..logging import get_logger

log = get_logger("coordinator.sidecar.listeners")

MAX_PORT = 65535


class ListenerSet:
    def __init__(self, bind_host: str, advertised_host: str, base_port: int,
                 coordinators: Callable[[], Sequence[tuple[int, str, int]]],
                 factory: Callable[[int], asyncio.BaseProtocol], *, reuse_port: bool = False) -> None:
        self.bind_host = bind_host
        self.advertised_host = advertised_host
        self.base_port = base_port
        self._coordinators = coordinators
        self._factory = factory
        self.reuse_port = reuse_port
        """Several shards open the same ports (SO_REUSEPORT)."""
        self._servers: dict[int, asyncio.Server] = {}
        self._wanted: set[int] = set()
        self._active = False
        self._opening: asyncio.Task[None] | None = None
        self.ssl_context: ssl.SSLContext | None = None
        """TLS of the coordinator's first listener, which these listeners serve like (set by the server)."""

    # -- Endpoints ----------------------------------------------------------------------------
    def address(self, node_id: int) -> tuple[str, int]:
        return self.advertised_host, self.base_port + node_id

    @property
    def coordinators(self) -> Sequence[tuple[int, str, int]]:
        """The coordinator's own nodes (one per shard, shard 0 first): id, advertised host and port."""
        return self._coordinators()

    def port(self, node_id: int) -> int:
        return self.base_port + node_id

    # -- lifecycle ----------------------------------------------------------------------------
    def update(self, node_ids: set[int]) -> None:
        """The upstream's brokers as last read; listeners open for new ones (when active)."""
        self._wanted |= node_ids
        self._schedule()

    async def activate(self) -> None:
        """This process owns the data directory: open every wanted listener."""
        self._active = True
        await self._open_missing()

    async def settled(self) -> None:
        """Until the listeners of the brokers known so far are open (or failed to open): readiness
        waits for this, so a client handed a broker's listener finds it open."""
        while self._opening is not None and not self._opening.done():
            await asyncio.wait({self._opening})

    @property
    def open_ports(self) -> dict[int, int]:
        return {node_id: self.port(node_id) for node_id in self._servers}

    def _schedule(self) -> None:
        if self._active and (self._opening is None or self._opening.done()):
            self._opening = asyncio.create_task(self._open_missing(), name="sidecar-listeners")

    async def _open_missing(self) -> None:
        loop = asyncio.get_running_loop()
        for node_id in sorted(self._wanted - set(self._servers)):
            port = self.port(node_id)
            if not 0 < port <= MAX_PORT:
                log.error("sidecar_listener_port_out_of_range", node_id=node_id, port=port,
                          base_port=self.base_port)
                continue
            try:
                self._servers[node_id] = await loop.create_server(
                    lambda n=node_id: self._factory(n), self.bind_host, port, reuse_address=True,
                    reuse_port=self.reuse_port or None, ssl=self.ssl_context)
            except OSError as exc:
                log.error("sidecar_listener_failed", node_id=node_id, listen=f"{self.bind_host}:{port}",
                          error=str(exc))
                continue
            log.info("sidecar_listener_open", node_id=node_id, listen=f"{self.bind_host}:{port}",
                     advertised=f"{self.advertised_host}:{port}")

    def close(self) -> None:
        self._active = False
        if self._opening is not None:
            self._opening.cancel()
        for server in self._servers.values():
            server.close()

    async def wait_closed(self) -> None:
        for server in self._servers.values():
            await server.wait_closed()
        self._servers.clear()
