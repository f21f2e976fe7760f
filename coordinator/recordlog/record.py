"""The record log's data types: opaque records and the entries that group them.

The log knows nothing about record meaning. A record is `(record_type, key, value)`; the identity
used by compaction is `(record_type, key)`; `value is None` is a tombstone. An entry is the
non-empty group of records one handler call produced: it is the atomic unit of replay.

NamedTuples rather than dataclasses: replay builds one object per record (a million at start-up
for a big log) and tuple construction is several times cheaper than a frozen dataclass.

Loading (`load`) names a record by its *identity bytes*: the record type (u16, big-endian), the
key length (u32) and the key, exactly the bytes that precede the value in a frame. One bytes
object, hashed once, is the cheapest dictionary key for `(record_type, key)`; a consumer reads
the type from the first two bytes and the key from `IDENTITY_HEAD_SIZE` on.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

_IDENTITY_HEAD = struct.Struct(">HI")
IDENTITY_HEAD_SIZE = _IDENTITY_HEAD.size


def record_identity(record_type: int, key: bytes) -> bytes:
    """The identity bytes of `(record_type, key)` (see the module docstring)."""
    return _IDENTITY_HEAD.pack(record_type, len(key)) + key


def split_identity(identity: bytes) -> tuple[int, bytes]:
    """Inverse of `record_identity`: `(record_type, key)`."""
    return identity[0] << 8 | identity[1], identity[IDENTITY_HEAD_SIZE:]


class LogRecord(NamedTuple):
    record_type: int  # u16, defined by the core
    key: bytes
    value: bytes | None  # None = tombstone


RawRecord = tuple[int, bytes, bytes | None]
"""What appending takes: a `LogRecord`, or any `(record_type, key, value)` tuple (the log only
unpacks it; building the NamedTuple is a Python call per record)."""


class LogEntry(NamedTuple):
    offset: int  # entry index in the log; strictly increasing, never reused
    timestamp_ms: int  # wall clock of the append; compaction ages tombstones by it
    writer_epoch: int  # epoch of the coordinator that wrote it (fencing)
    records: tuple[LogRecord, ...]
