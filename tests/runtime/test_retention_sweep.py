"""The server sweeps data-plane retention on `log.retention.check.interval.ms`, so partitions that
nobody writes to still drop expired batches."""

from __future__ import annotations

import time

import pytest

from coordinator.dataplane.batch import parse_header
from coordinator.node.server import CoordinatorServer
from tests.dataplane.records import make_batch
from tests.runtime.conftest import make_config
from tests.support.polling import eventually


@pytest.mark.asyncio
async def test_idle_partition_drops_expired_batches(tmp_path) -> None:
    server = CoordinatorServer(make_config(tmp_path, **{"log.retention.ms": "50", "log.retention.check.interval.ms": "20",
                                                        "topics": "aging:1"}))
    await server.start()
    try:
        topic = server.catalog.get("aging")
        old = int(time.time() * 1000) - 10_000
        batch = make_batch([b"v"], timestamps=[old])
        server.store.append(topic, 0, batch, parse_header(batch))
        log = server.store.log(topic, 0)
        assert (log.log_start_offset, log.log_end_offset) == (0, 1)  # kept until the sweep runs
        await eventually(lambda: log.log_start_offset >= 1, 10, "the expired batch to be dropped")
        assert log.size_bytes == 0
    finally:
        await server.stop()
