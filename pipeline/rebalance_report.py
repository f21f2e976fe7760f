"""Rebalance report: per group and per day, from the coordinator's history, on Spark.

    python -m pipeline.rebalance_report --input PATH [PATH ...] --output DIR [--day YYYY-MM-DD]
                                        [--master URL] [--top 10]
    spark-submit --master spark://HOST:PORT pipeline/rebalance_report.py --input ... --output ...

Inputs are history exports or raw history directories: `.jsonl` / `.json` files, `.parquet` files,
partitioned Parquet datasets (`day=YYYY-MM-DD/bucket=B/`, as `coordinator history export --format
parquet-partitioned` and `pipeline.synthetic` write them), or directories holding files. Rows are
read with the explicit schema of `coordinator.history.schema` (no inference), only the columns the
report uses. Days are UTC. The master defaults to `local[*]`, or to whatever `spark-submit` was given.

Full rebuild and daily runs
---------------------------
Without `--day`, every input row is read and every table in DIR is rewritten. With `--day D`, only
day D's rows are reported on: the job reads the dataset partitions of D and, for context, the last
`CONTEXT_MS` of D-1 and the first `CONTEXT_MS` of D+1 (if already exported), so rebalances,
revocations and moves that straddle midnight are counted as the full rebuild counts them; it then
replaces day D in each table (dynamic partition overwrite) and leaves the other days alone. The
summary and the HTML report are recomputed from the tables of all days. A run for D equals the
full rebuild's day D as long as nothing stays open across midnight longer than `CONTEXT_MS`.

Definitions (the numbers in every table mean exactly this)
-----------------------------------------------------------
- Group lifetime: a group id and a group type. A group that changed type (`group_type_changed`,
  e.g. an empty classic group taken over by KIP-848 members) has one lifetime per type, and every
  table below is keyed by (group_id, group_type, ...): their figures are never added together.
- Rebalance: an *episode* of a group, from its first start row (`rebalance_started` for classic
  groups, `group_epoch_bumped` for consumer groups) to the next `group_state_changed` into Stable
  or Empty. Starts that arrive while an episode is open (a member joining mid-rebalance) join that
  episode; `rebalance_triggers` counts them all. An episode belongs to the day it started.
- Rebalance time: end − start of a completed episode, in ms. For classic groups the end is the
  leader's SyncGroup (Stable); for consumer groups it is the moment every member has reconciled to
  the target assignment epoch (Kafka's Stable). Percentiles (p50, p95) are exact nearest-rank:
  the value at rank ceil(p × n) of the cell's n values in order.
- Partitions moved: assignments of a partition to an owner other than the owner of the partition's
  previous event (its revocation, or its previous assignment; owner = group.instance.id when
  static, else member id); the first assignment of a partition is no move.
- Partition unavailability: for each revocation of a partition, the time until the partition's
  next event, when that is an assignment (to anyone) in that group; other revocations count in
  `revocations_open` and not in the times. Belongs to the day of the revocation.
- Members fenced by session timeout: `session_expired` rows.

Outputs in DIR: `tables/<name>/` Parquet partitioned by `day=` (`group_day`, `episodes`,
`partition_unavailability`, `daily`, `daily_by_type`), `report.html` with its PNG plots (in `plots/`,
also embedded), and `summary.json`. Only small results (one row per day and type, the top N, per-type
figures, a duration histogram) reach the driver; no pandas, no collect of a big frame. How the job
is planned (which stages are wide and why) is in the docstring of `pipeline.tables`.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a file (spark-submit pipeline/rebalance_report.py): use the package,
    # and not this directory as a top-level path (its html.py would shadow the standard library's).
    _here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _here]
    sys.path.insert(0, str(_here.parent))
    import pipeline  # noqa: F401

    __package__ = "pipeline"

from . import tables as T

CONTEXT_MS = 3_600_000
"""How much of the neighbouring days a daily run reads (see the module docstring)."""
DAY_MS = 86_400_000
TABLES = ("group_day", "episodes", "partition_unavailability", "daily", "daily_by_type")


def find_inputs(paths: Iterable[str | Path]) -> tuple[list[str], list[str], list[str]]:
    """(JSON-lines files, Parquet files, partitioned datasets) named by the paths or found in them."""
    jsonl: list[str] = []
    parquet: list[str] = []
    datasets: list[str] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir() and any(p.name.startswith("day=") for p in path.iterdir()):
            datasets.append(str(path))
            continue
        candidates = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        for file in candidates:
            if file.suffix in (".jsonl", ".json"):
                jsonl.append(str(file))
            elif file.suffix == ".parquet":
                parquet.append(str(file))
            elif not path.is_dir():
                raise ValueError(f"{file}: not a .jsonl, .json or .parquet file")
    if not jsonl and not parquet and not datasets:
        raise ValueError(f"no history files in {', '.join(map(str, paths))}")
    return jsonl, parquet, datasets


def input_bytes(paths: Iterable[str | Path]) -> int:
    total = 0
    for raw in paths:
        path = Path(raw)
        files = path.rglob("*") if path.is_dir() else [path]
        total += sum(f.stat().st_size for f in files if f.is_file())
    return total


def spark_session(master: str | None = None, app: str = "rebalance-report") -> Any:
    """A session with this job's settings. `master` None means `spark-submit`'s master if the job
    was submitted, else `local[*]`. Memory is Spark's default unless REPORT_DRIVER_MEMORY is set."""
    from pyspark.sql import SparkSession

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app)
    if master is None and "PYSPARK_GATEWAY_PORT" not in os.environ:  # not under spark-submit
        master = "local[*]"
    if master is not None:
        builder = builder.master(master)
    if "PYSPARK_GATEWAY_PORT" not in os.environ:  # this process starts the JVM (not under spark-submit)
        # The job allocates short-lived rows at a high rate and needs throughput, not short pauses:
        # the parallel collector costs ~10 % less CPU than G1 here (BENCHMARKS.md). Memory unchanged.
        builder = builder.config("spark.driver.extraJavaOptions", "-XX:+UseParallelGC")
    if "REPORT_DRIVER_MEMORY" in os.environ:
        builder = builder.config("spark.driver.memory", os.environ["REPORT_DRIVER_MEMORY"])
    return (
        builder
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.adaptive.enabled", "true")
        .config("spark.sql.adaptive.coalescePartitions.enabled", "true")
        .config("spark.sql.shuffle.partitions", os.environ.get("REPORT_SHUFFLE_PARTITIONS", "16"))
        # Joins of per-(group, day) frames that are all partitioned by group alone need no shuffle
        # (`pipeline.tables`, step 4); Spark's default asks for every join key in the partitioning.
        .config("spark.sql.requireAllClusterKeysForCoPartition", "false")
        .config("spark.sql.parquet.compression.codec", "zstd")
        .getOrCreate()
    )


def load(spark: Any, inputs: Sequence[str | Path], day: datetime.date | None = None) -> Any:
    """History rows of every input with the columns the report uses plus `day` (UTC); with `day`,
    only that day and `CONTEXT_MS` either side (dataset partitions outside are not read)."""
    from pyspark.sql import functions as F

    from .spark_schema import history_schema

    schema = history_schema()
    jsonl, parquet, datasets = find_inputs(inputs)
    frames = []
    if jsonl:
        frames.append(spark.read.schema(schema).option("mode", "PERMISSIVE").json(jsonl))
    if parquet:
        frames.append(spark.read.schema(schema).parquet(*parquet))
    frames = [f.withColumn("day", F.to_date(F.timestamp_millis("ts_ms"))) for f in frames]
    for path in datasets:
        frame = spark.read.option("basePath", path).parquet(path)
        if day is not None:  # partition pruning: three days' directories at most
            frame = frame.filter(F.col("day").between(F.lit(day - datetime.timedelta(days=1)),
                                                      F.lit(day + datetime.timedelta(days=1))))
        frames.append(frame.select(*[F.col(c).cast(schema[c].dataType) for c in T.COLUMNS],
                                   F.col("day").cast("date")))
    rows = frames[0].select(*T.COLUMNS, "day")
    for frame in frames[1:]:
        rows = rows.unionByName(frame.select(*T.COLUMNS, "day"))
    rows = rows.filter(F.col("kind").isNotNull())
    if day is not None:
        start = int(datetime.datetime.combine(day, datetime.time(), datetime.UTC).timestamp() * 1000)
        rows = rows.filter(F.col("ts_ms").between(start - CONTEXT_MS, start + DAY_MS + CONTEXT_MS - 1))
    return rows


def build(rows: Any, partitions: int | None = None) -> T.Tables:
    """The report's tables over `rows` (see `pipeline.tables`)."""
    spark = rows.sparkSession
    return T.build(rows, partitions or 2 * int(spark.sparkContext.defaultParallelism))


def write(tables: T.Tables, output: Path, top: int = 10, day: datetime.date | None = None,
          title: str = "Rebalance report") -> dict[str, Any]:
    """Write the tables (all days, or replace `day`), then the summary and the HTML report from
    the tables of every day in DIR; returns the summary."""
    from pyspark.sql import functions as F

    from . import html

    spark = tables.group_day.sparkSession
    output.mkdir(parents=True, exist_ok=True)
    directory = output / "tables"
    spark.conf.set("spark.sql.sources.partitionOverwriteMode", "dynamic" if day is not None else "static")
    # One writing task per core, not one per shuffle partition: every task writes a file into each
    # day's directory, and on a local file system without Hadoop's native library each directory a
    # task creates costs a `chmod` process (hundreds of forks per table otherwise).
    writers = int(spark.sparkContext.defaultParallelism)
    try:
        for name in TABLES:
            frame = getattr(tables, name)
            if day is not None:
                frame = frame.filter(F.col("day") == F.lit(day))
            frame.coalesce(writers).write.mode("overwrite").partitionBy("day").parquet(str(directory / name))
    finally:
        T.unpersist(tables)
    written = {name: spark.read.parquet(str(directory / name)) for name in TABLES}
    daily = sorted((r.asDict() for r in written["daily"].collect()), key=lambda r: r["day"])
    daily_by_type = sorted((r.asDict() for r in written["daily_by_type"].collect()),
                           key=lambda r: (r["day"], r["group_type"]))
    totals = {k: sum(d[k] or 0 for d in daily) for k in T.DAILY_SUMS}
    summary = {
        "days": len(daily),
        "groups": written["group_day"].select("group_id").distinct().count(),
        "totals": totals,
        "by_type": T.by_type(written["group_day"], written["episodes"]),
        "top_groups": T.top_groups(written["group_day"], top),
        "daily": [{**d, "day": d["day"].isoformat()} for d in daily],
        "daily_by_type": [{**d, "day": d["day"].isoformat()} for d in daily_by_type],
        "duration_histogram": T.histogram(written["episodes"]),
    }
    html.render(output, title, summary)
    (output / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    return summary


def run(inputs: Sequence[str], output: Path, master: str | None = None, day: datetime.date | None = None,
        top: int = 10) -> dict[str, Any]:
    spark = spark_session(master)
    try:
        partitions = T.shuffle_partitions(spark, input_bytes(inputs))
        return write(build(load(spark, inputs, day), partitions), output, top, day)
    finally:
        spark.stop()


def _day(text: str) -> datetime.date:
    try:
        return datetime.date.fromisoformat(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected YYYY-MM-DD, got {text!r}") from exc


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pipeline.rebalance_report",
                                     description="Per-group, per-day rebalance report from the coordinator's history.")
    parser.add_argument("--input", nargs="+", required=True, metavar="PATH", help="exports or history directories")
    parser.add_argument("--output", required=True, type=Path, metavar="DIR")
    parser.add_argument("--day", type=_day, metavar="YYYY-MM-DD", help="replace only this day in DIR (daily run)")
    parser.add_argument("--master", default=None, help="Spark master (default: spark-submit's, else local[*])")
    parser.add_argument("--top", type=int, default=10, help="how many noisiest groups to list (default: %(default)s)")
    args = parser.parse_args(argv)
    started = time.monotonic()
    try:
        summary = run(args.input, args.output, args.master, args.day, args.top)
    except ValueError as exc:
        print(f"rebalance_report: error: {exc}", file=sys.stderr)
        return 2
    totals = summary["totals"]
    print(f"{summary['groups']} groups over {summary['days']} days: {totals['rebalances']} rebalances, "
          f"{totals['partitions_moved']} partitions moved, {totals['members_fenced_session_timeout']} members fenced; "
          f"report in {args.output / 'report.html'} ({time.monotonic() - started:.1f}s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
