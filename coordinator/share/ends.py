"""Where a share partition's log ends, for DescribeShareGroupOffsets' lag: in embedded mode the data
plane's high watermark (it has no transactions, so it is also the last stable offset); in sidecar
mode the last stable offset the upstream's leader reported on the last read of the partition (no
read yet: unknown, lag -1), so describing a group never waits on the upstream."""

from __future__ import annotations

from uuid import UUID

from ..catalog import TopicSource
from ..dataplane.log import PartitionStore
from .source import PartitionRef
from .upstream import UpstreamSource


class EmbeddedEndOffsets:
    """An :class:`~.offsets_apis.EndOffsets` over the data plane's logs."""

    def __init__(self, catalog: TopicSource, store: PartitionStore) -> None:
        self.catalog = catalog
        self.store = store

    def __call__(self, topic_id: UUID, partition: int) -> int | None:
        topic = self.catalog.by_id(topic_id)
        if topic is None or not 0 <= partition < topic.num_partitions:
            return None
        return self.store.log(topic, partition).high_watermark


class UpstreamEndOffsets:
    """An :class:`~.offsets_apis.EndOffsets` over what the upstream's leaders last reported."""

    def __init__(self, catalog: TopicSource, source: UpstreamSource) -> None:
        self.catalog = catalog
        self.source = source

    def __call__(self, topic_id: UUID, partition: int) -> int | None:
        topic = self.catalog.by_id(topic_id)
        if topic is None or not 0 <= partition < topic.num_partitions:
            return None
        return self.source.last_stable(PartitionRef(topic_id, topic.name, partition))
