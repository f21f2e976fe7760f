"""Segment files of a log directory: naming, reading in order, and crash recovery.

A log directory holds segment files named by a base offset, zero-padded to 20 digits
(`00000000000000000042.log`), plus at most transient `*.log.compacting` files. A segment holds
frames (see `format`) of entries whose offsets are >= its base and < the next segment's base.
The segment with the highest base is the *active* one; only it is appended to. Others are
*closed*: the writer fsyncs a segment before creating the next one, so a crash can tear only
the tail of the active segment.

Reading a log (replay at start-up, compaction, tailing; entry by entry here, or in one pass for
loading, see `load`) applies three rules:

1. Segments are read in base order; within a segment, reading stops at the first frame that is
   torn or corrupt. In the last segment that is a torn tail (the writer truncates it on open);
   in a closed segment it is `CorruptLog` (data that was acknowledged is damaged).
2. An entry whose offset is <= the highest offset already read is a duplicate and is skipped.
   Duplicates are what an interrupted compaction leaves (it renames its output over the first
   segment of a group before removing the rest; see `compaction`) and what a fenced writer
   racing a new one may leave.
3. An entry whose writer_epoch is lower than the highest epoch already read came from a fenced
   (zombie) writer and is skipped; see `writer` for the fencing rule.

Recovery (`recover`, used by the writer and the offline tools) additionally truncates the torn
tail of the last segment (fsynced) and removes stale compaction temporaries, and reports how
many bytes it dropped so the caller can log it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from coordinator.recordlog.errors import CorruptLog
from coordinator.recordlog.format import FrameStatus, iter_frames
from coordinator.recordlog.fs import FileSystem, ReadHandle
from coordinator.recordlog.load import DEFAULT_WINDOW, READ_CHUNK, LoadSink, LoadState, load_segment
from coordinator.recordlog.record import LogEntry

SEGMENT_SUFFIX = ".log"
TEMP_SUFFIX = ".log.compacting"
_SEGMENT_NAME = re.compile(r"^(\d{20})\.log$")
_READ_CHUNK = 4 * 1024 * 1024


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}{SEGMENT_SUFFIX}"


def segment_path(directory: str, base_offset: int) -> str:
    return os.path.join(directory, segment_name(base_offset))


def temp_path(directory: str, base_offset: int) -> str:
    return os.path.join(directory, f"{base_offset:020d}{TEMP_SUFFIX}")


def parse_segment_name(name: str) -> int | None:
    match = _SEGMENT_NAME.match(name)
    return int(match.group(1)) if match else None


def list_segments(fs: FileSystem, directory: str) -> list[int]:
    """Base offsets of the segments in `directory`, ascending. Other files are ignored."""
    bases = [parse_segment_name(name) for name in fs.list_dir(directory)]
    return sorted(base for base in bases if base is not None)


@dataclass
class SegmentEnd:
    """Where and why reading a segment stopped."""

    valid_length: int  # file position just after the last complete, valid frame
    file_size: int  # bytes in the file when reading stopped
    status: FrameStatus  # END: clean end of file; INCOMPLETE / CORRUPT: damaged tail

    @property
    def clean(self) -> bool:
        return self.status is FrameStatus.END


class SegmentReader:
    """Iterates `(position, entry)` over one open segment, reading in chunks.

    After iteration, `end` says where the valid data stops and why. Decoding never raises
    except `UnsupportedFormatVersion`.
    """

    def __init__(self, handle: ReadHandle, start_position: int = 0) -> None:
        self._handle = handle
        self._start = start_position
        self.end: SegmentEnd | None = None

    def __iter__(self) -> Iterator[tuple[int, LogEntry]]:
        handle = self._handle
        position = self._start  # file position of buf[0]
        buf = b""
        while True:
            chunk = handle.read(position + len(buf), _READ_CHUNK)
            if not chunk:
                status = FrameStatus.END if not buf else FrameStatus.INCOMPLETE
                self.end = SegmentEnd(position, position + len(buf), status)
                return
            buf = buf + chunk if buf else chunk
            consumed, status = yield from iter_frames(buf, position)
            position += consumed
            buf = buf[consumed:]
            if status is FrameStatus.CORRUPT:
                # We stopped reading mid-file: ask for the size so that what a recovery drops
                # is reported whole.
                self.end = SegmentEnd(position, handle.size(), FrameStatus.CORRUPT)
                return


@dataclass
class ReplayFilter:
    """Rules 2 and 3 of the module docstring, with counters.

    `max_offset` covers every valid entry read, skipped or not, so a new writer never reuses an
    offset that exists on disk.
    """

    max_offset: int = -1
    max_epoch: int = 0
    duplicates_skipped: int = 0
    fenced_skipped: int = 0

    def accept(self, entry: LogEntry) -> bool:
        if entry.offset <= self.max_offset:
            self.duplicates_skipped += 1
            return False
        self.max_offset = entry.offset
        if entry.writer_epoch < self.max_epoch:
            self.fenced_skipped += 1
            return False
        self.max_epoch = entry.writer_epoch
        return True


def read_closed_segment(
    fs: FileSystem, directory: str, base: int, replay_filter: ReplayFilter
) -> Iterator[LogEntry]:
    """Accepted entries of a closed segment; raises CorruptLog if it does not end cleanly."""
    handle = fs.open_read(segment_path(directory, base))
    try:
        reader = SegmentReader(handle)
        for _, entry in reader:
            if replay_filter.accept(entry):
                yield entry
        assert reader.end is not None
        if not reader.end.clean:
            raise CorruptLog(_damage(directory, base, reader.end))
    finally:
        handle.close()


@dataclass(frozen=True)
class Recovery:
    """What `recover` found; the writer exposes it as `RecordLog.recovery`."""

    segment_bases: tuple[int, ...]  # ascending; the last one is the active segment
    active_size: int  # bytes of the active segment after truncation
    truncated_bytes: int  # torn/corrupt tail dropped from the active segment (log this!)
    next_offset: int  # offset the next appended entry gets
    max_epoch: int  # highest writer_epoch among replayed entries (0 if none)
    entries_replayed: int  # entries passed to the callback
    entries_read: int  # accepted entries, including those before `from_offset`
    duplicates_skipped: int
    fenced_skipped: int


def recover(
    fs: FileSystem,
    directory: str,
    *,
    replay: Callable[[LogEntry], None] | None = None,
    load: LoadSink | None = None,
    from_offset: int = 0,
    window: int = DEFAULT_WINDOW,
    read_chunk: int = READ_CHUNK,
) -> Recovery:
    """Read the whole log in order, truncate a torn tail of the last segment, clean temporaries.

    What was read goes to at most one of two consumers, from offset `from_offset` on (a standby
    that has already applied earlier entries by tailing passes its tailer's `next_offset`):
    `replay` is called with each accepted entry (tools and tests that need entries); `load`
    receives `LoadBatch`es, the records of runs of entries in order (see `load`; that is what a
    coordinator replays; `window` and `read_chunk` bound a batch). With neither, the log is
    only read and checked. The caller must hold the data directory lock: this modifies the
    directory.
    """
    if replay is not None and load is not None:
        raise ValueError("recover takes replay or load, not both")
    try:
        names = fs.list_dir(directory)
    except FileNotFoundError:
        # A new log: its directory entry must be durable before anything acknowledged is
        # written into it. (Directories above it are the deployment's business.)
        fs.make_dirs(directory)
        fs.fsync_dir(os.path.dirname(os.path.normpath(directory)) or ".")
        names = []
    stale = [name for name in names if name.endswith(TEMP_SUFFIX)]
    for name in stale:
        fs.remove(os.path.join(directory, name))
    if stale:
        fs.fsync_dir(directory)

    bases = list_segments(fs, directory)
    state = LoadState(load, from_offset=from_offset, window=window,
                      read_chunk=read_chunk)
    active_size = 0
    truncated = 0
    for index, base in enumerate(bases):
        is_last = index == len(bases) - 1
        handle = fs.open_read(segment_path(directory, base))
        try:
            if replay is None:
                end = SegmentEnd(*load_segment(handle, 0, state))
            else:
                end = _replay_entries(handle, state, replay)
        finally:
            handle.close()
        if not end.clean and not is_last:
            raise CorruptLog(_damage(directory, base, end))
        if is_last:
            active_size = end.valid_length
            truncated = end.file_size - end.valid_length
            if truncated:
                _truncate(fs, segment_path(directory, base), end.valid_length)
    state.hand_over(full_only=False)

    next_offset = state.max_offset + 1
    if bases:
        next_offset = max(next_offset, bases[-1])
    return Recovery(
        segment_bases=tuple(bases),
        active_size=active_size,
        truncated_bytes=truncated,
        next_offset=next_offset,
        max_epoch=state.max_epoch,
        entries_replayed=state.entries_loaded,
        entries_read=state.entries_read,
        duplicates_skipped=state.duplicates_skipped,
        fenced_skipped=state.fenced_skipped,
    )


def _replay_entries(handle: ReadHandle, state: LoadState, replay: Callable[[LogEntry], None]) -> SegmentEnd:
    """`recover`'s entry-by-entry reading: the rules of `ReplayFilter`, on `state`."""
    reader = SegmentReader(handle)
    # Inlined `ReplayFilter.accept` on locals (same rules, same counters; written back after).
    max_offset = state.max_offset
    max_epoch = state.max_epoch
    from_offset = state.from_offset
    duplicates = fenced = read = replayed = 0
    try:
        for _, entry in reader:
            offset, _, writer_epoch, _ = entry
            if offset <= max_offset:
                duplicates += 1
                continue
            max_offset = offset
            if writer_epoch < max_epoch:
                fenced += 1
                continue
            max_epoch = writer_epoch
            read += 1
            if offset >= from_offset:
                replayed += 1
                replay(entry)
    finally:
        state.max_offset = max_offset
        state.max_epoch = max_epoch
        state.duplicates_skipped += duplicates
        state.fenced_skipped += fenced
        state.entries_read += read
        state.entries_loaded += replayed
    assert reader.end is not None
    return reader.end


def _truncate(fs: FileSystem, path: str, size: int) -> None:
    handle = fs.open_append(path)
    try:
        handle.truncate(size)
        handle.fsync()
    finally:
        handle.close()


def _damage(directory: str, base: int, end: SegmentEnd) -> str:
    return (
        f"closed segment {segment_path(directory, base)} is damaged at byte {end.valid_length}"
        f" of {end.file_size} ({end.status.value}); refusing to continue past acknowledged data"
    )
