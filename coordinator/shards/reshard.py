"""Bringing a data directory to the configured shard layout before any shard starts.

`ensure_layout(root, layout)` runs in `coordinator serve` before the shard processes (or the one
process) start. A directory with no layout is a one-shard layout (the single-process layout of
earlier versions). When the configured number of shards differs from the recorded one, whole
partitions move between shard logs; a group never moves off its partition.

Theory of operation
-------------------
Routing (pure: `Router`, `split_entry`, `split_entries`). Every record of the old shard logs goes
to the new shard that owns its group's partition (`ShardLayout.shard_of_group(group_of(key))`).
Records of no group: `CoordinatorEpoch` is per log and is dropped (each new log ends with one
carrying the highest epoch found, so the next owner's is above every earlier one); SCRAM
credentials, ACLs and any other coordinator-wide record (or a record type this version does not
know) go to shard 0, which owns coordinator-wide state. An old entry becomes at most one entry
per new shard holding its records in their order, with its timestamp (compaction ages tombstones
by it): the records of one group that were one entry stay one entry, and a group's entries keep
their log order because a group lives in one old log and goes to one new log.

The move (`ensure_layout`), with every shard's data directory lock held throughout (a running
shard holds its lock: refused with one line):

1. build: read every old shard log in order (the record log's reading rules: torn tail
   truncated, duplicates and fenced entries skipped) and write the new logs under
   `<root>/reshard.tmp/<k>/log`, every entry with one writer epoch above every epoch on disk
   and offsets continuing above every old log's (a reader never sees offsets go back); fsync
   every segment and directory. A crash here leaves the old layout untouched; the next start
   removes the temporary directory and builds again.
2. commit: write the intent `<root>/reshard.json` (from/to layouts; temporary file, fsync,
   rename, fsync). From here on a crash is completed at the next start: `read_layout` (and so
   every shard process) refuses to start while the intent exists, and `ensure_layout` rolls it
   forward before anything else.
3. switch, idempotently, shard by shard: an old log that a new one replaces (or that no new
   shard owns) is renamed to `<root>/reshard.old/<k>/log`, the new log renamed into the shard
   directory; directories fsynced. Whether `<shard dir>/log` is old or new is told by whether
   the new log is still waiting in `reshard.tmp`.
4. write `shards.json` (the new layout), remove the intent, then the old logs and temporaries.

A shard directory's lock file and its rebalance history stay where they are: history written
under an earlier layout stays in the shard directory that wrote it (the history tools read
every shard directory).
"""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from ..core.epoch import CoordinatorEpochKey, CoordinatorEpochValue
from ..core.record_codec import Record, UnknownRecordTypeError, group_of
from ..core.records import RecordType, decode_record, decode_record_key, encode_record
from ..logging import get_logger
from ..recordlog import FlushPolicy, LogConfig, LogEntry, LogRecord, RealFileSystem, RecordLog
from ..recordlog.lock import try_lock_data_dir
from ..recordlog.segments import list_segments, recover, segment_path
from .placement import (
    INTENT_FILE,
    LayoutError,
    ShardLayout,
    check_partitions,
    read_layout,
    shard_data_dir,
    write_layout,
)

log = get_logger("coordinator.reshard")

TEMP_DIR = "reshard.tmp"
OLD_DIR = "reshard.old"
_FLUSH_EVERY = 4096  # entries buffered per new log before they are written (bounds memory)

Step = Callable[[str], None]
"""Called after each durable step of a move (`built`, `intent`, `switched:<k>`, `layout`,
`done`): tests abort there to prove a crash at that instant is safe."""


# ---- routing (pure) -----------------------------------------------------------------------------


class Router:
    """The new shard of a record, or None for a record that is dropped (`CoordinatorEpoch`)."""

    def __init__(self, layout: ShardLayout) -> None:
        self.layout = layout
        self._shard_of_group: dict[str, int] = {}  # the hash is pure Python: once per group

    def shard_of(self, record: LogRecord) -> int | None:
        if record.record_type == RecordType.COORDINATOR_EPOCH:
            return None
        try:
            group = group_of(decode_record_key(record.record_type, record.key))
        except (UnknownRecordTypeError, ValueError):
            return 0  # a record this version cannot read: kept, with the coordinator-wide state
        if group is None:
            return 0  # SCRAM credentials, ACLs: coordinator-wide state is shard 0's
        shard = self._shard_of_group.get(group)
        if shard is None:
            shard = self._shard_of_group[group] = self.layout.shard_of_group(group)
        return shard


def split_entry(entry: LogEntry, router: Router) -> dict[int, tuple[LogRecord, ...]]:
    """The records of one entry, by new shard, in their order (dropped records left out)."""
    parts: dict[int, list[LogRecord]] = {}
    for record in entry.records:
        shard = router.shard_of(record)
        if shard is not None:
            parts.setdefault(shard, []).append(record)
    return {shard: tuple(records) for shard, records in parts.items()}


@dataclass(frozen=True, slots=True)
class MovedEntry:
    """An entry of a new shard log: an old entry's records for that shard, with its timestamp."""

    timestamp_ms: int
    records: tuple[LogRecord, ...]


def split_entries(logs: Iterable[Iterable[LogEntry]], layout: ShardLayout) -> list[list[MovedEntry]]:
    """The entries of the new shard logs of `layout` from the entries of the old ones, in order."""
    router = Router(layout)
    out: list[list[MovedEntry]] = [[] for _ in range(layout.shards)]
    for entries in logs:
        for entry in entries:
            for shard, records in split_entry(entry, router).items():
                out[shard].append(MovedEntry(entry.timestamp_ms, records))
    return out


# ---- the move (I/O) -----------------------------------------------------------------------------


def ensure_layout(root: Path, layout: ShardLayout, *, on_step: Step | None = None) -> None:
    """Leave `root` laid out as `layout`, or raise `LayoutError` (one line) if it cannot be.

    Completes a move a crash interrupted, then moves partitions if the recorded layout differs."""
    if root.exists() and not root.is_dir():
        if layout.shards == 1:
            return  # the server's own data-directory check says so
        raise LayoutError(f"log.dirs {root}: not a directory")
    step = on_step or (lambda _name: None)
    intent = _read_intent(root)
    if intent is not None:
        source, target = intent
        with _locked(root, max(source.shards, target.shards), f"complete the interrupted move of {root} "
                     f"from {source.shards} to {target.shards} shard(s)"):
            log.warning("reshard_resumed", data_dir=str(root), from_shards=source.shards, to_shards=target.shards)
            _switch(root, source, target, step)
    recorded = read_layout(root)
    check_partitions(recorded, layout.partitions)
    current = recorded or ShardLayout(layout.partitions, 1)
    if current == layout:
        return
    with _locked(root, max(current.shards, layout.shards),
                 f"move {root} from {current.shards} to {layout.shards} shard(s)"):
        if (read_layout(root) or ShardLayout(layout.partitions, 1)) != current:
            # Another process moved the partitions between our reading and our locking.
            raise LayoutError(f"the layout of {root} changed while this move was starting; start again")
        if not any(_has_segments(shard_data_dir(root, k) / "log") for k in range(current.shards)):
            root.mkdir(parents=True, exist_ok=True)
            write_layout(root, layout)  # nothing to move
            return
        started = time.monotonic()
        counts = _build(root, current, layout)
        step("built")
        _write_intent(root, current, layout)
        step("intent")
        _switch(root, current, layout, step)
        log.info("reshard_done", data_dir=str(root), from_shards=current.shards, to_shards=layout.shards,
                 entries_by_shard=counts, seconds=round(time.monotonic() - started, 3))


def _has_segments(log_dir: Path) -> bool:
    return log_dir.is_dir() and bool(list_segments(RealFileSystem(), str(log_dir)))


class _locked:
    """Every shard directory's lock, for `shards` shards, held for the duration (non-blocking:
    a running shard holds its lock, and the move is refused)."""

    def __init__(self, root: Path, shards: int, doing: str) -> None:
        self.root = root
        self.shards = shards
        self.doing = doing
        self._stack = ExitStack()

    def __enter__(self) -> None:
        fs = RealFileSystem()
        try:
            for k in range(self.shards):
                directory = shard_data_dir(self.root, k)
                lock = try_lock_data_dir(fs, str(directory))
                if lock is None:
                    raise LayoutError(f"cannot {self.doing}: shard {k} ({directory}) is running; stop every "
                                      f"shard first")
                self._stack.enter_context(lock)
        except BaseException:
            self._stack.close()
            raise

    def __exit__(self, *exc: object) -> None:
        self._stack.close()


def _build(root: Path, source: ShardLayout, target: ShardLayout) -> list[int]:
    """Step 1: the new logs under `reshard.tmp`, complete and fsynced; entries written per shard."""
    fs = RealFileSystem()
    temp = root / TEMP_DIR
    _remove_tree(temp)
    _remove_tree(root / OLD_DIR)  # a finished move's leftovers
    old_dirs = [shard_data_dir(root, k) / "log" for k in range(source.shards)]
    # A first pass (reading and checking only, no decoding) learns what the new logs must be
    # above: every writer epoch and offset on disk.
    max_epoch = next_offset = 0
    for old in old_dirs:
        if old.is_dir():
            recovery = recover(fs, str(old))
            max_epoch = max(max_epoch, recovery.max_epoch)
            next_offset = max(next_offset, recovery.next_offset)
    writer_epoch = max_epoch + 1
    writers: list[RecordLog] = []
    counts = [0] * target.shards
    try:
        for k in range(target.shards):
            new = temp / str(k) / "log"
            new.mkdir(parents=True)
            # An empty first segment at `next_offset`: the new log's offsets continue above the old ones.
            fs.open_append(segment_path(str(new), next_offset)).close()
            writers.append(RecordLog.open(fs, str(new), config=LogConfig(flush_policy=FlushPolicy.NONE),
                                          writer_epoch=writer_epoch))
        router = Router(target)

        epochs: list[int] = [0]

        def move(entry: LogEntry) -> None:
            _note_epoch(entry, epochs)
            for shard, records in split_entry(entry, router).items():
                writer = writers[shard]
                writer.append(records, entry.timestamp_ms)
                counts[shard] += 1
                if counts[shard] % _FLUSH_EVERY == 0:
                    writer.flush()

        for old in old_dirs:
            if old.is_dir():
                recover(fs, str(old), replay=move)
        # Each new log ends with the highest coordinator epoch found: its next owner's is above it.
        epoch_record = LogRecord(*encode_record(Record(
            CoordinatorEpochKey(), CoordinatorEpochValue(max(epochs), f"reshard-{uuid.uuid4()}"))))
        now_ms = int(time.time() * 1000)
        for writer in writers:
            writer.append((epoch_record,), now_ms)
            writer.flush()
    finally:
        for writer in writers:
            writer.close()
    for k in range(target.shards):
        new = temp / str(k) / "log"
        for base in list_segments(fs, str(new)):
            _fsync_file(Path(segment_path(str(new), base)))
        _fsync_dirs(new, new.parent)
    _fsync_dirs(temp, root)
    return counts


def _note_epoch(entry: LogEntry, found: list[int]) -> None:
    for record in entry.records:
        if record.record_type == RecordType.COORDINATOR_EPOCH and record.value is not None:
            try:
                value = decode_record(record.record_type, record.key, record.value).value
            except (UnknownRecordTypeError, ValueError):
                continue
            if isinstance(value, CoordinatorEpochValue):
                found.append(value.epoch)


def _switch(root: Path, source: ShardLayout, target: ShardLayout, step: Step) -> None:
    """Steps 3 and 4; every step is idempotent, so a crash anywhere is completed by running it again."""
    temp, old = root / TEMP_DIR, root / OLD_DIR
    for k in range(max(source.shards, target.shards)):
        shard_dir = shard_data_dir(root, k)
        live, new, aside = shard_dir / "log", temp / str(k) / "log", old / str(k) / "log"
        waiting = k < target.shards and new.is_dir()
        if live.exists() and (waiting or k >= target.shards):
            if aside.exists():  # cannot happen (one rename moves it); refuse rather than lose data
                raise LayoutError(f"cannot complete the move of {root}: both {live} and {aside} exist")
            aside.parent.mkdir(parents=True, exist_ok=True)
            os.replace(live, aside)
            _fsync_dirs(aside.parent, old, root, shard_dir)
        if waiting:
            shard_dir.mkdir(parents=True, exist_ok=True)
            os.replace(new, live)
            _fsync_dirs(shard_dir, new.parent)
        step(f"switched:{k}")
    write_layout(root, target)
    step("layout")
    (root / INTENT_FILE).unlink(missing_ok=True)
    _fsync_dirs(root)
    _remove_tree(old)
    _remove_tree(temp)
    step("done")


def _read_intent(root: Path) -> tuple[ShardLayout, ShardLayout] | None:
    try:
        raw = json.loads((root / INTENT_FILE).read_text())
        return (ShardLayout(int(raw["from"]["partitions"]), int(raw["from"]["shards"])),
                ShardLayout(int(raw["to"]["partitions"]), int(raw["to"]["shards"])))
    except (FileNotFoundError, NotADirectoryError):
        return None
    except (ValueError, KeyError, TypeError) as exc:
        raise LayoutError(f"{root / INTENT_FILE} is not a reshard intent ({exc})") from exc


def _write_intent(root: Path, source: ShardLayout, target: ShardLayout) -> None:
    """Step 2, the commit point: written whole (temporary file, fsync, rename, fsync) or not at all."""
    tmp = root / (INTENT_FILE + ".tmp")
    body = {"version": 1, "from": {"partitions": source.partitions, "shards": source.shards},
            "to": {"partitions": target.partitions, "shards": target.shards}}
    with open(tmp, "w") as out:
        json.dump(body, out)
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, root / INTENT_FILE)
    _fsync_dirs(root)


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dirs(*directories: Path) -> None:
    fs = RealFileSystem()
    for directory in directories:
        if directory.is_dir():
            fs.fsync_dir(str(directory))


def _remove_tree(path: Path) -> None:
    if path.exists():
        shutil.rmtree(path)
        _fsync_dirs(path.parent)


def shard_log_dirs(root: Path) -> Sequence[tuple[int, Path]]:
    """`(shard, log directory)` of every shard of `root`'s recorded layout (one for a directory
    without a layout): what the log tools read."""
    layout = read_layout(root) or ShardLayout(shards=1)
    return [(k, shard_data_dir(root, k) / "log") for k in range(layout.shards)]
