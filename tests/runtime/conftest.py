from __future__ import annotations

from collections.abc import AsyncIterator

import pytest_asyncio

from coordinator.config import resolve
from coordinator.runtime.server import CoordinatorServer
from tests.support.wire import WireClient


def make_config(tmp_path, **overrides: str):
    return resolve(
        environ={},
        overrides=[f"{k}={v}" for k, v in {"group.initial.rebalance.delay.ms": "0", **overrides}.items()],
        flags={"listeners": "127.0.0.1:0", "metrics.listen": "127.0.0.1:0", "log.dirs": str(tmp_path / "data")},
    )


@pytest_asyncio.fixture
async def server(tmp_path) -> AsyncIterator[CoordinatorServer]:
    instance = CoordinatorServer(make_config(tmp_path))
    await instance.start()
    try:
        yield instance
    finally:
        await instance.stop()


@pytest_asyncio.fixture
async def client(server: CoordinatorServer) -> AsyncIterator[WireClient]:
    wire = await WireClient.connect(server.port)
    try:
        yield wire
    finally:
        await wire.close()
