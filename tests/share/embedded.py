"""A real embedded data plane for the share data path's tests: a partition store on a temporary
directory (log.flush.policy=always), produced into through the real Produce path (the data plane's
request handlers, kio-encoded requests)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from coordinator.dataplane import DataPlaneConfig
from coordinator.recordlog import FlushPolicy, RealFileSystem
from coordinator.share.source import PartitionRef
from protocol.errors import ErrorCode
from tests.dataplane.harness import Harness
from tests.dataplane.records import make_batch


@asynccontextmanager
async def data_plane(tmp_path: Path, **config: int) -> AsyncIterator[Harness]:
    """`config`: DataPlaneConfig fields (a small `max_bytes` keeps older batches on disk only)."""
    h = Harness(DataPlaneConfig(**config), fs=RealFileSystem(), directory=str(tmp_path / "partitions"),
                flush_policy=FlushPolicy.ALWAYS)
    h.store.start()
    try:
        yield h
    finally:
        await h.store.close()


async def produce(h: Harness, topic: str, batches: list[list[bytes]], partition: int = 0) -> list[int]:
    """Produce each list of values as one batch; their base offsets."""
    bases = []
    for values in batches:
        answer = await h.produce(topic, partition, make_batch(values))
        assert answer.error_code == ErrorCode.NONE, answer
        bases.append(int(answer.base_offset))
    return bases


def ref_of(h: Harness, topic: str, partition: int = 0) -> PartitionRef:
    known = h.catalog.get(topic)
    assert known is not None
    return PartitionRef(known.topic_id, topic, partition)
