"""Log compaction: keep the latest record per (record_type, key), drop old tombstones.

What survives
-------------
Of all records with the same `(record_type, key)` in the compacted segments, only the latest
survives; a surviving tombstone is dropped once `now_ms - entry.timestamp_ms >=
delete_retention_ms` (Kafka's `delete.retention.ms`, default one day: the time a tailing
standby has to read a tombstone before it may vanish). Entries keep their offset, timestamp and
writer epoch, and surviving records keep their order and their entry; entries left empty are
dropped. Replaying the compacted log therefore yields the same latest-value map as replaying the
original, with an expired tombstone equal to absence.

Which segments
--------------
`compact` works on the closed segments only (every segment but the one with the highest base),
so it can run in a thread while the writer appends to the active segment: the two never touch
the same file. It always takes *all* closed segments, from the first: a tombstone may only be
dropped when no older value of its key can survive anywhere before it. `compact_offline` (for
`coordinator log compact`, server stopped, lock held) first recovers the log and starts a new
empty active segment, so everything written so far gets compacted.

How it is written (crash safety)
--------------------------------
Closed segments are taken in order and grouped greedily while the group's input size stays
within `segment_bytes` (the output is never larger than the input), which also merges the small
segments earlier compactions left. For each group, in order:

1. write the surviving entries to `<first base>.log.compacting`, fsync it;
2. rename it over the group's first segment, fsync the directory;
3. remove the group's other segments, fsync the directory (and the first one too if the
   output is empty).

A crash after 2 leaves the first segment compacted and some of the others still present. The
reader's offset rule (skip entries at or below the highest offset read, see `segments`) skips
what the new file covers; the rest are original entries at their original positions, each of
which is either superseded by a later record or an expired tombstone, so the replayed state is
unchanged. Groups are processed in order, so a tombstone is only dropped after every group
before it was durably rewritten without the values it deletes.

One compaction per directory at a time (enforced within a process).
"""

from __future__ import annotations

import bisect
import dataclasses
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass

from coordinator.recordlog.format import encode_entry
from coordinator.recordlog.fs import FileSystem
from coordinator.recordlog.lock import DataDirLock
from coordinator.recordlog.record import LogEntry
from coordinator.recordlog.segments import (
    ReplayFilter,
    list_segments,
    read_closed_segment,
    recover,
    segment_path,
    temp_path,
)
from coordinator.recordlog.writer import DEFAULT_SEGMENT_BYTES

# Kafka's delete.retention.ms default: one day.
DEFAULT_DELETE_RETENTION_MS = 86_400_000
_WRITE_CHUNK = 1024 * 1024


@dataclass(frozen=True)
class CompactionReport:
    segments_before: int  # closed segments compacted
    segments_after: int
    bytes_before: int
    bytes_after: int
    records_before: int
    records_after: int
    superseded_dropped: int  # records with a later record for the same key
    tombstones_dropped: int  # latest records that were tombstones older than the retention
    stale_entries_dropped: int  # duplicate or fenced entries (see `segments`)
    truncated_bytes: int = 0  # torn tail dropped by the recovery of `compact_offline`


def compact(
    fs: FileSystem,
    directory: str,
    *,
    now_ms: int,
    delete_retention_ms: int = DEFAULT_DELETE_RETENTION_MS,
    segment_bytes: int = DEFAULT_SEGMENT_BYTES,
) -> CompactionReport:
    """Compact the closed segments of a live log. Blocking I/O: run it in a thread.

    `now_ms` is wall-clock time, comparable with the entries' `timestamp_ms`.
    """
    with _exclusive(fs, directory):
        bases = list_segments(fs, directory)
        return _compact_segments(
            fs, directory, bases[:-1], now_ms, delete_retention_ms, segment_bytes
        )


def compact_offline(
    fs: FileSystem,
    directory: str,
    lock: DataDirLock,
    *,
    now_ms: int,
    delete_retention_ms: int = DEFAULT_DELETE_RETENTION_MS,
    segment_bytes: int = DEFAULT_SEGMENT_BYTES,
) -> CompactionReport:
    """Recover and compact the whole log of a stopped coordinator.

    `lock` proves the caller holds the data directory lock (no server is writing).
    """
    if not lock.held:
        raise ValueError("compact_offline needs the data directory lock held")
    with _exclusive(fs, directory):
        recovery = recover(fs, directory)
        if recovery.segment_bases and recovery.active_size > 0:
            # Close the active segment by starting an empty one at the next offset. Keeping an
            # active segment (even empty) also keeps next_offset from going back when the last
            # entries are compacted away: offsets are never reused.
            handle = fs.open_append(segment_path(directory, recovery.next_offset))
            handle.close()
            fs.fsync_dir(directory)
        bases = list_segments(fs, directory)
        report = _compact_segments(
            fs, directory, bases[:-1], now_ms, delete_retention_ms, segment_bytes
        )
        return _with_truncated(report, recovery.truncated_bytes)


def _compact_segments(
    fs: FileSystem,
    directory: str,
    closed: list[int],
    now_ms: int,
    delete_retention_ms: int,
    segment_bytes: int,
) -> CompactionReport:
    plan = _plan(fs, directory, closed, now_ms, delete_retention_ms)
    sizes = [_file_size(fs, segment_path(directory, base)) for base in closed]
    segments_after = 0
    bytes_after = 0
    index = 0
    while index < len(closed):
        first = index
        group_size = sizes[index]
        index += 1
        while index < len(closed) and group_size + sizes[index] <= segment_bytes:
            group_size += sizes[index]
            index += 1
        if index - first == 1 and not plan.dirty[first]:
            segments_after += 1  # nothing to drop and nothing to merge: leave the file alone
            bytes_after += group_size
            continue
        written = _rewrite_group(fs, directory, closed, first, index, plan)
        if written:
            segments_after += 1
            bytes_after += written

    return CompactionReport(
        segments_before=len(closed),
        segments_after=segments_after,
        bytes_before=sum(sizes),
        bytes_after=bytes_after,
        records_before=plan.records,
        records_after=plan.records - plan.superseded - len(plan.expired),
        superseded_dropped=plan.superseded,
        tombstones_dropped=len(plan.expired),
        stale_entries_dropped=plan.stale_entries,
    )


@dataclass
class _Plan:
    """Pass 1 over the closed segments: what survives, and which segments change.

    Records are numbered in replay order ("sequence"); pass 2 re-reads a group starting from
    the numbering and reader state saved at its first segment, so the numbers match.
    """

    latest: dict[tuple[int, bytes], int]  # key -> sequence of its latest record
    expired: set[int]  # sequences of latest records that are tombstones past retention
    segment_start: list[int]  # sequence of the first record of each segment
    filter_at_start: list[ReplayFilter]  # reader state before each segment
    dirty: list[bool]  # the segment holds something to drop
    records: int = 0
    superseded: int = 0
    stale_entries: int = 0

    def segment_of(self, sequence: int) -> int:
        return bisect.bisect_right(self.segment_start, sequence) - 1


def _plan(
    fs: FileSystem, directory: str, closed: list[int], now_ms: int, delete_retention_ms: int
) -> _Plan:
    plan = _Plan(latest={}, expired=set(), segment_start=[], filter_at_start=[], dirty=[])
    latest = plan.latest
    expired = plan.expired
    replay_filter = ReplayFilter()
    sequence = 0
    for index, base in enumerate(closed):
        plan.segment_start.append(sequence)
        plan.filter_at_start.append(dataclasses.replace(replay_filter))
        plan.dirty.append(False)
        stale_before = replay_filter.duplicates_skipped + replay_filter.fenced_skipped
        for entry in read_closed_segment(fs, directory, base, replay_filter):
            tombstones_expire = now_ms - entry.timestamp_ms >= delete_retention_ms
            for record in entry.records:
                key = (record.record_type, record.key)
                previous = latest.get(key)
                if previous is not None:
                    plan.superseded += 1
                    plan.dirty[plan.segment_of(previous)] = True
                    expired.discard(previous)
                latest[key] = sequence
                if record.value is None and tombstones_expire:
                    expired.add(sequence)
                sequence += 1
        stale = replay_filter.duplicates_skipped + replay_filter.fenced_skipped - stale_before
        if stale:
            plan.stale_entries += stale
            plan.dirty[index] = True
    plan.records = sequence
    for dropped in expired:
        plan.dirty[plan.segment_of(dropped)] = True
    return plan


def _rewrite_group(
    fs: FileSystem, directory: str, closed: list[int], first: int, end: int, plan: _Plan
) -> int:
    """Steps 1-3 of the module docstring for closed[first:end]; returns bytes written."""
    group = closed[first:end]
    first_path = segment_path(directory, group[0])
    temp = temp_path(directory, group[0])
    replay_filter = dataclasses.replace(plan.filter_at_start[first])
    sequence = plan.segment_start[first]
    latest = plan.latest
    expired = plan.expired
    handle = fs.open_append(temp)
    written = 0
    try:
        handle.truncate(0)  # a temporary left by a failed run in this process
        chunk: list[bytes] = []
        chunk_size = 0
        for entry in _entries(fs, directory, group, replay_filter):
            kept = []
            for record in entry.records:
                if latest[(record.record_type, record.key)] == sequence and sequence not in expired:
                    kept.append(record)
                sequence += 1
            if not kept:
                continue
            frame = encode_entry(entry.offset, entry.writer_epoch, entry.timestamp_ms, kept)
            chunk.append(frame)
            chunk_size += len(frame)
            if chunk_size >= _WRITE_CHUNK:
                handle.write(b"".join(chunk))
                written += chunk_size
                chunk, chunk_size = [], 0
        if chunk:
            handle.write(b"".join(chunk))
            written += chunk_size
        handle.fsync()
    finally:
        handle.close()
    fs.rename(temp, first_path)
    fs.fsync_dir(directory)
    if len(group) > 1:
        for base in group[1:]:
            fs.remove(segment_path(directory, base))
        fs.fsync_dir(directory)
    if not written:
        fs.remove(first_path)
        fs.fsync_dir(directory)
    return written


def _entries(
    fs: FileSystem, directory: str, bases: list[int], replay_filter: ReplayFilter
) -> Iterator[LogEntry]:
    for base in bases:
        yield from read_closed_segment(fs, directory, base, replay_filter)


def _file_size(fs: FileSystem, path: str) -> int:
    handle = fs.open_read(path)
    try:
        return handle.size()
    finally:
        handle.close()


_running: set[tuple[int, str]] = set()
_running_mutex = threading.Lock()


class _exclusive:
    """Refuses a second concurrent compaction of one directory within this process."""

    def __init__(self, fs: FileSystem, directory: str) -> None:
        self._key = (id(fs), os.path.normpath(directory))

    def __enter__(self) -> None:
        with _running_mutex:
            if self._key in _running:
                raise RuntimeError(f"compaction of {self._key[1]} is already running")
            _running.add(self._key)

    def __exit__(self, *exc_info: object) -> None:
        with _running_mutex:
            _running.discard(self._key)


def _with_truncated(report: CompactionReport, truncated_bytes: int) -> CompactionReport:
    return dataclasses.replace(report, truncated_bytes=truncated_bytes)
