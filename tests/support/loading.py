"""Loading a shard from records the way the server loads its log, for the core and simulation tests.

The records are written to a record log on the in-memory filesystem (one entry per group of
records, as the runtime appends one entry per ``Result``) and loaded with
``RecordLog.open(load=Replayer(shard))``: the server's start-up path (offset commit values stored
encoded, their places carried across batches). Small batches and read chunks make their boundaries
fall everywhere.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from coordinator.core.config import GroupConfig
from coordinator.core.records import Record
from coordinator.core.registry import GroupTypeFactory
from coordinator.core.shard import GROUP_TYPES, CoordinatorShard, ShardService
from coordinator.recordlog import FlushPolicy, LogConfig, LogRecord, MemoryFileSystem, RecordLog
from coordinator.recordlog.segments import recover
from coordinator.runtime.ownership import Replayer

LOG_DIR = "/log"


def loaded(entries: Iterable[Sequence[Record]], config: GroupConfig, *, window: int = 5,
           read_chunk: int = 512, services: Callable[[], Sequence[ShardService]] = tuple,
           group_types: Sequence[GroupTypeFactory] = GROUP_TYPES) -> CoordinatorShard:
    """A fresh shard that loaded ``entries`` (each a non-empty or empty group of records), with
    the shard services ``services()`` makes (none by default) and the given group types (the
    built-in ones by default). The log is written with the shard's own codec."""
    shard = CoordinatorShard(config, services=services(), group_types=group_types)
    encode_record = shard.codec.encode_record
    fs = MemoryFileSystem()
    writer = RecordLog.open(fs, LOG_DIR, config=LogConfig(flush_policy=FlushPolicy.NONE, segment_bytes=4096))
    written = 0
    for records in entries:
        if records:
            writer.append([LogRecord(*encode_record(record)) for record in records], 0)
            written += len(records)
    writer.close()
    replayer = Replayer(shard)
    recover(fs, LOG_DIR, load=replayer, window=window, read_chunk=read_chunk)
    assert replayer.records == written and replayer.skipped_unknown == 0
    return shard
