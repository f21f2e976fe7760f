"""The report's tables, computed on Spark from history rows (definitions: `pipeline.rebalance_report`).

Plan and shuffles
-----------------
The job is built so that the 10M-row input crosses the network (or, locally, the disk) once:

1. Scan (narrow): only the columns used (`COLUMNS`; Parquet reads nothing else) and only the kinds
   used (`KINDS_USED`; state changes only into Stable/Empty), filtered before anything moves.
2. **Shuffle 1 — the only wide stage over events**: `repartition(n, group_id)`. Everything computed
   per event needs a group's rows in order (episode numbering, the type of each lifetime, each
   partition's previous and next event), so a group's rows must meet in one task. Keyed by the group
   hash, not by (day, group hash): rebalances and revocations that cross midnight need both days'
   rows; the day is only a grouping key further up. `n` is sized to the input (`shuffle_partitions`).
3. Narrow, inside the tasks of the shuffle's reduce side (the hash partitioning on group_id satisfies
   every window below, as they are all partitioned by group_id plus more): a sort by (group_id,
   ts_ms, seq) and one pass of running aggregates per group (episode number, lifetime type); the
   partition lists are exploded; a sort by (group_id, topic, partition, ts_ms, seq) and one lag/lead
   pass (previous owner, next event). Every window is partitioned by group: there is no global sort
   and no window over all events. The result (`enriched`, narrow columns) is persisted (memory,
   spilling to disk) because three branches read it; without that each branch would scan and
   shuffle the input again.
4. Aggregations per episode (group_id, group_type, ep), per (group_id, group_type, day) and per
   partition and day: hash aggregations whose partial step runs on the persisted rows, so what they
   shuffle is one partial row per key and task, not events.
5. Small wide stages over aggregated rows only: the join of the per-group-day aggregates, the per-day
   and per-type roll-ups with their percentiles (rebalance times: partial sketches per task;
   unavailability: exact nearest-rank from one (day, type, value) count of the revocations), the top-N (`limit` over
   an ordering: a take-ordered, not a sort of the data). These move kilobytes to a few megabytes.

Group types: each row is labelled with the type the group had at that moment (its own
`group_type`, else the last one seen in the group), so a group that changed type (a
`group_type_changed` row, see `coordinator.history.rows.GroupTypeWatch`) is two lifetimes with
separate figures: keys are (group_id, group_type, day), never group_id alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from coordinator.history.schema import REBALANCE_END_STATES, REBALANCE_START_KINDS

PERCENTILE_ACCURACY = 10_000
DURATION_BUCKETS_MS = (0, 10, 30, 100, 300, 1_000, 3_000, 10_000, 30_000, 60_000, 300_000)
COLUMNS = ("ts_ms", "seq", "kind", "group_id", "group_type", "member_id", "group_instance_id", "new_state",
           "partitions")
KINDS_USED = (*REBALANCE_START_KINDS, "group_state_changed", "partitions_revoked", "partitions_assigned",
              "member_joined", "member_left", "session_expired", "group_type_changed")
GROUP_DAY = ("group_id", "group_type", "day")
COUNTS = ("rebalances", "rebalances_completed", "rebalance_triggers", "partitions_assigned", "partitions_moved",
          "partitions_revoked", "revocations_closed", "revocations_open", "unavailable_ms_total",
          "members_joined", "members_left", "members_fenced_session_timeout", "group_type_changes")
GROUP_DAY_COLUMNS = (
    *GROUP_DAY, "rebalances", "rebalances_completed", "rebalance_triggers", "rebalance_p50_ms", "rebalance_p95_ms",
    "rebalance_max_ms", "partitions_assigned", "partitions_moved", "partitions_revoked", "revocations_closed",
    "revocations_open", "unavailable_ms_total", "unavailable_p50_ms", "unavailable_p95_ms", "unavailable_max_ms",
    "members_joined", "members_left", "members_fenced_session_timeout", "group_type_changes",
)
DAILY_SUMS = ("rebalances", "rebalances_completed", "partitions_moved", "partitions_revoked", "unavailable_ms_total",
              "members_joined", "members_left", "members_fenced_session_timeout", "group_type_changes")


@dataclass
class Tables:
    cached: list[Any]
    group_day: Any
    episodes: Any
    partition_unavailability: Any
    daily: Any
    daily_by_type: Any


def _percentiles(column: str, prefix: str) -> list[Any]:
    from pyspark.sql import functions as F

    p = F.percentile_approx(column, [0.5, 0.95], PERCENTILE_ACCURACY)
    return [p[0].alias(f"{prefix}_p50_ms"), p[1].alias(f"{prefix}_p95_ms"), F.max(column).alias(f"{prefix}_max_ms")]


def shuffle_partitions(spark: Any, input_bytes: int) -> int:
    """Tasks for the one big shuffle: one per ~4 MB of compressed Parquet input (history compresses
    about 20:1, so that is ~600k rows, ~1.5M once partition lists are exploded: sorts that fit in a
    default 1 GB heap), at least two per core."""
    cores = int(spark.sparkContext.defaultParallelism)
    return max(2 * cores, min(2000, input_bytes // (4 << 20) + 1))


def enriched(rows: Any, partitions: int) -> Any:
    """The used rows after the one big shuffle, one row per event and, for partition rows, one per
    partition, with everything later stages need (nothing else: the frame is persisted, three
    branches read it):

    group_id, group_type (of the lifetime), day, kind, ts_ms, is_start, is_end, ep (the rebalance
    episode: ends seen before the row in the group), topic, partition (null for other kinds), moved
    (an assignment to another owner than the partition's previous event's), unavailable_ms (a
    revocation: time to the partition's next event, when that is an assignment)."""
    from pyspark import StorageLevel
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    kind = F.col("kind")
    used = rows.filter(kind.isin(*KINDS_USED) & ((kind != "group_state_changed")
                                                  | F.col("new_state").isin(*REBALANCE_END_STATES)))
    is_end = kind == "group_state_changed"
    by_group = Window.partitionBy("group_id").orderBy("ts_ms", "seq")
    typed = F.when(F.col("group_type") != "", F.col("group_type"))
    per_event = (
        used.select("ts_ms", "seq", "kind", "group_id", "group_type", "day",
                    F.coalesce("group_instance_id", "member_id").alias("owner"), "partitions")
        .repartition(partitions, "group_id")
        .select("ts_ms", "seq", "kind", "group_id", "day", "owner", "partitions",
                kind.isin(*REBALANCE_START_KINDS).alias("is_start"), is_end.alias("is_end"),
                F.coalesce(F.sum(is_end.cast("int")).over(by_group.rowsBetween(Window.unboundedPreceding, -1)),
                           F.lit(0)).alias("ep"),
                F.coalesce(F.last(typed, ignorenulls=True).over(
                    by_group.rowsBetween(Window.unboundedPreceding, Window.currentRow)), F.lit("")).alias("group_type"))
    )
    # Other kinds keep one row (null topic and partition): explode_outer of a null list.
    per_partition = (
        per_event.select("*", F.explode_outer("partitions").alias("tp")).drop("partitions")
        .select("*", F.col("tp.topic").alias("topic"), F.explode_outer("tp.partitions").alias("partition")).drop("tp")
    )
    ordered = Window.partitionBy("group_id", "topic", "partition").orderBy("ts_ms", "seq")
    assigned = kind == "partitions_assigned"
    revoked = kind == "partitions_revoked"
    previous_owner = F.lag("owner").over(ordered)
    return per_partition.select(
        "group_id", "group_type", "day", "kind", "ts_ms", "is_start", "is_end", "ep", "topic", "partition",
        (assigned & previous_owner.isNotNull() & (previous_owner != F.col("owner"))).alias("moved"),
        F.when(revoked & (F.lead("kind").over(ordered) == "partitions_assigned"),
               F.lead("ts_ms").over(ordered) - F.col("ts_ms")).alias("unavailable_ms"),
    ).persist(StorageLevel.MEMORY_AND_DISK)


def episodes_of(events: Any) -> Any:
    """One row per rebalance episode: group_id, group_type, ep, start_ts, end_ts, triggers,
    duration_ms (null when not completed), day (of the start)."""
    from pyspark.sql import functions as F

    episodes = events.filter(F.col("is_start") | F.col("is_end")).groupBy("group_id", "group_type", "ep").agg(
        F.min(F.when(F.col("is_start"), F.col("ts_ms"))).alias("start_ts"),
        F.min(F.when(F.col("is_end"), F.col("ts_ms"))).alias("end_ts"),
        F.sum(F.col("is_start").cast("int")).alias("triggers"),
    )
    return (
        episodes.filter(F.col("start_ts").isNotNull())
        .withColumn("duration_ms", F.col("end_ts") - F.col("start_ts"))
        .withColumn("day", F.to_date(F.timestamp_millis("start_ts")))
    )


def build(rows: Any, partitions: int = 8) -> Tables:
    """Every table, lazily (nothing runs until a table is written). The frames read by several
    tables are persisted on first use, so each is computed once; `unpersist` frees them."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    events = enriched(rows, partitions)
    episodes = episodes_of(events).persist(StorageLevel.MEMORY_AND_DISK)  # ~1/15 of the rows; six readers
    per_episode = episodes.groupBy(*GROUP_DAY).agg(
        F.count(F.lit(1)).alias("rebalances"),
        F.count("end_ts").alias("rebalances_completed"),
        F.sum("triggers").alias("rebalance_triggers"),
        *_percentiles("duration_ms", "rebalance"),
    )
    kind = F.col("kind")
    revoked = kind == "partitions_revoked"
    per_row = events.groupBy(*GROUP_DAY).agg(
        *[F.sum((kind == k).cast("int")).alias(name) for k, name in (
            ("member_joined", "members_joined"), ("member_left", "members_left"),
            ("session_expired", "members_fenced_session_timeout"), ("group_type_changed", "group_type_changes"),
            ("partitions_assigned", "partitions_assigned"), ("partitions_revoked", "partitions_revoked"))],
        F.sum(F.col("moved").cast("int")).alias("partitions_moved"),
        F.count("unavailable_ms").alias("revocations_closed"),
        F.sum((revoked & F.col("unavailable_ms").isNull()).cast("int")).alias("revocations_open"),
        F.sum("unavailable_ms").alias("unavailable_ms_total"),
        *_percentiles("unavailable_ms", "unavailable"),
    )
    group_day = (
        per_row.join(per_episode, list(GROUP_DAY), "full")
        .fillna(0, subset=list(COUNTS)).select(*GROUP_DAY_COLUMNS)
        .persist(StorageLevel.MEMORY_AND_DISK)  # one row per group and day; four readers
    )
    revocations = events.filter(revoked)
    per_partition = revocations.groupBy("group_id", "group_type", "day", "topic", "partition").agg(
        F.count(F.lit(1)).alias("revocations"),
        F.count("unavailable_ms").alias("revocations_closed"),
        F.sum("unavailable_ms").alias("unavailable_ms_total"),
        F.max("unavailable_ms").alias("unavailable_max_ms"),
    )
    # The unavailability times counted per (day, type, value): small, read by both roll-ups.
    unavailable = (revocations.filter(F.col("unavailable_ms").isNotNull())
                   .groupBy("day", "group_type", "unavailable_ms").count().persist(StorageLevel.MEMORY_AND_DISK))
    return Tables(
        cached=[events, episodes, group_day, unavailable],
        group_day=group_day,
        episodes=episodes,
        partition_unavailability=per_partition,
        daily=_rollup(group_day, episodes, unavailable, ["day"]),
        daily_by_type=_rollup(group_day, episodes, unavailable, ["day", "group_type"]),
    )


def unpersist(tables: Tables) -> None:
    for frame in tables.cached:
        frame.unpersist()


def _rollup(group_day: Any, episodes: Any, unavailable: Any, keys: list[str]) -> Any:
    """Sums of the group-day rows per `keys`, with percentiles over the episodes and revocations
    themselves (a percentile of per-group percentiles would mean nothing). `unavailable` is the
    (day, group_type, unavailable_ms, count) pre-aggregate: one pass over the revocations serves
    every roll-up."""
    from pyspark.sql import functions as F

    sums = group_day.groupBy(*keys).agg(
        F.countDistinct("group_id").alias("groups"), *[F.sum(c).alias(c) for c in DAILY_SUMS])
    times = episodes.groupBy(*keys).agg(*_percentiles("duration_ms", "rebalance"))
    counted = unavailable.groupBy(*keys, "unavailable_ms").agg(F.sum("count").alias("count"))
    return sums.join(times, keys, "left").join(_nearest_rank(counted, keys, "unavailable_ms", "unavailable"), keys, "left")


def _nearest_rank(counted: Any, keys: list[str], column: str, prefix: str) -> Any:
    """Exact nearest-rank p50, p95 and the max of `column` per `keys`, from (keys, value, count)
    rows: the smallest value whose cumulative count reaches ceil(p × n)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    ordered = Window.partitionBy(*keys).orderBy(column)
    ranked = counted.select(
        *keys, column,
        F.sum("count").over(ordered.rowsBetween(Window.unboundedPreceding, Window.currentRow)).alias("cumulative"),
        F.sum("count").over(Window.partitionBy(*keys)).alias("n"))

    def rank(p: float) -> Any:
        return F.min(F.when(F.col("cumulative") >= F.ceil(F.col("n") * p), F.col(column)))

    return ranked.groupBy(*keys).agg(rank(0.5).alias(f"{prefix}_p50_ms"), rank(0.95).alias(f"{prefix}_p95_ms"),
                                     F.max(column).alias(f"{prefix}_max_ms"))


def top_groups(group_day: Any, top: int) -> list[dict[str, Any]]:
    """The `top` noisiest lifetimes (group_id, group_type) by rebalances, then partitions moved, then
    unavailability: a `takeOrdered` over one row per lifetime, not a sort."""
    from pyspark.sql import functions as F

    per_lifetime = group_day.groupBy("group_id", "group_type").agg(
        *[F.sum(c).alias(c) for c in ("rebalances", "partitions_moved", "unavailable_ms_total",
                                      "members_fenced_session_timeout")],
        F.max("rebalance_max_ms").alias("rebalance_max_ms"),
    )
    rows = per_lifetime.orderBy(F.desc("rebalances"), F.desc("partitions_moved"), F.desc("unavailable_ms_total"),
                                "group_id", "group_type").limit(top).collect()
    return [r.asDict() for r in rows]


def histogram(episodes: Any) -> list[dict[str, int]]:
    """Completed rebalances per duration bucket (`DURATION_BUCKETS_MS`: bucket i counts durations in
    [edge i, edge i+1))."""
    from pyspark.sql import functions as F

    bucket = F.lit(0)
    for i, edge in enumerate(DURATION_BUCKETS_MS):
        bucket = F.when(F.col("duration_ms") >= edge, i).otherwise(bucket)
    counts = episodes.filter(F.col("duration_ms").isNotNull()).groupBy(bucket.alias("bucket")).count().collect()
    return [{"from_ms": DURATION_BUCKETS_MS[r["bucket"]], "count": r["count"]} for r in sorted(counts)]


def by_type(group_day: Any, episodes: Any) -> list[dict[str, Any]]:
    """Figures per group type over the whole period: lifetimes, rebalances and their time, moves,
    unavailability."""
    from pyspark.sql import functions as F

    sums = group_day.groupBy("group_type").agg(
        F.countDistinct("group_id").alias("groups"),
        *[F.sum(c).alias(c) for c in ("rebalances", "rebalances_completed", "partitions_moved",
                                      "partitions_revoked", "unavailable_ms_total", "members_fenced_session_timeout",
                                      "group_type_changes")])
    times = episodes.groupBy("group_type").agg(*_percentiles("duration_ms", "rebalance"))
    return sorted((r.asDict() for r in sums.join(times, "group_type", "left").collect()),
                  key=lambda r: r["group_type"])
