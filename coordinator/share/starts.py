"""Where a share group starts reading a partition it never read: ``share.auto.offset.reset``, in either mode.

Embedded mode (:class:`EmbeddedStartOffsets`, answered in the heartbeat's own step): ``earliest``
is the log start offset, ``latest`` the high watermark (the read_uncommitted end: the data plane
has no transactions). ``by_duration`` starts at the log end here: the data plane has no time index
to look the timestamp up in, so no record older than the start of serving is delivered (Kafka
would find the first record at or after now minus the duration).

Sidecar mode (:class:`UpstreamStartOffsets`, looked up after the heartbeat's answer): ListOffsets
to the partition's upstream leader, ``earliest`` (-2), ``latest`` (-1, read_uncommitted: the high
watermark, as Kafka's share partition takes the log end) or, for ``by_duration``, the first offset
at or after now minus the duration (the upstream's time index; none that recent: the log end). A
partition the upstream cannot answer for now (no leader, deleted) gets no start offset: the next
heartbeat asks again.
"""

from __future__ import annotations

import time
from uuid import UUID

from ..catalog import TopicSource
from ..core.share.config import AutoOffsetReset, ResetStrategy
from ..dataplane.log import PartitionStore
from .source import OffsetOutOfRange, PartitionRef, SourceUnavailable
from .upstream import EARLIEST, LATEST, UpstreamSource


class EmbeddedStartOffsets:
    """A :class:`~.apis.StartOffsets` over the data plane's logs."""

    def __init__(self, catalog: TopicSource, store: PartitionStore, reset: AutoOffsetReset) -> None:
        self.catalog = catalog
        self.store = store
        self.reset = reset

    def __call__(self, topic_id: UUID, partition: int, reset: AutoOffsetReset | None = None) -> int | None:
        topic = self.catalog.by_id(topic_id)
        if topic is None or not 0 <= partition < topic.num_partitions:
            return None
        log = self.store.log(topic, partition)
        return (reset or self.reset).start_offset(log.log_start_offset, log.high_watermark)

    async def lookup(self, topic_id: UUID, partition: int, reset: AutoOffsetReset | None = None) -> int | None:
        return self(topic_id, partition, reset)


class UpstreamStartOffsets:
    """A :class:`~.apis.StartOffsets` over the upstream cluster (ListOffsets at the leader)."""

    def __init__(self, catalog: TopicSource, source: UpstreamSource, reset: AutoOffsetReset) -> None:
        self.catalog = catalog
        self.source = source
        self.reset = reset

    def __call__(self, topic_id: UUID, partition: int, reset: AutoOffsetReset | None = None) -> int | None:
        return None  # only the upstream knows: looked up once the heartbeat is answered

    async def lookup(self, topic_id: UUID, partition: int, reset: AutoOffsetReset | None = None) -> int | None:
        reset = reset or self.reset  # the group's own share.auto.offset.reset, else the broker-wide one
        topic = self.catalog.by_id(topic_id)
        if topic is None or not 0 <= partition < topic.num_partitions:
            return None
        ref = PartitionRef(topic_id, topic.name, partition)
        try:
            timestamp = reset.lookup_timestamp(int(time.time() * 1000))
            if timestamp is not None:  # by_duration: the upstream's time index, else the log end
                found = await self.source.offset_for(ref, timestamp)
                return found if found >= 0 else await self.source.offset_for(ref, LATEST)
            earliest = reset.strategy is ResetStrategy.EARLIEST
            return await self.source.offset_for(ref, EARLIEST if earliest else LATEST)
        except (SourceUnavailable, OffsetOutOfRange):
            return None
