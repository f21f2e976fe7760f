"""The `coordinator history export` sub-command.

    coordinator history export --data-dir DIR --output PATH [--format jsonl|parquet|parquet-partitioned]
                               [--since ISO-or-ms] [--until ISO-or-ms]

Reads `DIR/history/` (DIR may also be the history directory itself). Times are ms since the epoch
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


def history_dir(data_dir: Path) -> Path:
    nested = data_dir / "history"
    return nested if nested.is_dir() else data_dir


def run(args: argparse.Namespace, err: TextIO | None = None) -> int:
    from .export import export

    err = err or sys.stderr
    source = history_dir(args.data_dir)
    if not source.is_dir():
        print(f"coordinator: error: no history in {args.data_dir}", file=err)
        return 1
    try:
        count = export(source, args.output, args.format, args.since, args.until)
    except ImportError as exc:
        print(f"coordinator: error: {args.format} export needs {exc.name} (pip install 'kafka-group-coordinator[pipeline]')", file=err)
        return 1
    except (OSError, ValueError) as exc:
        print(f"coordinator: error: {exc}", file=err)
        return 1
    print(f"exported {count} rows to {args.output}", file=err)
    return 0
