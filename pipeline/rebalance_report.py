"""Rebalance report: per group and per day, from the coordinator's history, on Spark.

    python -m pipeline.rebalance_report --input PATH [PATH ...] --output DIR [--master local[*]]
                                        [--top 10]

Inputs are history exports or raw history directories: `.jsonl` / `.json` files and `.parquet`
files, or directories holding them (a coordinator's `<data-dir>/history` works as is). Rows are
read with the explicit schema of `coordinator.history.schema` (no inference). Days are UTC.

Definitions (the numbers in every table mean exactly this)
-----------------------------------------------------------
- Rebalance: an *episode* of a group, from its first start row (`rebalance_started` for classic
  groups, `group_epoch_bumped` for consumer groups) to the next `group_state_changed` into Stable
  or Empty. Starts that arrive while an episode is open (a member joining mid-rebalance) join that
  episode; `rebalance_triggers` counts them all. An episode belongs to the day it started.
- Rebalance time: end − start of a completed episode, in ms. For classic groups the end is the
  leader's SyncGroup (Stable); for consumer groups it is the moment every member has reconciled to
  the target assignment epoch (Kafka's Stable). Percentiles are nearest-rank
  (`percentile_approx`, exact below 10,000 values per cell).
- Partitions moved: assignments of a partition to an owner other than its previous owner (owner =
  group.instance.id when static, else member id); the first assignment of a partition is no move.
- Partition unavailability: for each revocation of a partition, the time until the partition is
  next assigned (to anyone) in that group; revocations never followed by an assignment count in
  `revocations_open` and not in the times. Belongs to the day of the revocation.
- Members fenced by session timeout: `session_expired` rows.

Outputs in DIR: `tables/<name>/` Parquet (`group_day`, `daily`, `top_groups`, `episodes`,
`partition_unavailability`), `report.html` with its PNG plots (in `plots/`, also embedded), and
`summary.json`. Only the small tables (daily, top-N, a duration histogram) reach the driver.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from coordinator.history.schema import REBALANCE_END_STATES, REBALANCE_START_KINDS

PERCENTILE_ACCURACY = 10_000
DURATION_BUCKETS_MS = (0, 10, 30, 100, 300, 1_000, 3_000, 10_000, 30_000, 60_000, 300_000)


def find_inputs(paths: Iterable[str | Path]) -> tuple[list[str], list[str]]:
    """(JSON-lines files, Parquet files) named by the paths or found in the directories."""
    jsonl: list[str] = []
    parquet: list[str] = []
    for raw in paths:
        path = Path(raw)
        candidates = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        for file in candidates:
            if file.suffix in (".jsonl", ".json"):
                jsonl.append(str(file))
            elif file.suffix == ".parquet":
                parquet.append(str(file))
            elif not path.is_dir():
                raise ValueError(f"{file}: not a .jsonl, .json or .parquet file")
    if not jsonl and not parquet:
        raise ValueError(f"no history files in {', '.join(map(str, paths))}")
    return jsonl, parquet


def spark_session(master: str = "local[*]", app: str = "rebalance-report") -> Any:
    from pyspark.sql import SparkSession

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    return (
        SparkSession.builder.master(master).appName(app)
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", os.environ.get("REPORT_SHUFFLE_PARTITIONS", "8"))
        .config("spark.driver.memory", os.environ.get("REPORT_DRIVER_MEMORY", "2g"))
        .getOrCreate()
    )


def load(spark: Any, inputs: Sequence[str | Path]) -> Any:
    """History rows of every input, as one DataFrame with the schema's columns plus `day`."""
    from pyspark.sql import functions as F

    from .spark_schema import history_schema

    schema = history_schema()
    jsonl, parquet = find_inputs(inputs)
    frames = []
    if jsonl:
        frames.append(spark.read.schema(schema).option("mode", "PERMISSIVE").json(jsonl))
    if parquet:
        frames.append(spark.read.schema(schema).parquet(*parquet))
    rows = frames[0]
    for frame in frames[1:]:
        rows = rows.unionByName(frame)
    return rows.filter(F.col("kind").isNotNull()).withColumn("day", F.to_date(F.timestamp_millis("ts_ms")))


@dataclass
class Report:
    group_day: Any
    daily: Any
    top_groups: Any
    episodes: Any
    partition_unavailability: Any
    duration_histogram: Any


def _percentiles(column: str, prefix: str) -> list[Any]:
    from pyspark.sql import functions as F

    p = F.percentile_approx(column, [0.5, 0.95], PERCENTILE_ACCURACY)
    return [p[0].alias(f"{prefix}_p50_ms"), p[1].alias(f"{prefix}_p95_ms"), F.max(column).alias(f"{prefix}_max_ms")]


def episodes_of(rows: Any) -> Any:
    """One row per rebalance episode: group_id, group_type, ep, start_ts, end_ts, triggers,
    duration_ms (null when not completed), day."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    is_start = F.col("kind").isin(*REBALANCE_START_KINDS)
    is_end = (F.col("kind") == "group_state_changed") & F.col("new_state").isin(*REBALANCE_END_STATES)
    boundaries = rows.filter(is_start | is_end).select(
        "group_id", "group_type", "ts_ms", "seq", F.when(is_end, 1).otherwise(0).alias("is_end"))
    ordered = Window.partitionBy("group_id").orderBy("ts_ms", "seq")
    before = ordered.rowsBetween(Window.unboundedPreceding, -1)
    numbered = boundaries.withColumn("ep", F.coalesce(F.sum("is_end").over(before), F.lit(0)))
    episodes = numbered.groupBy("group_id", "ep").agg(
        F.first("group_type", ignorenulls=True).alias("group_type"),
        F.min(F.when(F.col("is_end") == 0, F.col("ts_ms"))).alias("start_ts"),
        F.min(F.when(F.col("is_end") == 1, F.col("ts_ms"))).alias("end_ts"),
        F.sum(1 - F.col("is_end")).alias("triggers"),
    )
    return (
        episodes.filter(F.col("start_ts").isNotNull())
        .withColumn("duration_ms", F.col("end_ts") - F.col("start_ts"))
        .withColumn("day", F.to_date(F.timestamp_millis("start_ts")))
    )


def partition_events_of(rows: Any) -> Any:
    """One row per (revocation or assignment, partition) with the owner before and the next
    assignment time: group_id, topic, partition, kind, ts_ms, owner, moved, next_assigned_ts."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    exploded = (
        rows.filter(F.col("kind").isin("partitions_revoked", "partitions_assigned"))
        .select("group_id", "group_type", "kind", "ts_ms", "seq", "day",
                F.coalesce("group_instance_id", "member_id").alias("owner"),
                F.explode("partitions").alias("tp"))
        .select("group_id", "group_type", "kind", "ts_ms", "seq", "day", "owner",
                F.col("tp.topic").alias("topic"), F.explode("tp.partitions").alias("partition"))
    )
    key = ("group_id", "topic", "partition")
    assigned = F.col("kind") == "partitions_assigned"
    forward = Window.partitionBy(*key).orderBy("ts_ms", "seq").rowsBetween(Window.unboundedPreceding, -1)
    backward = Window.partitionBy(*key).orderBy(F.desc("ts_ms"), F.desc("seq")).rowsBetween(
        Window.unboundedPreceding, Window.currentRow)
    previous_owner = F.last(F.when(assigned, F.col("owner")), ignorenulls=True).over(forward)
    return (
        exploded
        .withColumn("previous_owner", previous_owner)
        .withColumn("moved", assigned & F.col("previous_owner").isNotNull() & (F.col("previous_owner") != F.col("owner")))
        .withColumn("next_assigned_ts", F.last(F.when(assigned, F.col("ts_ms")), ignorenulls=True).over(backward))
    )


def build(rows: Any, top: int = 10) -> Report:
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    keys = ["group_id", "day"]
    # The input is scanned once: the columns the report uses are kept (memory, spilling to disk).
    rows = rows.select("ts_ms", "seq", "kind", "group_id", "group_type", "member_id", "group_instance_id",
                       "new_state", "partitions", "day").persist(StorageLevel.MEMORY_AND_DISK)
    episodes = episodes_of(rows).persist(StorageLevel.MEMORY_AND_DISK)
    per_episode = episodes.groupBy(*keys).agg(
        F.first("group_type", ignorenulls=True).alias("group_type"),
        F.count(F.lit(1)).alias("rebalances"),
        F.count("end_ts").alias("rebalances_completed"),
        F.sum("triggers").alias("rebalance_triggers"),
        *_percentiles("duration_ms", "rebalance"),
    )

    partition_events = partition_events_of(rows)
    revocations = (
        partition_events.filter(F.col("kind") == "partitions_revoked")
        .select("group_id", "day", "topic", "partition", (F.col("next_assigned_ts") - F.col("ts_ms")).alias("unavailable_ms"))
        .persist(StorageLevel.MEMORY_AND_DISK)
    )
    per_revocation = revocations.groupBy(*keys).agg(
        F.count(F.lit(1)).alias("partitions_revoked"),
        F.count("unavailable_ms").alias("revocations_closed"),
        F.sum(F.when(F.col("unavailable_ms").isNull(), 1).otherwise(0)).alias("revocations_open"),
        F.sum("unavailable_ms").alias("unavailable_ms_total"),
        *_percentiles("unavailable_ms", "unavailable"),
    )
    per_assignment = partition_events.filter(F.col("kind") == "partitions_assigned").groupBy(*keys).agg(
        F.count(F.lit(1)).alias("partitions_assigned"),
        F.sum(F.col("moved").cast("long")).alias("partitions_moved"),
    )
    per_member = rows.groupBy(*keys).agg(
        F.first("group_type", ignorenulls=True).alias("group_type_any"),
        F.sum(F.when(F.col("kind") == "member_joined", 1).otherwise(0)).alias("members_joined"),
        F.sum(F.when(F.col("kind") == "member_left", 1).otherwise(0)).alias("members_left"),
        F.sum(F.when(F.col("kind") == "session_expired", 1).otherwise(0)).alias("members_fenced_session_timeout"),
    )
    group_day = (
        per_member.join(per_episode, keys, "left").join(per_assignment, keys, "left").join(per_revocation, keys, "left")
        .withColumn("group_type", F.coalesce("group_type", "group_type_any")).drop("group_type_any")
    )
    counts = ["rebalances", "rebalances_completed", "rebalance_triggers", "partitions_assigned", "partitions_moved",
              "partitions_revoked", "revocations_closed", "revocations_open", "unavailable_ms_total"]
    group_day = group_day.fillna(0, subset=counts).select(
        "group_id", "group_type", "day", "rebalances", "rebalances_completed", "rebalance_triggers",
        "rebalance_p50_ms", "rebalance_p95_ms", "rebalance_max_ms", "partitions_assigned", "partitions_moved",
        "partitions_revoked", "revocations_closed", "revocations_open", "unavailable_ms_total",
        "unavailable_p50_ms", "unavailable_p95_ms", "unavailable_max_ms", "members_joined", "members_left",
        "members_fenced_session_timeout",
    ).persist(StorageLevel.MEMORY_AND_DISK)  # one row per group and day: small, used three times

    daily_episodes = episodes.groupBy("day").agg(*_percentiles("duration_ms", "rebalance"))
    daily_unavailable = revocations.groupBy("day").agg(*_percentiles("unavailable_ms", "unavailable"))
    daily = (
        group_day.groupBy("day").agg(
            F.countDistinct("group_id").alias("groups"),
            *[F.sum(c).alias(c) for c in ("rebalances", "rebalances_completed", "partitions_moved", "partitions_revoked",
                                          "unavailable_ms_total", "members_joined", "members_left",
                                          "members_fenced_session_timeout")],
        )
        .join(daily_episodes, "day", "left").join(daily_unavailable, "day", "left").orderBy("day")
    )
    top_groups = (
        group_day.groupBy("group_id").agg(
            F.first("group_type", ignorenulls=True).alias("group_type"),
            *[F.sum(c).alias(c) for c in ("rebalances", "partitions_moved", "unavailable_ms_total",
                                          "members_fenced_session_timeout")],
            F.max("rebalance_max_ms").alias("rebalance_max_ms"),
        )
        .orderBy(F.desc("rebalances"), F.desc("partitions_moved"), F.desc("unavailable_ms_total"), "group_id")
        .limit(top)
    )
    bucket = F.lit(0)
    for i, edge in enumerate(DURATION_BUCKETS_MS):
        bucket = F.when(F.col("duration_ms") >= edge, i).otherwise(bucket)
    histogram = (
        episodes.filter(F.col("duration_ms").isNotNull()).groupBy(bucket.alias("bucket")).count().orderBy("bucket")
    )
    per_partition = revocations.groupBy("group_id", "topic", "partition").agg(
        F.count(F.lit(1)).alias("revocations"),
        F.count("unavailable_ms").alias("revocations_closed"),
        F.sum("unavailable_ms").alias("unavailable_ms_total"),
        F.max("unavailable_ms").alias("unavailable_max_ms"),
    )
    return Report(group_day, daily, top_groups, episodes.drop("ep"), per_partition, histogram)


def write(report: Report, output: Path, title: str = "Rebalance report") -> dict[str, Any]:
    """Write the Parquet tables, collect the small ones, render the HTML report; returns the summary."""
    from . import html

    output.mkdir(parents=True, exist_ok=True)
    tables = output / "tables"
    for name in ("group_day", "episodes", "partition_unavailability", "daily", "top_groups"):
        getattr(report, name).write.mode("overwrite").parquet(str(tables / name))
    # Only these small results reach the driver: one row per day, the top N, the histogram buckets.
    spark = report.daily.sparkSession
    daily = [r.asDict() for r in spark.read.parquet(str(tables / "daily")).orderBy("day").collect()]
    top = [r.asDict() for r in spark.read.parquet(str(tables / "top_groups")).collect()]
    top.sort(key=lambda r: (-r["rebalances"], -r["partitions_moved"], -r["unavailable_ms_total"], r["group_id"]))
    histogram = {r["bucket"]: r["count"] for r in report.duration_histogram.collect()}
    totals = {k: sum(d[k] or 0 for d in daily) for k in (
        "rebalances", "rebalances_completed", "partitions_moved", "partitions_revoked", "unavailable_ms_total",
        "members_joined", "members_left", "members_fenced_session_timeout")}
    groups = spark.read.parquet(str(tables / "group_day")).select("group_id").distinct().count()
    summary = {"days": len(daily), "groups": groups, "totals": totals, "top_groups": top,
               "daily": [{**d, "day": d["day"].isoformat()} for d in daily],
               "duration_histogram": [{"from_ms": DURATION_BUCKETS_MS[b], "count": c} for b, c in sorted(histogram.items())]}
    html.render(output, title, summary)
    (output / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pipeline.rebalance_report",
                                     description="Per-group, per-day rebalance report from the coordinator's history.")
    parser.add_argument("--input", nargs="+", required=True, metavar="PATH", help="exports or history directories")
    parser.add_argument("--output", required=True, type=Path, metavar="DIR")
    parser.add_argument("--master", default="local[*]", help="Spark master (default: %(default)s)")
    parser.add_argument("--top", type=int, default=10, help="how many noisiest groups to list (default: %(default)s)")
    args = parser.parse_args(argv)
    started = time.monotonic()
    spark = spark_session(args.master)
    try:
        summary = write(build(load(spark, args.input), args.top), args.output)
    finally:
        spark.stop()
    totals = summary["totals"]
    print(f"{summary['groups']} groups over {summary['days']} days: {totals['rebalances']} rebalances, "
          f"{totals['partitions_moved']} partitions moved, {totals['members_fenced_session_timeout']} members fenced; "
          f"report in {args.output / 'report.html'} ({time.monotonic() - started:.1f}s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
