"""Offline tools over a data directory's record log: `coordinator log dump|verify|compact`.

- `dump` prints every entry as a JSON line (offset, timestamp, writer epoch, decoded records);
  it only reads, so it is safe next to a running server. Each record is named: its type by name
  (Kafka's record names: OffsetCommit, GroupMetadata, ConsumerGroupMemberMetadata, ...) and
  number, its key and value as JSON objects keyed by field name; bytes as hex, except the
  consumer-protocol subscription and assignment of a classic consumer group's members, which are
  decoded. Records it cannot decode keep their raw bytes in hex with the reason. It is pipe-safe
  (`coordinator.pipes`): when the reader goes away (`| head`) it stops quietly with exit code 141,
  as `cat` does.
- `verify` checks every frame's CRC, that closed segments end cleanly, that the active segment has
  no torn tail, and that the whole log replays into a fresh core shard; exit code 1 on any problem.
  It only reads.
- `compact` compacts the whole log of a stopped coordinator (it takes the data-directory lock and
  refuses while a server holds it).

A data directory of several shards (`shards.json`, `coordinator/shards/placement.py`) has one log
per shard: each tool covers every shard of the recorded layout in turn, or shard K alone with
`--shard K`. Then `dump` adds `"shard": k` to every line, `verify` prints one line per shard and
also reports a group whose records sit in another shard's log than the one its partition maps to,
and `compact` compacts each stopped shard (a running one is refused, exit code 1).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO
from uuid import UUID

import msgspec

from .admin.assignment import decode_assignment, decode_subscription
from .core.classic.schema import GroupMetadataMember, GroupMetadataValue
from .core.record_codec import UnknownRecordTypeError, group_of
from .core.shard import CoordinatorShard
from .pipes import to_stdout
from .recordlog import (
    DEFAULT_DELETE_RETENTION_MS,
    LogEntry,
    RealFileSystem,
    compact_offline,
    try_lock_data_dir,
)
from .recordlog.errors import RecordLogError
from .recordlog.segments import ReplayFilter, SegmentReader, list_segments, segment_path
from .security.records import CODEC
from .security.store import SecurityStore
from .shards.placement import LayoutError, ShardLayout, read_layout, shard_data_dir


def add_commands(commands: Any) -> None:
    tool = commands.add_parser("log", help="inspect, verify or compact the record log")
    actions = tool.add_subparsers(dest="log_command", required=True)
    for name, text in (("dump", "print every entry as JSON lines"), ("verify", "check CRCs and replay; exit 1 on problems"),
                       ("compact", "compact the log of a stopped coordinator")):
        action = actions.add_parser(name, help=text)
        action.add_argument("--data-dir", required=True, type=Path)
        action.add_argument("--shard", type=int, metavar="K", help="only shard K (default: every shard)")
        if name == "dump":
            action.add_argument("--output", type=Path, help="file to write (default: stdout)")
        if name == "compact":
            action.add_argument("--delete-retention-ms", type=int, default=DEFAULT_DELETE_RETENTION_MS)


def shards_of(data_dir: Path, shard: int | None) -> tuple[ShardLayout | None, list[int]]:
    """The recorded layout (None: a one-shard directory) and the shards to cover; `LayoutError`
    (one line) for a shard the layout does not have or a directory between layouts."""
    layout = read_layout(data_dir)
    count = layout.shards if layout is not None else 1
    if shard is None:
        return layout, list(range(count))
    if not 0 <= shard < count:
        raise LayoutError(f"--shard {shard}: {data_dir} has {count} shard(s) (0 to {count - 1})")
    return layout, [shard]


def run(args: argparse.Namespace) -> int:
    if not args.data_dir.is_dir():
        print(f"coordinator: --data-dir {args.data_dir}: not a directory", file=sys.stderr)
        return 2
    try:
        layout, shards = shards_of(args.data_dir, getattr(args, "shard", None))
    except LayoutError as exc:
        print(f"coordinator: {exc}", file=sys.stderr)
        return 2
    sharded = layout is not None and layout.shards > 1
    if args.log_command == "dump":
        def dump_all(out: TextIO) -> int:
            failed = 0
            for k in shards:
                failed |= dump(shard_data_dir(args.data_dir, k) / "log", out, shard=k if sharded else None)
            return failed

        if args.output is None:
            return to_stdout(lambda: dump_all(sys.stdout))
        with open(args.output, "w") as out:
            return dump_all(out)
    if args.log_command == "verify":
        failed = 0
        for k in shards:
            failed |= verify(shard_data_dir(args.data_dir, k) / "log", sys.stdout,
                             shard=k if sharded else None, layout=layout if sharded else None)
        return failed
    failed = 0
    for k in shards:
        failed |= compact_stopped(shard_data_dir(args.data_dir, k), args.delete_retention_ms,
                                  shard=k if sharded else None)
    return failed


def _entries(log_dir: Path) -> Iterator[tuple[int, LogEntry | None, str | None]]:
    """(segment base, entry or None, problem or None) in log order; read-only."""
    fs = RealFileSystem()
    if not log_dir.is_dir():
        return  # a shard that has not started yet has no log
    bases = list_segments(fs, str(log_dir))
    for index, base in enumerate(bases):
        handle = fs.open_read(segment_path(str(log_dir), base))
        try:
            reader = SegmentReader(handle)
            try:
                for _, entry in reader:
                    yield base, entry, None
            except RecordLogError as exc:
                yield base, None, f"segment {base}: {exc}"
                continue
            end = reader.end
            assert end is not None
            if not end.clean:
                where = "closed segment" if index < len(bases) - 1 else "active segment (torn tail)"
                yield base, None, (f"{where} {base}: {end.status.name.lower()} data after byte {end.valid_length} "
                                   f"of {end.file_size}")
        finally:
            handle.close()


def _named(value: Any) -> Any:
    """A record key or value as JSON: structs (stored as msgpack arrays) as objects keyed by field
    name, recursively; bytes as hex; UUIDs (topic ids) as strings."""
    if isinstance(value, msgspec.Struct):
        return {name: _named(getattr(value, name)) for name in value.__struct_fields__}
    if isinstance(value, tuple | list):
        return [_named(item) for item in value]
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, UUID):
        return str(value)
    return value


def _consumer_protocol(member: GroupMetadataMember, named: dict[str, Any]) -> None:
    """Decode a classic consumer group member's subscription and assignment in place (kept as hex
    when the bytes are not the consumer protocol)."""
    with contextlib.suppress(ValueError):
        subscription = decode_subscription(member.subscription)
        named["subscription"] = {"topics": list(subscription.topics), "generation_id": subscription.generation_id}
    with contextlib.suppress(ValueError):
        named["assignment"] = decode_assignment(member.assignment)


def _record_json(record_type: int, key: bytes, value: bytes | None) -> dict[str, Any]:
    try:
        record = CODEC.decode_record(record_type, key, value)
    except (UnknownRecordTypeError, msgspec.DecodeError) as exc:
        return {"type": "Unknown" if isinstance(exc, UnknownRecordTypeError) else "Undecodable",
                "type_id": record_type, "key": key.hex(), "value": None if value is None else value.hex(),
                "error": str(exc)}
    named_value = None if record.value is None else _named(record.value)
    if isinstance(record.value, GroupMetadataValue) and record.value.protocol_type == "consumer":
        assert named_value is not None
        for member, named in zip(record.value.members, named_value["members"], strict=True):
            _consumer_protocol(member, named)
    return {"type": type(record.key).__name__.removesuffix("Key"), "type_id": record_type,
            "key": _named(record.key), "value": named_value}


def dump(log_dir: Path, out: TextIO, shard: int | None = None) -> int:
    problems = 0
    where = {} if shard is None else {"shard": shard}
    for _, entry, problem in _entries(log_dir):
        if entry is None:
            print(json.dumps({**where, "problem": problem}), file=sys.stderr)
            problems += 1
            continue
        out.write(json.dumps({**where, "offset": entry.offset, "timestamp_ms": entry.timestamp_ms,
                              "writer_epoch": entry.writer_epoch,
                              "records": [_record_json(*r) for r in entry.records]}) + "\n")
    return 1 if problems else 0


def verify(log_dir: Path, out: TextIO, shard: int | None = None, layout: ShardLayout | None = None) -> int:
    """Check one log; with `shard` and `layout`, also that every group in it is that shard's."""
    problems: list[str] = []
    replay_filter = ReplayFilter()
    core = CoordinatorShard(services=(SecurityStore(),))
    entries = records = 0
    misplaced: dict[str, int] = {}
    for _, entry, problem in _entries(log_dir):
        if entry is None:
            problems.append(problem or "unknown problem")
            continue
        if not replay_filter.accept(entry):
            continue
        entries += 1
        for record_type, key, value in entry.records:
            try:
                record = CODEC.decode_record(record_type, key, value)
                core.replay(record)
                records += 1
                group = group_of(record.key) if layout is not None else None
                if group is not None and layout is not None and group not in misplaced:
                    owner = layout.shard_of_group(group)
                    if owner != shard:
                        misplaced[group] = owner
                        problems.append(f"offset {entry.offset}: group {group!r} belongs to shard {owner}")
            except UnknownRecordTypeError:
                problems.append(f"offset {entry.offset}: unknown record type {record_type}")
            except Exception as exc:  # replay must accept everything a coordinator wrote
                problems.append(f"offset {entry.offset}: replay failed: {type(exc).__name__}: {exc}")
    where = {} if shard is None else {"shard": shard}
    print(json.dumps({**where, "entries": entries, "records": records,
                      "duplicates_skipped": replay_filter.duplicates_skipped,
                      "fenced_skipped": replay_filter.fenced_skipped, "problems": problems}), file=out)
    return 1 if problems else 0


def compact_stopped(data_dir: Path, delete_retention_ms: int, shard: int | None = None) -> int:
    fs = RealFileSystem()
    lock = try_lock_data_dir(fs, str(data_dir))
    if lock is None:
        who = "a running coordinator" if shard is None else f"running shard {shard}"
        print(f"coordinator: {data_dir} is in use by {who}; stop it first", file=sys.stderr)
        return 1
    try:
        report = compact_offline(fs, str(data_dir / "log"), lock, now_ms=int(time.time() * 1000),
                                 delete_retention_ms=delete_retention_ms)
    finally:
        lock.release()
    print(json.dumps({**({} if shard is None else {"shard": shard}), **dataclasses.asdict(report)}))
    return 0
