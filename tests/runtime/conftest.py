from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import pytest_asyncio

from coordinator.config import resolve
from coordinator.node.server import CoordinatorServer
from tests.support.wire import WireClient


def make_config(tmp_path, **overrides: str):
    return resolve(
        environ={},
        overrides=[f"{k}={v}" for k, v in {"group.initial.rebalance.delay.ms": "0", **overrides}.items()],
        flags={"listeners": "127.0.0.1:0", "metrics.listen": "127.0.0.1:0", "log.dirs": str(tmp_path / "data")},
    )


@contextlib.asynccontextmanager
async def serving(tmp_path, **overrides: str) -> AsyncIterator[CoordinatorServer]:
    instance = CoordinatorServer(make_config(tmp_path, **overrides))
    await instance.start()
    try:
        yield instance
    finally:
        await instance.stop()


@pytest_asyncio.fixture
async def server(tmp_path) -> AsyncIterator[CoordinatorServer]:
    async with serving(tmp_path) as instance:
        yield instance


@pytest_asyncio.fixture
async def server_with_topic(tmp_path) -> AsyncIterator[CoordinatorServer]:
    """A server whose catalog has topic "t" (2 partitions): OffsetCommit refuses partitions of
    topics it does not know, as Kafka does."""
    async with serving(tmp_path, topics="t:2") as instance:
        yield instance


@pytest_asyncio.fixture
async def client(server: CoordinatorServer) -> AsyncIterator[WireClient]:
    wire = await WireClient.connect(server.port)
    try:
        yield wire
    finally:
        await wire.close()
