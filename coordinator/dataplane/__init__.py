"""The embedded data plane: Produce, Fetch (with KIP-227 sessions) and ListOffsets over in-memory
partition logs, so Kafka clients run end to end against the coordinator with no broker.

Modules: `config` (settings), `batch` (record batch bytes: validation, stamping), `log` (partition
logs, the store, retention and memory caps, long-poll wake-ups), `session` (fetch sessions),
`produce`, `fetch`, `list_offsets` (the API handlers), `handlers` (registry entries), `metrics`.
"""

from .config import DataPlaneConfig
from .handlers import dataplane_handlers
from .log import LEADER_EPOCH, PartitionLog, PartitionStore
from .session import FetchSessionCache

__all__ = [
    "LEADER_EPOCH",
    "DataPlaneConfig",
    "FetchSessionCache",
    "PartitionLog",
    "PartitionStore",
    "dataplane_handlers",
]
