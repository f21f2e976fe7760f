"""The embedded data plane: Produce (with idempotent producers), Fetch (with KIP-227 sessions),
ListOffsets and InitProducerId over durable partition logs, so Kafka clients run end to end against
the coordinator with no broker.

Modules: `config` (settings), `batch` (record batch bytes: validation, stamping), `segments`
(partition files on disk, crash recovery), `flusher` (group commit per `log.flush.policy`),
`partition` (one partition's offsets, batch index, memory cache, waiters), `log` (the store:
retention, memory bounds, recovery, appends), `producers` (idempotent producer state),
`producer_ids` (InitProducerId's id blocks), `session` (fetch sessions), `produce`, `fetch`,
`list_offsets`, `init_producer_id` (the API handlers), `handlers` (registry entries), `metrics`.
"""

from .config import DataPlaneConfig
from .handlers import dataplane_handlers
from .log import LEADER_EPOCH, PartitionStore
from .partition import PartitionLog
from .session import FetchSessionCache

__all__ = [
    "LEADER_EPOCH",
    "DataPlaneConfig",
    "FetchSessionCache",
    "PartitionLog",
    "PartitionStore",
    "dataplane_handlers",
]
