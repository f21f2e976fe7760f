"""Following a log that another process is appending to (the standby's view of the log).

Poll-based and read-only: each `poll()` (entries) or `load(sink)` (batches of records, as a
coordinator loads at start-up: the standby's way) lists the directory, re-opens the segment it
was reading and decodes from the byte position where it stopped. It never modifies the
directory (recovery belongs to whoever holds the lock).

Rules:

- In the active (last) segment, a torn or corrupt tail is an entry still being written: stop
  there and retry from the same position on the next poll.
- A closed segment is complete (the writer fsyncs before rolling): read it to the end, then move
  to the next segment. A closed segment that ends badly is `CorruptLog`.
- Compaction may replace a closed segment (rename over it) or remove it. The file identity
  (device, inode) tells a replaced file: then we re-read it from byte 0 and the offset rule
  (entries at or below the last offset read are skipped, see `segments`) drops what was
  already returned. A removed segment sends us to the segment with the greatest base offset at
  or below our next offset.
- The writer cuts a write the disk refused back off the active segment, and writes next in a new
  segment (`writer`). A segment found shorter than where this reader stopped in it therefore means
  that entries it returned are gone: `LogRewound`. What was built from them must be rebuilt from a
  new tailer (the standby reloads, the security copy re-reads).
- Compaction can drop a superseded value or an expired tombstone before the tailer has read
  it; the later record that superseded it is still read, so a tailer that keeps up within
  `delete.retention.ms` ends in the same state as the writer.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

from coordinator.recordlog.errors import CorruptLog, LogRewound
from coordinator.recordlog.fs import FileSystem, ReadHandle
from coordinator.recordlog.load import DEFAULT_WINDOW, READ_CHUNK, LoadSink, LoadState, load_segment
from coordinator.recordlog.record import LogEntry
from coordinator.recordlog.segments import (
    ReplayFilter,
    SegmentEnd,
    SegmentReader,
    list_segments,
    segment_path,
)


class LogTailer:
    """Returns the entries appended to a log since the last `poll()`, in order."""

    def __init__(
        self, fs: FileSystem, directory: str, *, from_offset: int = 0, max_epoch: int = 0
    ) -> None:
        self._fs = fs
        self._directory = directory
        self._filter = ReplayFilter(max_offset=from_offset - 1, max_epoch=max_epoch)
        self._base: int | None = None
        self._position = 0
        self._file_id: Hashable | None = None

    @property
    def next_offset(self) -> int:
        """Every entry below this offset has been returned (or was skipped as stale)."""
        return self._filter.max_offset + 1

    @property
    def max_epoch(self) -> int:
        return self._filter.max_epoch

    def poll(self, max_entries: int | None = None) -> list[LogEntry]:
        """Entries appended since the last poll (at most `max_entries`); [] if none yet."""
        out: list[LogEntry] = []
        accept = self._filter.accept

        def read(handle: ReadHandle, position: int) -> SegmentEnd | None:
            reader = SegmentReader(handle, position)
            for entry_position, entry in reader:
                if max_entries is not None and len(out) >= max_entries:
                    self._position = entry_position
                    return None
                if accept(entry):
                    out.append(entry)
            return reader.end

        self._follow(read, lambda: max_entries is None or len(out) < max_entries)
        return out

    def load(self, sink: LoadSink, *, window: int = DEFAULT_WINDOW, read_chunk: int = READ_CHUNK) -> int:
        """Like `poll`, but what was appended goes to `sink` as `LoadBatch`es (see `load`): the
        standby's way, the same reading as a coordinator's start-up. Returns the entries read."""
        replay_filter = self._filter
        state = LoadState(sink, max_offset=replay_filter.max_offset,
                          max_epoch=replay_filter.max_epoch, window=window, read_chunk=read_chunk)

        def read(handle: ReadHandle, position: int) -> SegmentEnd:
            try:
                return SegmentEnd(*load_segment(handle, position, state))
            finally:
                replay_filter.max_offset = state.max_offset
                replay_filter.max_epoch = state.max_epoch

        self._follow(read, lambda: True)
        replay_filter.duplicates_skipped += state.duplicates_skipped
        replay_filter.fenced_skipped += state.fenced_skipped
        state.hand_over(full_only=False)
        return state.entries_loaded

    def _follow(self, read: Callable[[ReadHandle, int], SegmentEnd | None], more: Callable[[], bool]) -> None:
        """Walk the segments from where the last poll stopped, `read`ing each from its position.

        `read` returns where and why the segment's valid data ends, or None when it stopped
        early (having set `_position`); `more()` false stops between segments.
        """
        while more():
            try:
                bases = list_segments(self._fs, self._directory)
            except FileNotFoundError:
                return  # the active coordinator has not created the log yet
            if not bases:
                return
            if self._base not in bases:
                self._start_segment(self._segment_for(bases))
            assert self._base is not None
            is_last = self._base == bases[-1]
            try:
                handle = self._fs.open_read(segment_path(self._directory, self._base))
            except FileNotFoundError:
                self._base = None  # removed by compaction between listing and opening
                continue
            try:
                if handle.file_id != self._file_id:
                    if self._file_id is not None:
                        self._position = 0  # replaced by compaction: re-read, skip what we have
                    self._file_id = handle.file_id
                elif handle.size() < self._position:
                    raise LogRewound(
                        f"segment {segment_path(self._directory, self._base)} is {handle.size()} bytes, shorter"
                        f" than the {self._position} already read: the writer cut back a refused write")
                end = read(handle, self._position)
            finally:
                handle.close()
            if end is None:
                return
            self._position = end.valid_length
            if is_last:
                return  # a partial tail is still being written: next poll
            if not end.clean:
                raise CorruptLog(
                    f"closed segment {segment_path(self._directory, self._base)} is damaged"
                    f" at byte {end.valid_length} ({end.status.value})"
                )
            self._start_segment(min(base for base in bases if base > self._base))

    def _segment_for(self, bases: list[int]) -> int:
        below = [base for base in bases if base <= self.next_offset]
        return below[-1] if below else bases[0]

    def _start_segment(self, base: int) -> None:
        self._base = base
        self._position = 0
        self._file_id = None
