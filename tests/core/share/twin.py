"""A live set of share partitions and its log: every step's records are encoded into the log, and
:meth:`Twin.check` rebuilds the partitions from the log bytes (whole, and compacted as the record
log compacts: the last value of each key, at its last position) and compares them with the live ones."""

from __future__ import annotations

from uuid import UUID

from coordinator.core.share.config import ShareConfig
from coordinator.core.share.partition import SharePartition
from coordinator.core.share.records import (
    RecordState,
    ShareRecord,
    decode_share_record,
    encode_share_record,
)
from coordinator.core.share.state import SharePartitions, initialize

GROUP = "queue"
TOPIC = UUID("0b9e8f3c-1d2a-4c5b-8e7f-6a5b4c3d2e1f")


def check_summaries(p: SharePartition) -> None:
    """The partition's per-batch summaries answer what a walk over every offset answers."""
    available = [o for o in range(p.start_offset, p.next_offset)
                 if o in p.offsets and p.offsets[o].state is RecordState.AVAILABLE]
    assert p.next_fetch_offset() == (available[0] if available else p.next_offset)
    deadlines = [s.lock_deadline for s in p.offsets.values() if s.state is RecordState.ACQUIRED]
    assert p.next_lock_deadline() == (min(deadlines) if deadlines else None)


class Twin:
    def __init__(self, start_offset: int = 0, config: ShareConfig | None = None) -> None:
        self.config = config or ShareConfig()
        self.partitions = SharePartitions()
        self.log: list[tuple[int, bytes, bytes | None]] = []
        self.log_records(initialize(self.partitions, GROUP, TOPIC, 0, start_offset))

    @property
    def p(self) -> SharePartition:
        p = self.partitions.get(GROUP, TOPIC, 0)
        assert p is not None
        return p

    def log_records(self, records: list[ShareRecord]) -> list[ShareRecord]:
        self.log.extend(encode_share_record(r) for r in records)
        self.check()
        return records

    def replayed(self, entries: list[tuple[int, bytes, bytes | None]]) -> SharePartitions:
        rebuilt = SharePartitions()
        for rtype, key, value in entries:
            rebuilt.replay(decode_share_record(rtype, key, value))
        return rebuilt

    def compacted(self) -> list[tuple[int, bytes, bytes | None]]:
        last: dict[tuple[int, bytes], int] = {}
        for i, (rtype, key, _) in enumerate(self.log):
            last[(rtype, key)] = i
        return [self.log[i] for i in sorted(last.values()) if self.log[i][2] is not None]

    def check(self) -> None:
        live = self.partitions.get(GROUP, TOPIC, 0)
        for entries in (self.log, self.compacted()):
            rebuilt = self.replayed(entries).get(GROUP, TOPIC, 0)
            assert (rebuilt.view() if rebuilt else None) == (live.view() if live else None)
            if rebuilt is not None:
                check_summaries(rebuilt)
        if live is not None:
            check_summaries(live)

    def crash(self) -> Twin:
        """A new coordinator loading the (compacted) log."""
        other = Twin.__new__(Twin)
        other.config = self.config
        other.log = self.compacted()
        other.partitions = self.replayed(other.log)
        return other
