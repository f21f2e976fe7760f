"""The record log's data types: opaque records and the entries that group them.

The log knows nothing about record meaning. A record is `(record_type, key, value)`; the identity
used by compaction is `(record_type, key)`; `value is None` is a tombstone. An entry is the
non-empty group of records one handler call produced: it is the atomic unit of replay.

NamedTuples rather than dataclasses: replay builds one object per record (a million at start-up
for a big log) and tuple construction is several times cheaper than a frozen dataclass.
"""

from __future__ import annotations

from typing import NamedTuple


class LogRecord(NamedTuple):
    record_type: int  # u16, defined by the core
    key: bytes
    value: bytes | None  # None = tombstone


class LogEntry(NamedTuple):
    offset: int  # entry index in the log; strictly increasing, never reused
    timestamp_ms: int  # wall clock of the append; compaction ages tombstones by it
    writer_epoch: int  # epoch of the coordinator that wrote it (fencing)
    records: tuple[LogRecord, ...]
