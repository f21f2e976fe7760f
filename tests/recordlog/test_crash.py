"""Crash recovery on MemoryFileSystem: a crash at any filesystem operation of a workload loses
no acknowledged entry and never shows a partial one.

"Acknowledged" means a `flush` returned a `durable_end` above the entry's offset. Each test runs
the workload once to count its mutating filesystem operations, then once per operation with a
crash injected just before it, and recovers with three write-back models: nothing unsynced
survives, a few unsynced bytes survive (torn write), everything written survives.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator.recordlog import (
    FlushPolicy,
    LogConfig,
    LogRecord,
    MemoryFileSystem,
    RecordLog,
    compact,
)
from coordinator.recordlog.segments import list_segments
from tests.recordlog.support import (
    LOG_DIR,
    SimulatedCrash,
    State,
    count_mutating_ops,
    crash_at,
    read_all,
    rec,
    replay_state,
    state_apply,
)

KEEP_UNSYNCED = [0, 5, 10**9]


@dataclass
class Progress:
    """What the workload did before it crashed."""

    appended: list[tuple[LogRecord, ...]] = field(default_factory=list)
    acked: int = 0  # entries with offset < acked were reported durable
    clock_ms: int = 0


Workload = Callable[[MemoryFileSystem, Progress], None]


def run_with_crash(
    workload: Workload, op_number: int | None, keep: int
) -> tuple[MemoryFileSystem, Progress]:
    fs = MemoryFileSystem()
    progress = Progress()
    if op_number is not None:
        crash_at(fs, op_number)
    with contextlib.suppress(SimulatedCrash):
        workload(fs, progress)
    fs.hook = None
    fs.crash(keep_unsynced_bytes=keep)
    return fs, progress


def crash_points(workload: Workload) -> range:
    fs = MemoryFileSystem()
    workload(fs, Progress())
    return range(1, count_mutating_ops(fs) + 2)  # the last one: no crash at all


def append(log: RecordLog, progress: Progress, *records: LogRecord) -> None:
    offset = log.append(records, 1_000)
    assert offset == len(progress.appended)
    progress.appended.append(records)


def flush(log: RecordLog, progress: Progress) -> None:
    # A clock that advances 4 ms per flush: under a 10 ms interval policy, most flushes only
    # write, and entries become durable at a later flush, a roll or close.
    progress.clock_ms += 4
    progress.acked = log.flush(now_ms=progress.clock_ms)


def writer_workload_with(config: LogConfig) -> Workload:
    def workload(fs: MemoryFileSystem, progress: Progress) -> None:
        log = RecordLog.open(fs, LOG_DIR, config=config)
        for i in range(6):
            append(log, progress, rec(1, f"k{i}", "v" * (i * 7)))
            if i % 2:
                append(log, progress, rec(2, f"m{i}", None), rec(1, f"k{i}", "w"))
            flush(log, progress)
        log.close()
        progress.acked = len(progress.appended)
        # a clean restart in the middle: recovery and the epoch bump are part of the workload
        log = RecordLog.open(fs, LOG_DIR, config=config)
        for i in range(3):
            append(log, progress, rec(3, f"r{i}", "after restart"))
        flush(log, progress)
        append(log, progress, rec(3, "last", "x"))
        flush(log, progress)
        log.close()

    return workload


WRITER_WORKLOADS = {
    "always": writer_workload_with(LogConfig(segment_bytes=160)),
    "interval": writer_workload_with(
        LogConfig(segment_bytes=160, flush_policy=FlushPolicy.INTERVAL, flush_interval_ms=10)
    ),
}


@pytest.mark.parametrize("policy", WRITER_WORKLOADS)
@pytest.mark.parametrize("keep", KEEP_UNSYNCED)
def test_crash_at_every_operation_keeps_acked_entries_whole(keep: int, policy: str) -> None:
    writer_workload = WRITER_WORKLOADS[policy]
    points = crash_points(writer_workload)
    clean, _ = run_with_crash(writer_workload, None, keep)
    assert len(list_segments(clean, LOG_DIR)) >= 3  # the workload really rolls segments
    for op_number in points:
        fs, progress = run_with_crash(writer_workload, op_number, keep)
        recovered = read_all(fs)
        got = [e.records for e in recovered]
        assert got == progress.appended[: len(got)], f"crash at op {op_number}: not a prefix"
        assert [e.offset for e in recovered] == list(range(len(got)))
        assert len(got) >= progress.acked, f"crash at op {op_number}: lost acknowledged entries"
        # and the recovered log takes appends again
        log = RecordLog.open(fs, LOG_DIR)
        assert log.append([rec(9, "post", "crash")], 0) == len(got)
        log.close()
        assert read_all(fs)[-1].records == (rec(9, "post", "crash"),)


def compaction_workload(fs: MemoryFileSystem, progress: Progress) -> None:
    log = RecordLog.open(fs, LOG_DIR, config=LogConfig(segment_bytes=120))
    for round_ in range(3):
        for i in range(4):
            append(log, progress, rec(1, f"k{i % 3}", f"{round_}-{i}"))
            flush(log, progress)
        append(log, progress, rec(1, "k0", None))  # a tombstone that expires below
        flush(log, progress)
        compact(fs, LOG_DIR, now_ms=1_000 + round_ * 50, delete_retention_ms=100, segment_bytes=400)
    log.close()


def prefix_states(appended: list[tuple[LogRecord, ...]]) -> list[State]:
    states: list[State] = [{}]
    state: State = {}
    for records in appended:
        for record in records:
            state_apply(state, record)
        states.append(dict(state))
    return states


@pytest.mark.parametrize("keep", KEEP_UNSYNCED)
def test_crash_during_compaction_keeps_the_replayed_state(keep: int) -> None:
    points = crash_points(compaction_workload)
    full = Progress()
    compaction_workload(MemoryFileSystem(), full)
    states = prefix_states(full.appended)
    for op_number in points:
        fs, progress = run_with_crash(compaction_workload, op_number, keep)
        state = replay_state(read_all(fs))
        matching = [n for n, s in enumerate(states) if s == state]
        assert matching, f"crash at op {op_number}: state matches no prefix of the workload"
        assert max(matching) >= progress.acked, f"crash at op {op_number}: lost acked entries"


# -- random workloads --------------------------------------------------------------------------

step_st = st.one_of(
    st.tuples(st.just("append"), st.integers(0, 5), st.none() | st.binary(max_size=30)),
    st.tuples(st.just("flush")),
    st.tuples(st.just("compact"), st.integers(0, 3000)),
    st.tuples(st.just("restart")),
)


def random_workload(steps: list[tuple[object, ...]]) -> Workload:
    def workload(fs: MemoryFileSystem, progress: Progress) -> None:
        config = LogConfig(segment_bytes=150)
        log = RecordLog.open(fs, LOG_DIR, config=config)
        for step in steps:
            if step[0] == "append":
                key, value = step[1], step[2]
                assert isinstance(key, int)
                assert value is None or isinstance(value, bytes)
                append(log, progress, LogRecord(1, b"k%d" % key, value))
            elif step[0] == "flush":
                flush(log, progress)
            elif step[0] == "compact":
                assert isinstance(step[1], int)
                compact(fs, LOG_DIR, now_ms=step[1], delete_retention_ms=1000, segment_bytes=300)
            else:
                log.close()
                progress.acked = len(progress.appended)  # close() made everything durable
                log = RecordLog.open(fs, LOG_DIR, config=config)
        log.close()

    return workload


@settings(max_examples=40)
@given(st.lists(step_st, max_size=25), st.integers(1, 200), st.sampled_from(KEEP_UNSYNCED))
def test_random_workload_crash(steps: list[tuple[object, ...]], op_number: int, keep: int) -> None:
    workload = random_workload(steps)
    full = Progress()
    workload(MemoryFileSystem(), full)
    states = prefix_states(full.appended)
    fs, progress = run_with_crash(workload, op_number, keep)
    state = replay_state(read_all(fs))
    matching = [n for n, s in enumerate(states) if s == state]
    assert matching and max(matching) >= progress.acked
