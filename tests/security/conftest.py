from __future__ import annotations

import ssl
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
import pytest_asyncio

from coordinator.config import resolve
from coordinator.node.server import CoordinatorServer
from tests.security.certs import Authority, Pair
from tests.support.wire import WireClient


class Certificates:
    def __init__(self, directory: Path) -> None:
        self.ca = Authority(directory / "ca")
        self.server = self.ca.issue("server", "/CN=localhost", ("127.0.0.1", "localhost"))
        self.alice = self.ca.issue("alice", "/C=FR/O=Example, Inc./OU=eng/CN=alice")
        self.other_ca = Authority(directory / "other", "other-ca")
        self.mallory = self.other_ca.issue("mallory", "/CN=mallory")

    def client_context(self, pair: Pair | None = None) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.ca.cert))
        if pair is not None:
            context.load_cert_chain(str(pair.cert), str(pair.key))
        return context


@pytest.fixture(scope="session")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return Certificates(tmp_path_factory.mktemp("certs"))


def security_config(tmp_path: Path, listeners: str, **overrides: str):
    return resolve(
        environ={},
        overrides=[f"{k}={v}" for k, v in {"group.initial.rebalance.delay.ms": "0", "log.flush.policy": "none",
                                           "history.enable": "false", **overrides}.items()],
        flags={"listeners": listeners, "metrics.listen": "", "log.dirs": str(tmp_path / "data")},
    )


@pytest_asyncio.fixture
async def start_server(tmp_path) -> AsyncIterator[Callable[..., object]]:
    """`await start(listeners, key=value...)` -> a started in-process server (stopped at the end)."""
    started: list[CoordinatorServer] = []

    async def start(listeners: str, **overrides: str) -> CoordinatorServer:
        server = CoordinatorServer(security_config(tmp_path / f"s{len(started)}", listeners, **overrides))
        started.append(server)
        await server.start()
        return server

    yield start
    for server in started:
        await server.stop()


async def connect(port: int, context: ssl.SSLContext | None = None, client_id: str = "security-test") -> WireClient:
    import asyncio

    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context)
    return WireClient(reader, writer, client_id)
