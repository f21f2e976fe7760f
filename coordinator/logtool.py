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
from .core.records import (
    GroupMetadataMember,
    GroupMetadataValue,
    UnknownRecordTypeError,
    decode_record,
)
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


def add_commands(commands: Any) -> None:
    tool = commands.add_parser("log", help="inspect, verify or compact the record log")
    actions = tool.add_subparsers(dest="log_command", required=True)
    for name, text in (("dump", "print every entry as JSON lines"), ("verify", "check CRCs and replay; exit 1 on problems"),
                       ("compact", "compact the log of a stopped coordinator")):
        action = actions.add_parser(name, help=text)
        action.add_argument("--data-dir", required=True, type=Path)
        if name == "dump":
            action.add_argument("--output", type=Path, help="file to write (default: stdout)")
        if name == "compact":
            action.add_argument("--delete-retention-ms", type=int, default=DEFAULT_DELETE_RETENTION_MS)


def run(args: argparse.Namespace) -> int:
    log_dir = args.data_dir / "log"
    if args.log_command == "dump":
        if args.output is None:
            return to_stdout(lambda: dump(log_dir, sys.stdout))
        with open(args.output, "w") as out:
            return dump(log_dir, out)
    if args.log_command == "verify":
        return verify(log_dir, sys.stdout)
    return compact_stopped(args.data_dir, args.delete_retention_ms)


def _entries(log_dir: Path) -> Iterator[tuple[int, LogEntry | None, str | None]]:
    """(segment base, entry or None, problem or None) in log order; read-only."""
    fs = RealFileSystem()
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
        record = decode_record(record_type, key, value)
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


def dump(log_dir: Path, out: TextIO) -> int:
    problems = 0
    for _, entry, problem in _entries(log_dir):
        if entry is None:
            print(json.dumps({"problem": problem}), file=sys.stderr)
            problems += 1
            continue
        out.write(json.dumps({"offset": entry.offset, "timestamp_ms": entry.timestamp_ms,
                              "writer_epoch": entry.writer_epoch,
                              "records": [_record_json(*r) for r in entry.records]}) + "\n")
    return 1 if problems else 0


def verify(log_dir: Path, out: TextIO) -> int:
    problems: list[str] = []
    replay_filter = ReplayFilter()
    core = CoordinatorShard()
    entries = records = 0
    for _, entry, problem in _entries(log_dir):
        if entry is None:
            problems.append(problem or "unknown problem")
            continue
        if not replay_filter.accept(entry):
            continue
        entries += 1
        for record_type, key, value in entry.records:
            try:
                core.replay(decode_record(record_type, key, value))
                records += 1
            except UnknownRecordTypeError:
                problems.append(f"offset {entry.offset}: unknown record type {record_type}")
            except Exception as exc:  # replay must accept everything a coordinator wrote
                problems.append(f"offset {entry.offset}: replay failed: {type(exc).__name__}: {exc}")
    print(json.dumps({"entries": entries, "records": records, "duplicates_skipped": replay_filter.duplicates_skipped,
                      "fenced_skipped": replay_filter.fenced_skipped, "problems": problems}), file=out)
    return 1 if problems else 0


def compact_stopped(data_dir: Path, delete_retention_ms: int) -> int:
    fs = RealFileSystem()
    lock = try_lock_data_dir(fs, str(data_dir))
    if lock is None:
        print(f"coordinator: {data_dir} is in use by a running coordinator; stop it first", file=sys.stderr)
        return 1
    try:
        report = compact_offline(fs, str(data_dir / "log"), lock, now_ms=int(time.time() * 1000),
                                 delete_retention_ms=delete_retention_ms)
    finally:
        lock.release()
    print(json.dumps(dataclasses.asdict(report)))
    return 0
