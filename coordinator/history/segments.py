"""History segment files in `<data-dir>/history/`: naming, appending, rotation, retention, reading.

Layout
------
Each segment is a JSON-lines file of rows (`coordinator.history.schema`), named by the sequence
number and timestamp of its first row, plus — once closed — the timestamp of its last row:

    00000000000000000042-1718000000000.jsonl                  active (being appended to)
    00000000000000000042-1718000000000-1718000100000.jsonl    closed

Names sort by sequence number, so the directory listing is the history in order, and readers can
skip segments outside a time range without opening them.

Rules
-----
- One process appends (the coordinator holds the data directory lock); readers may read while it
  writes. A reader tolerates an incomplete last line of the active segment.
- The active segment is closed (renamed with its last timestamp) once it holds `segment_bytes` or
  once `segment_ms` has passed since its first row; the next row opens a new one.
- Retention deletes closed segments whose last row is older than `retention_ms` (-1 keeps all).
- On open, a segment left active by a previous process is closed: a torn last line (a crash in the
  middle of a write) is cut off, its rows counted so sequence numbers continue.
- No fsync: the history is an observability stream, not durable state. A crash loses at most the
  rows not yet written (the writer's flush interval) plus what the OS had not written back; the
  record log, not the history, is the truth.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

SUFFIX = ".jsonl"
_decoder = msgspec.json.Decoder()


@dataclass(frozen=True, slots=True)
class Segment:
    path: Path
    base_seq: int
    first_ts: int
    last_ts: int | None
    """None while the segment is active."""

    @property
    def closed(self) -> bool:
        return self.last_ts is not None


def parse_name(path: Path) -> Segment | None:
    if not path.name.endswith(SUFFIX):
        return None
    parts = path.name[: -len(SUFFIX)].split("-")
    if len(parts) not in (2, 3) or not all(p.isdigit() for p in parts):
        return None
    last = int(parts[2]) if len(parts) == 3 else None
    return Segment(path, int(parts[0]), int(parts[1]), last)


def list_segments(directory: Path) -> list[Segment]:
    """The segments of a history directory in sequence order (missing directory: none)."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    found = [s for s in (parse_name(directory / n) for n in names) if s is not None]
    return sorted(found, key=lambda s: s.base_seq)


def _segment_name(base_seq: int, first_ts: int, last_ts: int | None = None) -> str:
    name = f"{base_seq:020d}-{first_ts:013d}"
    return f"{name}-{last_ts:013d}{SUFFIX}" if last_ts is not None else f"{name}{SUFFIX}"


def _scan(path: Path) -> tuple[int, int | None, int]:
    """(complete rows, last row's ts_ms, bytes of complete rows) of a segment file."""
    data = path.read_bytes()
    end = data.rfind(b"\n") + 1
    rows = data.count(b"\n", 0, end)
    last_ts: int | None = None
    if end:
        start = data.rfind(b"\n", 0, end - 1) + 1
        try:
            last_ts = int(_decoder.decode(data[start:end])["ts_ms"])
        except (msgspec.DecodeError, KeyError, TypeError, ValueError):
            last_ts = None
    return rows, last_ts, end


class SegmentLog:
    """Appends encoded rows to segment files with rotation and retention. Not thread-safe: one
    thread at a time (the writer's flush thread)."""

    def __init__(self, directory: Path, *, segment_bytes: int, segment_ms: int, retention_ms: int,
                 clock: Callable[[], int]) -> None:
        self.directory = directory
        self.segment_bytes = segment_bytes
        self.segment_ms = segment_ms
        self.retention_ms = retention_ms
        self.clock = clock
        self._active: Segment | None = None
        self._active_size = 0
        self._active_last_ts = 0
        self.next_seq = 0

    def open(self) -> int:
        """Close what a previous process left active; returns the next sequence number."""
        self.directory.mkdir(parents=True, exist_ok=True)
        segments = list_segments(self.directory)
        next_seq = 0
        for segment in segments:
            if segment.closed:
                continue
            rows, last_ts, good = _scan(segment.path)
            if good < segment.path.stat().st_size:
                os.truncate(segment.path, good)  # a torn last line: the write never completed
            if rows == 0:
                segment.path.unlink()
                continue
            segment.path.rename(segment.path.with_name(
                _segment_name(segment.base_seq, segment.first_ts, last_ts if last_ts is not None else segment.first_ts)))
        segments = list_segments(self.directory)
        if segments:
            last = segments[-1]
            rows, _, _ = _scan(last.path)
            next_seq = last.base_seq + rows
        self.next_seq = next_seq
        return next_seq

    def append(self, lines: Iterable[tuple[int, int, bytes]]) -> None:
        """Append (seq, ts_ms, encoded line with its newline) in order, rotating as needed."""
        self.maybe_roll()  # an old active segment is closed before it gets new rows
        chunk: list[bytes] = []
        chunk_size = 0
        last_ts = 0
        for seq, ts, line in lines:
            if self._active is None:
                self._start(seq, ts)
            chunk.append(line)
            chunk_size += len(line)
            last_ts = ts
            if self._active_size + chunk_size >= self.segment_bytes:
                self._write(chunk, chunk_size, last_ts)
                chunk, chunk_size = [], 0
                self.roll()
        if chunk:
            self._write(chunk, chunk_size, last_ts)
        self.maybe_roll()

    def _start(self, seq: int, ts: int) -> None:
        self._active = Segment(self.directory / _segment_name(seq, ts), seq, ts, None)
        self._active_size = 0
        self._active_last_ts = ts

    def _write(self, chunk: list[bytes], size: int, last_ts: int) -> None:
        assert self._active is not None
        # Opened per batch (about once a second): no descriptor to leak; no fsync (module docstring).
        with open(self._active.path, "ab") as handle:
            handle.write(b"".join(chunk))
        self._active_size += size
        self._active_last_ts = max(self._active_last_ts, last_ts)

    def maybe_roll(self) -> None:
        """Close the active segment if it is older than segment_ms."""
        if self._active is not None and self.clock() - self._active.first_ts >= self.segment_ms:
            self.roll()

    def roll(self) -> None:
        if self._active is None:
            return
        active = self._active
        self._active = None
        active.path.rename(active.path.with_name(_segment_name(active.base_seq, active.first_ts, self._active_last_ts)))

    def enforce_retention(self) -> list[Path]:
        """Delete closed segments whose newest row is older than retention_ms; returns them."""
        if self.retention_ms < 0:
            return []
        horizon = self.clock() - self.retention_ms
        deleted = []
        for segment in list_segments(self.directory):
            if segment.last_ts is not None and segment.last_ts < horizon:
                segment.path.unlink(missing_ok=True)
                deleted.append(segment.path)
        return deleted

    def close(self) -> None:
        self.roll()


def read_rows(paths: Iterable[Path], since_ms: int | None = None, until_ms: int | None = None
              ) -> Iterator[dict[str, Any]]:
    """Rows of history segments or exported JSON-lines files, in order, with since <= ts_ms < until.

    A directory means its segments; a file is read whole. An undecodable line is skipped only when
    it is the last line (a write in progress); anywhere else it raises ValueError."""
    for path in paths:
        if path.is_dir():
            for segment in list_segments(path):
                if until_ms is not None and segment.first_ts >= until_ms:
                    break
                if since_ms is not None and segment.last_ts is not None and segment.last_ts < since_ms:
                    continue
                yield from _read_file(segment.path, since_ms, until_ms)
        else:
            yield from _read_file(path, since_ms, until_ms)


def _read_file(path: Path, since_ms: int | None, until_ms: int | None) -> Iterator[dict[str, Any]]:
    with open(path, "rb") as handle:
        lines = iter(handle)
        line = next(lines, None)
        while line is not None:
            following = next(lines, None)
            try:
                row = _decoder.decode(line)
            except msgspec.DecodeError as exc:
                if following is None and not line.endswith(b"\n"):
                    return  # torn or in-progress last line
                raise ValueError(f"{path}: undecodable history row: {exc}") from exc
            ts = row.get("ts_ms", 0)
            if (since_ms is None or ts >= since_ms) and (until_ms is None or ts < until_ms):
                yield row
            line = following
