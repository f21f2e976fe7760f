"""Following a log that another process is appending to (the standby's view of the log).

Poll-based and read-only: each `poll()` lists the directory, re-opens the segment it was
reading and decodes from the byte position where it stopped. It never modifies the directory
(recovery belongs to whoever holds the lock).

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
- Compaction can drop a superseded value or an expired tombstone before the tailer has read
  it; the later record that superseded it is still read, so a tailer that keeps up within
  `delete.retention.ms` ends in the same state as the writer.
"""

from __future__ import annotations

from collections.abc import Hashable

from coordinator.recordlog.errors import CorruptLog
from coordinator.recordlog.fs import FileSystem
from coordinator.recordlog.record import LogEntry
from coordinator.recordlog.segments import ReplayFilter, SegmentReader, list_segments, segment_path


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
        while max_entries is None or len(out) < max_entries:
            try:
                bases = list_segments(self._fs, self._directory)
            except FileNotFoundError:
                return out  # the active coordinator has not created the log yet
            if not bases:
                return out
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
                reader = SegmentReader(handle, self._position)
                for position, entry in reader:
                    if max_entries is not None and len(out) >= max_entries:
                        self._position = position
                        return out
                    if self._filter.accept(entry):
                        out.append(entry)
                end = reader.end
                assert end is not None
            finally:
                handle.close()
            self._position = end.valid_length
            if is_last:
                return out  # a partial tail is still being written: next poll
            if not end.clean:
                raise CorruptLog(
                    f"closed segment {segment_path(self._directory, self._base)} is damaged"
                    f" at byte {end.valid_length} ({end.status.value})"
                )
            self._start_segment(min(base for base in bases if base > self._base))
        return out

    def _segment_for(self, bases: list[int]) -> int:
        below = [base for base in bases if base <= self.next_offset]
        return below[-1] if below else bases[0]

    def _start_segment(self, base: int) -> None:
        self._base = base
        self._position = 0
        self._file_id = None
