"""The coordinator epoch: one record per shard log (type 1000, ours) and the service replaying it.

Each owner that loads a shard's log writes a new ``CoordinatorEpoch`` (``CoordinatorShard.on_loaded``
with a ``writer_id``): the epoch above the last one the log holds, and who wrote it. The runtime
fences a writer whose epoch is not the newest. Declared and replayed like any other owner's records.
"""

from __future__ import annotations

from coordinator.core.record_codec import Record, RecordStruct, RecordTypeDecl
from coordinator.core.registry import Registration

COORDINATOR_EPOCH = 1000


class CoordinatorEpochKey(RecordStruct, frozen=True):
    """Singleton key: there is one coordinator epoch per shard log."""


class CoordinatorEpochValue(RecordStruct, frozen=True):
    epoch: int
    writer_id: str


RECORD_TYPES = (
    RecordTypeDecl(COORDINATOR_EPOCH, "CoordinatorEpoch", CoordinatorEpochKey, {0: CoordinatorEpochValue}),
)


class CoordinatorEpoch:
    """The last coordinator epoch the log holds (None for a log that has none yet)."""

    def __init__(self) -> None:
        self.value: CoordinatorEpochValue | None = None
        self.registration = Registration(
            name="coordinator-epoch", record_types=RECORD_TYPES, replayers={CoordinatorEpochKey: self._replay})

    def record(self, writer_id: str) -> Record:
        """The epoch a new owner of the log writes: one above the last."""
        return Record(CoordinatorEpochKey(), CoordinatorEpochValue(0 if self.value is None else self.value.epoch + 1,
                                                                   writer_id))

    def _replay(self, key: CoordinatorEpochKey, value: CoordinatorEpochValue | None, live: bool) -> None:
        self.value = value
