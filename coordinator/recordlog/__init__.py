"""Durable compacted record log, generic over opaque records.

The server runtime needs only what is exported here:

- `LogRecord`, `LogEntry`: what is appended and what replay yields.
- `RecordLog.open(...)`: recover a log directory (torn tail truncated, reported in
  `.recovery`), hand what it holds to a callback (`load`: `LoadBatch`es, the records in order;
  or `replay`: entry by entry), and open it
  for appending; `LogConfig`, `FlushPolicy`.
- `GroupCommitter`: the asyncio group-commit task over a `RecordLog`.
- `compact` (live, closed segments, run in a thread) and `compact_offline` (CLI).
- `try_lock_data_dir` / `lock_data_dir` and `LogTailer`: standby failover.
- `RealFileSystem` / `MemoryFileSystem` behind the `FileSystem` protocol.
- Errors: `RecordLogError` and its subclasses.

Module map: `format` (bytes of an entry), `fs` / `memfs` (filesystems), `segments` (files,
reading rules, recovery), `load` (reading for replay, in one pass), `writer` (append, batches,
fsync policy, rolling, fencing), `committer` (asyncio) over `disk_thread` (its one worker
thread), `compaction`, `lock`, `tail`.
"""

from coordinator.recordlog.committer import GroupCommitter
from coordinator.recordlog.compaction import (
    DEFAULT_DELETE_RETENTION_MS,
    CompactionReport,
    compact,
    compact_offline,
)
from coordinator.recordlog.errors import (
    CorruptEntry,
    CorruptLog,
    FencedWriter,
    LogFailed,
    LogRewound,
    RecordLogError,
    UnsupportedFormatVersion,
    WriteRefused,
)
from coordinator.recordlog.format import decode_entry, encode_entry
from coordinator.recordlog.fs import FileSystem, RealFileSystem
from coordinator.recordlog.load import LoadBatch
from coordinator.recordlog.lock import DataDirLock, lock_data_dir, try_lock_data_dir
from coordinator.recordlog.memfs import MemoryFileSystem
from coordinator.recordlog.record import LogEntry, LogRecord
from coordinator.recordlog.segments import Recovery
from coordinator.recordlog.tail import LogTailer
from coordinator.recordlog.writer import (
    DEFAULT_FLUSH_INTERVAL_MS,
    DEFAULT_SEGMENT_BYTES,
    FlushPolicy,
    LogConfig,
    RecordLog,
)

__all__ = [
    "DEFAULT_DELETE_RETENTION_MS",
    "DEFAULT_FLUSH_INTERVAL_MS",
    "DEFAULT_SEGMENT_BYTES",
    "CompactionReport",
    "CorruptEntry",
    "CorruptLog",
    "DataDirLock",
    "FencedWriter",
    "FileSystem",
    "FlushPolicy",
    "GroupCommitter",
    "LoadBatch",
    "LogConfig",
    "LogEntry",
    "LogFailed",
    "LogRecord",
    "LogRewound",
    "LogTailer",
    "MemoryFileSystem",
    "RealFileSystem",
    "RecordLog",
    "RecordLogError",
    "Recovery",
    "UnsupportedFormatVersion",
    "WriteRefused",
    "compact",
    "compact_offline",
    "decode_entry",
    "encode_entry",
    "lock_data_dir",
    "try_lock_data_dir",
]
