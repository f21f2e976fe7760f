"""Where a share group starts reading a partition of the embedded data plane: ``share.auto.offset.reset``.

``earliest`` is the log start offset, ``latest`` the high watermark (the read_uncommitted end:
the data plane has no transactions). ``by_duration`` starts at the log end here: the data plane
has no time index to look the timestamp up in, so no record older than the start of serving is
delivered (Kafka would find the first record at or after now minus the duration).
"""

from __future__ import annotations

from uuid import UUID

from ..catalog import TopicSource
from ..core.share.config import AutoOffsetReset
from ..dataplane.log import PartitionStore


class EmbeddedStartOffsets:
    """A :class:`~.apis.StartOffsets` over the data plane's logs."""

    def __init__(self, catalog: TopicSource, store: PartitionStore, reset: AutoOffsetReset) -> None:
        self.catalog = catalog
        self.store = store
        self.reset = reset

    def __call__(self, topic_id: UUID, partition: int) -> int | None:
        topic = self.catalog.by_id(topic_id)
        if topic is None or not 0 <= partition < topic.num_partitions:
            return None
        log = self.store.log(topic, partition)
        return self.reset.start_offset(log.log_start_offset, log.high_watermark)
