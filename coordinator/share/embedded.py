"""The record source of embedded mode: share partitions read straight from the data plane's logs.

In process and without a request: the batches are the data plane's ``StoredBatch`` bytes (memory
when cached there, else its segment files), read exactly as its Fetch reads them (whole batches
below the high watermark, the first one always). The data plane has no transactions (its Produce
refuses transactional batches), so the last stable offset is the high watermark and no batch is
ever aborted. A partition is found by topic id, so a topic deleted and created again under the
same name is another log, as share-partition state is keyed. A read is capped by the data plane's
``fetch.max.bytes`` as its Fetch is (Kafka caps a share fetch by the broker's too), so no ask of a
client makes one read hold more.
"""

from __future__ import annotations

import asyncio

from coordinator.catalog import TopicSource
from coordinator.dataplane.log import PartitionStore
from protocol.errors import ErrorCode

from .source import (
    CorruptBatch,
    OffsetOutOfRange,
    PartitionRead,
    PartitionRef,
    SourceUnavailable,
    batch_of,
    split_batches,
)


class DataPlaneSource:
    """A :class:`~.source.RecordSource` over the embedded data plane."""

    def __init__(self, catalog: TopicSource, store: PartitionStore) -> None:
        self.catalog = catalog
        self.store = store

    async def read(self, ref: PartitionRef, offset: int, max_bytes: int) -> PartitionRead:
        return self.read_now(ref, offset, max_bytes)

    def read_now(self, ref: PartitionRef, offset: int, max_bytes: int) -> PartitionRead:
        """Always at once: the logs are in process (memory, or a segment file's pages)."""
        topic = self.catalog.by_id(ref.topic_id)
        if topic is None:
            raise SourceUnavailable(ErrorCode.UNKNOWN_TOPIC_ID, f"no topic with id {ref.topic_id} ({ref.topic})")
        if not 0 <= ref.partition < topic.num_partitions:
            raise SourceUnavailable(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{topic.name}-{ref.partition}")
        log = self.store.log(topic, ref.partition)
        if not log.log_start_offset <= offset <= log.log_end_offset:
            raise OffsetOutOfRange(offset, log.log_start_offset)
        try:
            stored = log.read(offset, max(min(max_bytes, self.store.config.fetch_max_bytes), 0), min_one=True)
            batches = [batch_of(raw) for s in stored for raw in split_batches(s.bytes())]
        except (OSError, CorruptBatch) as exc:  # a failing disk, or a segment cut short under us
            raise SourceUnavailable(ErrorCode.KAFKA_STORAGE_ERROR, f"{topic.name}-{ref.partition}: {exc}") from exc
        return PartitionRead(batches, log.log_start_offset, log.high_watermark, log.last_stable_offset)


async def wait_for_append(catalog: TopicSource, store: PartitionStore, refs: list[PartitionRef], timeout_s: float) -> None:
    """Return when one of ``refs``' logs is appended to, or after ``timeout_s`` (ShareFetch's
    ``MaxWaitMs``: the data plane's Fetch parks on its logs the same way)."""
    loop = asyncio.get_running_loop()
    waiter: asyncio.Future[None] = loop.create_future()
    logs = []
    for ref in refs:
        topic = catalog.by_id(ref.topic_id)
        if topic is not None and 0 <= ref.partition < topic.num_partitions:
            logs.append(store.log(topic, ref.partition))
    for log in logs:
        log.add_waiter(waiter)
    try:
        await asyncio.wait((waiter,), timeout=timeout_s)
    finally:
        for log in logs:
            log.discard_waiter(waiter)
        if not waiter.done():
            waiter.cancel()
