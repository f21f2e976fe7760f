"""Helpers shared by the record log tests."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import replace

from coordinator.recordlog import LoadBatch, LogEntry, LogRecord, MemoryFileSystem, RecordLog
from coordinator.recordlog.memfs import MUTATING_OPS
from coordinator.recordlog.record import split_identity
from coordinator.recordlog.segments import Recovery, recover

LOG_DIR = "/data/shard-0"

State = dict[tuple[int, bytes], bytes]


def replay_state(entries: Iterable[LogEntry]) -> State:
    """Latest value per (record_type, key); a tombstone is absence."""
    state: State = {}
    for entry in entries:
        for record in entry.records:
            state_apply(state, record)
    return state


def state_apply(state: State, record: LogRecord) -> None:
    key = (record.record_type, record.key)
    if record.value is None:
        state.pop(key, None)
    else:
        state[key] = record.value


def batch_apply(state: State, batch: LoadBatch) -> None:
    for key, value in batch.items():
        state_apply(state, LogRecord(*split_identity(key), value))


def clone(fs: MemoryFileSystem, directory: str = LOG_DIR) -> MemoryFileSystem:
    """A new filesystem holding a copy of `directory`'s files as they are now."""
    copy = MemoryFileSystem()
    try:
        names = fs.list_dir(directory)
    except FileNotFoundError:
        return copy
    copy.make_dirs(directory)
    for name in names:
        copy.write_file(os.path.join(directory, name), fs.content(os.path.join(directory, name)))
    return copy


def load_all(fs: MemoryFileSystem, directory: str = LOG_DIR, *, window: int = 3, read_chunk: int = 100,
             from_offset: int = 0) -> tuple[State, list[LoadBatch], Recovery]:
    """What loading (`recover(load=...)`) hands over, applied in order; by default in small
    windows over small read chunks, so that batch and chunk boundaries fall everywhere."""
    state: State = {}
    batches: list[LoadBatch] = []

    def sink(batch: LoadBatch) -> None:
        batches.append(batch)
        batch_apply(state, batch)

    recovery = recover(fs, directory, load=sink, window=window,
                       read_chunk=read_chunk, from_offset=from_offset)
    return state, batches, recovery


def read_all(fs: MemoryFileSystem, directory: str = LOG_DIR) -> list[LogEntry]:
    """Entries a restarting coordinator would replay (opens and closes a writer).

    Also loads a copy of the log the way a coordinator does (latest values in small batches)
    and checks that it ends in the same state, with the same recovery."""
    loaded, batches, loaded_recovery = load_all(clone(fs, directory), directory)
    entries: list[LogEntry] = []
    log = RecordLog.open(fs, directory, replay=entries.append)
    log.close()
    assert loaded == replay_state(entries), "loading differs from replaying entry by entry"
    assert sum(b.entries for b in batches) == len(entries)
    assert sum(len(b) for b in batches) == sum(len(e.records) for e in entries)
    if entries:
        assert batches[-1].last_offset == entries[-1].offset
    # The writer may have created the first segment of an empty log after recovering it.
    assert replace(loaded_recovery, segment_bases=log.recovery.segment_bases) == log.recovery
    return entries


def rec(record_type: int, key: str, value: str | None) -> LogRecord:
    return LogRecord(record_type, key.encode(), None if value is None else value.encode())


class SimulatedCrash(Exception):
    """Raised by a MemoryFileSystem hook to stop a workload at a chosen operation."""


def crash_at(fs: MemoryFileSystem, op_number: int) -> None:
    """Make the `op_number`-th mutating filesystem operation (1-based) raise SimulatedCrash."""
    count = 0

    def hook(op: str, path: str) -> None:
        nonlocal count
        if op in MUTATING_OPS:
            count += 1
            if count == op_number:
                fs.hook = None
                raise SimulatedCrash(f"{op} {path}")

    fs.hook = hook


def count_mutating_ops(fs: MemoryFileSystem) -> int:
    return sum(n for op, n in fs.op_counts.items() if op in MUTATING_OPS)
