"""Where a partition of the embedded data plane ends, for DescribeShareGroupOffsets' lag: the high
watermark (the data plane has no transactions, so it is also the last stable offset)."""

from __future__ import annotations

from uuid import UUID

from ..catalog import TopicSource
from ..dataplane.log import PartitionStore


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
