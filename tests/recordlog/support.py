"""Helpers shared by the record log tests."""

from __future__ import annotations

from collections.abc import Iterable

from coordinator.recordlog import LogEntry, LogRecord, MemoryFileSystem, RecordLog
from coordinator.recordlog.memfs import MUTATING_OPS

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


def read_all(fs: MemoryFileSystem, directory: str = LOG_DIR) -> list[LogEntry]:
    """Entries a restarting coordinator would replay (opens and closes a writer)."""
    entries: list[LogEntry] = []
    log = RecordLog.open(fs, directory, replay=entries.append)
    log.close()
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
