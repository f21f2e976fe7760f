"""The `coordinator history export` sub-command.

    coordinator history export --data-dir DIR --output PATH [--format jsonl|parquet|parquet-partitioned]
                               [--since ISO-or-ms] [--until ISO-or-ms] [--shard K]

Reads `DIR/history/` (DIR may also be the history directory itself) and, in a data directory of
several shards, every shard's `DIR/shards/<k>/history/` too, rows merged in time order (each row
carries its shard's node id); `--shard K` reads shard K's alone. A shard directory that a later
layout no longer uses keeps the history it wrote, and is read as well. Times are ms since the epoch
or ISO-8601 (no zone means UTC); `--since` is inclusive, `--until` exclusive. Exit codes: 0 done
(the row count on stderr), 1 the export failed, 2 bad usage. `parquet-partitioned` writes a
directory (`day=/bucket=` partitions; re-exporting a day replaces that day), for the daily pipeline run.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, TextIO

from .schema import parse_time


def _time(text: str) -> int:
    try:
        return parse_time(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected ms since the epoch or ISO-8601, got {text!r}") from exc


def add_commands(commands: Any) -> None:
    parser = commands.add_parser("history", help="export the rebalance history")
    actions = parser.add_subparsers(dest="action", required=True)
    export = actions.add_parser("export", help="write history rows of a time range to a file")
    export.add_argument("--data-dir", required=True, type=Path, metavar="DIR", help="the coordinator's data directory (key log.dirs)")
    export.add_argument("--output", required=True, type=Path, metavar="PATH",
                        help="file to write (a directory for parquet-partitioned)")
    export.add_argument("--format", choices=["jsonl", "parquet", "parquet-partitioned"], default="jsonl",
                        help="default: %(default)s")
    export.add_argument("--since", type=_time, metavar="TIME", help="first time included (ms or ISO-8601)")
    export.add_argument("--until", type=_time, metavar="TIME", help="first time excluded (ms or ISO-8601)")
    export.add_argument("--shard", type=int, metavar="K", help="only shard K's history (default: every shard's)")


def history_dir(data_dir: Path) -> Path:
    nested = data_dir / "history"
    return nested if nested.is_dir() else data_dir


def history_dirs(data_dir: Path, shard: int | None = None) -> list[Path]:
    """The history directories to read: shard 0's (the root's, or `data_dir` itself when it is a
    history directory) and every `shards/<k>/history` there is; only shard `shard`'s if given."""
    from ..shards.placement import shard_data_dir

    if shard is not None:
        return [shard_data_dir(data_dir, shard) / "history"] if shard else [history_dir(data_dir)]
    shards_root = data_dir / "shards"
    others = sorted((int(p.name), p / "history") for p in shards_root.iterdir()
                    if p.name.isdigit() and (p / "history").is_dir()) if shards_root.is_dir() else []
    return [history_dir(data_dir)] + [path for _, path in others]


def run(args: argparse.Namespace, err: TextIO | None = None) -> int:
    from .export import export

    err = err or sys.stderr
    shard = getattr(args, "shard", None)
    if shard is not None and shard < 0:
        print(f"coordinator: error: --shard must be 0 or more, not {shard}", file=err)
        return 2
    sources = [source for source in history_dirs(args.data_dir, shard) if source.is_dir()]
    if not sources:
        where = args.data_dir if shard is None else f"shard {shard} of {args.data_dir}"
        print(f"coordinator: error: no history in {where}", file=err)
        return 1
    try:
        count = export(sources, args.output, args.format, args.since, args.until)
    except ImportError as exc:
        print(f"coordinator: error: {args.format} export needs {exc.name} (pip install 'kafka-group-coordinator[pipeline]')", file=err)
        return 1
    except (OSError, ValueError) as exc:
        print(f"coordinator: error: {exc}", file=err)
        return 1
    print(f"exported {count} rows to {args.output}", file=err)
    return 0
