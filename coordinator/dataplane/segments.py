"""One partition's record batches on disk: segment files, crash recovery, reads, deletion.

Layout: `<root>/<topic id>-<partition>/<base offset, 20 digits>.log`, each segment holding record
batches (magic 2) back to back, exactly the bytes Fetch serves (base offset and leader epoch
stamped). The directory is named by topic id, so a topic deleted and re-created under the same name
starts empty.

Why not the group record log: that log is a keyed, compacted log of opaque entries with its own
framing, writer epochs and compaction. Partition data is append-only batches whose offsets and
bytes are served as they are, and Kafka's batch format already frames (`batchLength`) and checksums
(CRC-32C over attributes..end) itself, so a segment here is Kafka's own `.log` format with nothing
added. What is shared with the record log: the `FileSystem` protocol (tests run on
`MemoryFileSystem`, which models what a crash keeps), `FlushPolicy`, and its two rules: only bytes
covered by an fsync (of the segment and of the directory entries that name it) are acknowledged,
and a segment is fsynced before anything after it counts as durable.

Recovery (as Kafka's `LogSegment.recover`): segments are read in base order; a batch is valid when
it is complete, magic 2, its CRC matches and its base offset is the next expected offset. At the
first invalid batch the segment is truncated there and every later segment is deleted: no byte from
that point on was acknowledged, because acknowledgement waits for the fsync of everything before it
(the torn tail a crash leaves mid-write). The bytes dropped are reported for a warning.

Writes happen on the caller's thread (the event loop: a write() into the page cache); fsyncs happen
in the flusher's thread (`flusher.py`) through `take_sync()` / `SyncJob.run()`: the active handle,
handles of segments rolled since the last sync, and the directories whose entries changed.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, field

from crc32c import crc32c

from coordinator.recordlog.errors import WriteRefused
from coordinator.recordlog.fs import AppendHandle, FileSystem, ReadHandle

from .batch import (
    ATTRIBUTES_OFFSET,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    BatchHeader,
    parse_header,
)

SUFFIX = ".log"
_LENGTH = struct.Struct(">i")
_READ_CHUNK = 8 * 1024 * 1024


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}{SUFFIX}"


def _is_segment(name: str) -> bool:
    return name.endswith(SUFFIX) and len(name) == 20 + len(SUFFIX) and name[:20].isdigit()


class Segment:
    """One segment file: its base offset, its size, and a read handle opened on first read."""

    __slots__ = ("_reader", "base", "fs", "path", "size")

    def __init__(self, fs: FileSystem, path: str, base: int, size: int) -> None:
        self.fs = fs
        self.path = path
        self.base = base
        self.size = size
        self._reader: ReadHandle | None = None

    def read(self, position: int, size: int) -> bytes:
        if self._reader is None:
            self._reader = self.fs.open_read(self.path)
        data = self._reader.read(position, size)
        if len(data) != size:
            raise OSError(f"{self.path}: short read of {size} bytes at {position} ({len(data)})")
        return data

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None


@dataclass(frozen=True, slots=True)
class RecoveredBatch:
    segment: Segment
    position: int
    header: BatchHeader


@dataclass(slots=True)
class SyncJob:
    """What one fsync round must cover for one partition; `run()` is called off the event loop."""

    fs: FileSystem
    handles: list[AppendHandle]
    close_after: list[AppendHandle]
    directories: list[str]
    end_offset: int
    """Every batch below this offset is durable once `run()` returns."""

    def run(self) -> None:
        for handle in self.handles:
            handle.fsync()
        for directory in self.directories:
            self.fs.fsync_dir(directory)
        for handle in self.close_after:
            handle.close()


@dataclass(slots=True)
class Recovery:
    batches: list[RecoveredBatch] = field(default_factory=list)
    next_offset: int = 0
    truncated_bytes: int = 0


class PartitionFiles:
    """The segment files of one partition directory. Use from one thread (the event loop)."""

    def __init__(self, fs: FileSystem, directory: str, segments: list[Segment], sync: bool) -> None:
        self.fs = fs
        self.directory = directory
        self.segments = segments
        self._sync = sync
        self._handle: AppendHandle = fs.open_append(segments[-1].path)
        self._rolled: list[AppendHandle] = []
        self._dirs_dirty: list[str] = []
        self.written_end = 0
        """Offset after the last batch written (set by the store after recovery)."""
        self.synced_end = 0
        self.broken: OSError | None = None
        """A failed write could not be undone: the active segment's end is unknown."""

    # -- opening -------------------------------------------------------------------------------
    @classmethod
    def create(cls, fs: FileSystem, parent: str, name: str, base_offset: int, *, sync: bool) -> PartitionFiles:
        directory = f"{parent}/{name}"
        fs.make_dirs(directory)
        path = f"{directory}/{segment_name(base_offset)}"
        files = cls(fs, directory, [Segment(fs, path, base_offset, 0)], sync)
        files.written_end = files.synced_end = base_offset
        # The new directory and its first segment are durable once the next sync covers them; a
        # partition with nothing durable in it has nothing to lose.
        files._dirs_dirty = [parent, directory]
        return files

    @classmethod
    def recover(cls, fs: FileSystem, directory: str, *, sync: bool) -> tuple[PartitionFiles, Recovery]:
        bases = sorted(int(name[:20]) for name in fs.list_dir(directory) if _is_segment(name))
        if not bases:
            bases = [0]
            fs.open_append(f"{directory}/{segment_name(0)}").close()
        recovery = Recovery(next_offset=bases[0])
        segments: list[Segment] = []
        for i, base in enumerate(bases):
            path = f"{directory}/{segment_name(base)}"
            if base != recovery.next_offset and segments:
                # A gap: the segment before ended early (truncated) or this one is stray.
                recovery.truncated_bytes += _remove(fs, path)
                continue
            segment = Segment(fs, path, base, 0)
            valid, size = _scan(segment, recovery)
            segment.size = valid
            if valid < size:
                handle = fs.open_append(path)
                try:
                    handle.truncate(valid)
                    handle.fsync()
                finally:
                    handle.close()
                recovery.truncated_bytes += size - valid
                segments.append(segment)
                for later in bases[i + 1:]:
                    recovery.truncated_bytes += _remove(fs, f"{directory}/{segment_name(later)}")
                break
            segments.append(segment)
        files = cls(fs, directory, segments, sync)
        files.written_end = files.synced_end = recovery.next_offset
        if recovery.truncated_bytes:
            fs.fsync_dir(directory)
        return files, recovery

    # -- writing -------------------------------------------------------------------------------
    def append(self, data: bytes, base_offset: int, end_offset: int, segment_bytes: int) -> tuple[Segment, int]:
        """Write one stamped batch; returns its segment and position there.

        A write the disk refuses (ENOSPC: a full disk, EDQUOT) is undone: the segment is cut
        back to where it ended, and `WriteRefused` is raised with nothing changed. If the cut
        fails too, the file's end is unknown: this partition refuses every later append (reads
        of what was written before are unaffected; a restart's recovery drops the junk)."""
        if self.broken is not None:
            raise WriteRefused(f"{self.directory}: an earlier write could not be undone", base_offset) \
                from self.broken
        active = self.segments[-1]
        try:
            if active.size and active.size + len(data) > segment_bytes:
                active = self._roll(base_offset)
            position = active.size
            self._handle.write(data)
        except OSError as exc:
            self._undo(active, exc)
            raise WriteRefused(f"{active.path}: write of {len(data)} bytes failed: {exc}", base_offset) from exc
        active.size += len(data)
        self.written_end = end_offset
        if not self._sync:
            self.synced_end = end_offset
        return active, position

    def _undo(self, active: Segment, exc: OSError) -> None:
        """Cut the active segment back to its known size after a failed write (a short write
        may have left part of the batch)."""
        try:
            self._handle.truncate(active.size)
        except OSError as cut:
            cut.__context__ = exc
            self.broken = cut

    def _roll(self, base_offset: int) -> Segment:
        path = f"{self.directory}/{segment_name(base_offset)}"
        handle = self.fs.open_append(path)  # first: if it fails, nothing has changed
        if self._sync:
            self._rolled.append(self._handle)
        else:
            self._handle.close()
        self._handle = handle
        segment = Segment(self.fs, path, base_offset, 0)
        self.segments.append(segment)
        if self.directory not in self._dirs_dirty:
            self._dirs_dirty.append(self.directory)
        return segment

    def take_sync(self) -> SyncJob | None:
        """The fsyncs that make everything written so far durable (None: nothing to do)."""
        if self.written_end == self.synced_end and not self._dirs_dirty:
            return None
        job = SyncJob(self.fs, [*self._rolled, self._handle], self._rolled, self._dirs_dirty, self.written_end)
        self._rolled, self._dirs_dirty = [], []
        return job

    # -- retention -----------------------------------------------------------------------------
    def delete_below(self, offset: int) -> int:
        """Delete closed segments whose every batch is below `offset`; returns bytes deleted.

        The active segment is never deleted: its name keeps the log end offset across a restart.
        """
        freed = 0
        while len(self.segments) > 1 and self.segments[1].base <= offset:
            segment = self.segments.pop(0)
            segment.close()
            self.fs.remove(segment.path)
            freed += segment.size
        return freed

    def close(self) -> None:
        for segment in self.segments:
            segment.close()
        for handle in self._rolled:
            handle.close()
        self._rolled = []
        self._handle.close()

    def remove_all(self, remove_dir: Callable[[str], None] | None) -> None:
        """The topic was deleted: close and delete every file (and the directory if we can)."""
        self.close()
        for segment in self.segments:
            _remove(self.fs, segment.path)
        self.segments = []
        if remove_dir is not None:
            remove_dir(self.directory)


def _remove(fs: FileSystem, path: str) -> int:
    try:
        reader = fs.open_read(path)
        size = reader.size()
        reader.close()
        fs.remove(path)
    except FileNotFoundError:
        return 0
    return size


def _scan(segment: Segment, recovery: Recovery) -> tuple[int, int]:
    """Walk the segment's valid batches into `recovery`; (valid bytes, file size)."""
    reader = segment.fs.open_read(segment.path)
    try:
        size = reader.size()
        position = 0
        buffer = b""
        buffer_at = 0
        while position + LOG_OVERHEAD <= size:
            if position + HEADER_SIZE > buffer_at + len(buffer):
                buffer = reader.read(position, max(_READ_CHUNK, HEADER_SIZE))
                buffer_at = position
            local = position - buffer_at
            if len(buffer) - local < HEADER_SIZE:
                break
            (length,) = _LENGTH.unpack_from(buffer, local + 8)
            batch_size = length + LOG_OVERHEAD
            if batch_size < HEADER_SIZE or position + batch_size > size:
                break
            if local + batch_size > len(buffer):
                buffer = reader.read(position, max(_READ_CHUNK, batch_size))
                buffer_at, local = position, 0
                if len(buffer) < batch_size:
                    break
            header = parse_header(buffer, local)
            if (
                buffer[local + MAGIC_OFFSET] != 2
                or header.base_offset != recovery.next_offset
                or header.last_offset_delta < 0
                or crc32c(memoryview(buffer)[local + ATTRIBUTES_OFFSET: local + batch_size]) != header.crc
            ):
                break
            recovery.batches.append(RecoveredBatch(segment, position, header))
            recovery.next_offset = header.base_offset + header.last_offset_delta + 1
            position += batch_size
        return position, size
    finally:
        reader.close()
