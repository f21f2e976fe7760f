"""The report's tables, computed on Spark from history rows (definitions: `pipeline.rebalance_report`).

Plan: one pass over the events, two wide stages that matter
------------------------------------------------------------
The events are read once, shuffled once, and reduced to a few million aggregated rows (`facts`) in
the same tasks that receive the shuffle; every table is then computed from those. Stages:

1. Scan (narrow): only the columns used (`COLUMNS`; Parquet reads nothing else) and only the kinds
   used (`KINDS_USED`; state changes only into Stable/Empty), filtered before anything moves.
2. **Wide stage 1, the only shuffle of events**: `repartition(n, group_id)`. It is needed because
   everything computed per event needs a group's rows in time order (episode numbering, the type of
   each lifetime, each partition's previous and next event), and a group's rows are spread over
   every day's files (or JSON lines) of the input: they must meet in one task. Keyed by the group,
   not by (day, group): rebalances and revocations that cross midnight need both days' rows; the
   day is only a grouping key further up. `n` is sized to the input (`shuffle_partitions`).
3. Narrow, in the tasks of the shuffle's reduce side (the hash partitioning on group_id satisfies
   every window and aggregation below, as they are all keyed by group_id plus more, so none of them
   shuffles again): a sort by (group, ts_ms, seq) and one pass of running aggregates per group
   (episode number, lifetime type); the partition lists are exploded; a sort by (group, topic,
   partition, ts_ms, seq) and one lag/lead pass (previous owner, next event); then one hash
   aggregation into `facts` (see there), keyed by what a row counts for: a rebalance start or end
   by (group, type, day, episode), a partition row by (group, type, day, topic, partition), any
   other row by (group, type, day). Each sort is within one task, with a 64-bit hash of its key
   first (the sort's prefix), and there is no global sort and no window over all events. `facts`
   (3.4M rows for 10M events) is the only large frame persisted: the exploded rows (23.5M for 10M
   events) are never stored, and without `facts` each table would scan and shuffle the input
   again. This stage is ~2/3 of the job's task time (BENCHMARKS.md).
4. Narrow, over `facts` (persisted frames keep their partitioning by group): `episodes` (merging an
   episode's parts on two days), `group_day` (aggregates per (group, type, day) and their joins, all
   partitioned by group, so none shuffles), `partition_unavailability`.
5. **Wide stage 2, small**: the per-day and per-type roll-ups (`daily`, `daily_by_type`) group by
   day, so they shuffle, but only `group_day` rows and (day, type, value) counts of the rebalance
   and unavailability times. These stages move kilobytes to a few megabytes. The summary's figures
   (`by_type`, `top_groups`: a take-ordered over one row per lifetime, not a sort; `histogram`)
   read the written tables and are as small.

`tests/pipeline/test_plan.py` holds the plan to this: one shuffle whose input is the file scan,
hash-partitioned by group_id, and no range partitioning, single partition or window without a
partition key in any table's plan.

Percentiles are exact nearest-rank everywhere (`_nearest_rank`): from (keys, value, count) rows, a
window per cell (group and day, or day and type), never over all events.

Group types: each row is labelled with the type the group had at that moment (its own
`group_type`, else the last one seen in the group), so a group that changed type (a
`group_type_changed` row, see `coordinator.history.rows.GroupTypeWatch`) is two lifetimes with
separate figures: keys are (group_id, group_type, day), never group_id alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from coordinator.history.schema import REBALANCE_END_STATES, REBALANCE_START_KINDS

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
KIND_COUNTS = (("member_joined", "members_joined"), ("member_left", "members_left"),
               ("session_expired", "members_fenced_session_timeout"), ("group_type_changed", "group_type_changes"),
               ("partitions_assigned", "partitions_assigned"), ("partitions_revoked", "partitions_revoked"))
"""Row counts per group and day: (kind, column). Partition rows count once per partition."""
START, END, ASSIGNED, REVOKED, VALUE = 1, 2, 3, 4, 9
KIND_CODES = {**dict.fromkeys(REBALANCE_START_KINDS, START), "group_state_changed": END,
              "partitions_assigned": ASSIGNED, "partitions_revoked": REVOKED, "member_joined": 5, "member_left": 6,
              "session_expired": 7, "group_type_changed": 8}
"""Each used kind as a byte (`KINDS_USED`; state changes are only those into Stable or Empty, the
ends). VALUE marks the generated rows that count unavailability times (`facts`)."""


@dataclass
class Tables:
    cached: list[Any]
    group_day: Any
    episodes: Any
    partition_unavailability: Any
    daily: Any
    daily_by_type: Any


def shuffle_partitions(spark: Any, input_bytes: int) -> int:
    """Tasks for the one big shuffle: one per ~2 MB of compressed Parquet input (history compresses
    about 20:1, so that is ~230k rows, ~530k once partition lists are exploded), at least two per
    core. With Spark's default 1 GB heap and two concurrent tasks, the partition sort then spills a
    few MB per task (364 MiB over the 44 tasks of 10M events); half the size per task removes the
    spill but costs as much CPU (BENCHMARKS.md), so fewer, larger tasks it is."""
    cores = int(spark.sparkContext.defaultParallelism)
    return max(2 * cores, min(4000, input_bytes // (2 << 20) + 1))


def per_event(rows: Any, partitions: int) -> Any:
    """The used rows after the one big shuffle, in group order, with what later stages need:
    ts_ms, seq, k (the kind as a `KIND_CODES` byte: cheaper to carry, compare and count than the
    string), group_id, day, owner (group.instance.id when static, else member id), partitions, ep (rebalance starts and ends only: the episode, i.e. the ends seen before the
    row in the group), group_type (of the lifetime)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    kind = F.col("kind")
    used = rows.filter(kind.isin(*KINDS_USED) & ((kind != "group_state_changed")
                                                  | F.col("new_state").isin(*REBALANCE_END_STATES)))
    code = F.coalesce(*[F.when(kind == name, F.lit(c).cast("byte")) for name, c in KIND_CODES.items()])
    k = F.col("k")
    is_end = k == END
    # The hash first: the sort compares 64-bit prefixes instead of group ids that share their first bytes.
    by_group = Window.partitionBy(F.xxhash64("group_id"), "group_id").orderBy("ts_ms", "seq")
    typed = F.when(F.col("group_type") != "", F.col("group_type"))
    return (
        used.select("ts_ms", "seq", code.alias("k"), "group_id", "group_type", "day",
                    F.coalesce("group_instance_id", "member_id").alias("owner"), "partitions")
        .repartition(partitions, "group_id")
        .select("ts_ms", "seq", "k", "group_id", "day", "owner", "partitions",
                F.when((k == START) | is_end, F.coalesce(F.sum(is_end.cast("int")).over(
                    by_group.rowsBetween(Window.unboundedPreceding, -1)), F.lit(0))).alias("ep"),
                F.coalesce(F.last(typed, ignorenulls=True).over(
                    by_group.rowsBetween(Window.unboundedPreceding, Window.currentRow)), F.lit("")).alias("group_type"))
    )


def enriched(rows: Any, partitions: int) -> Any:
    """`per_event` with the partition lists exploded (other kinds keep one row, with null topic and
    partition) and, per partition row: moved (an assignment to another owner than the partition's
    previous event's) and unavailable_ms (a revocation: time to the partition's next event, when
    that is an assignment). Lazy and never persisted: `facts` aggregates it in the same tasks."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    exploded = (
        per_event(rows, partitions).select("*", F.explode_outer("partitions").alias("tp"))
        .select("ts_ms", "seq", "k", "group_id", "day", "owner", "ep", "group_type", F.col("tp.topic").alias("topic"),
                F.explode_outer("tp.partitions").alias("partition"))
    )
    ordered = (Window.partitionBy(F.xxhash64("group_id", "topic", "partition"), "group_id", "topic", "partition")
               .orderBy("ts_ms", "seq"))
    k = F.col("k")
    previous_owner = F.lag("owner").over(ordered)
    return exploded.select(
        "group_id", "group_type", "day", "k", "ts_ms", "ep", "topic", "partition",
        ((k == ASSIGNED) & F.coalesce(previous_owner != F.col("owner"), F.lit(False))).alias("moved"),
        F.when((k == REVOKED) & (F.lead("k").over(ordered) == ASSIGNED),
               F.lead("ts_ms").over(ordered) - F.col("ts_ms")).alias("unavailable_ms"),
    )


def facts(rows: Any, partitions: int) -> Any:
    """`enriched` aggregated in the tasks that produce it (module docstring, step 3), one row per
    key (group_id, group_type, day, ep, topic, partition, value_ms), of four sorts:

    - an episode's part on one day (ep set; rebalance starts and ends): start_ts, end_ts, triggers;
    - a partition's day (topic and partition set): the `KIND_COUNTS` columns, partitions_moved,
      revocations_closed, revocations_open, unavailable_ms_total, unavailable_max_ms;
    - the other rows of a group's day (all three null): the same columns;
    - how many of a group's revocations that day were closed after value_ms (value_ms set):
      `times`. Each closed revocation is counted a second time under this key (a generated copy
      of its row, with the kind `VALUE` so that no other column counts it), which gives the exact
      percentiles per group and day from the same single aggregation, without keeping the values.

    A hash aggregation of fixed-width buffers (no collect_list, which would make it an object
    aggregation with boxed values)."""
    from pyspark.sql import functions as F

    events = enriched(rows, partitions)
    closed = F.col("unavailable_ms").isNotNull()
    copy = F.col("copy")
    events = events.select("*", F.explode(F.when(closed, F.array(F.lit(False), F.lit(True)))
                                          .otherwise(F.array(F.lit(False)))).alias("copy")).select(
        "group_id", "group_type", "day", "ep", "ts_ms", "moved",
        F.when(~copy, F.col("topic")).alias("topic"), F.when(~copy, F.col("partition")).alias("partition"),
        F.when(copy, F.col("unavailable_ms")).alias("value_ms"),
        F.when(copy, F.lit(VALUE).cast("byte")).otherwise(F.col("k")).alias("k"),
        F.when(~copy, F.col("unavailable_ms")).alias("unavailable_ms"))
    k = F.col("k")
    return events.groupBy("group_id", "group_type", "day", "ep", "topic", "partition", "value_ms").agg(
        F.min(F.when(k == START, F.col("ts_ms"))).alias("start_ts"),
        F.min(F.when(k == END, F.col("ts_ms"))).alias("end_ts"),
        F.sum((k == START).cast("int")).alias("triggers"),
        *[F.sum((k == KIND_CODES[kind]).cast("int")).alias(name) for kind, name in KIND_COUNTS],
        F.sum(F.col("moved").cast("int")).alias("partitions_moved"),
        F.count("unavailable_ms").alias("revocations_closed"),
        F.sum(((k == REVOKED) & F.col("unavailable_ms").isNull()).cast("int")).alias("revocations_open"),
        F.sum("unavailable_ms").alias("unavailable_ms_total"),
        F.max("unavailable_ms").alias("unavailable_max_ms"),
        F.sum((k == VALUE).cast("int")).alias("times"),
    )


def episodes_of(facts: Any) -> Any:
    """One row per rebalance episode: group_id, group_type, ep, start_ts, end_ts, triggers,
    duration_ms (null when not completed), day (of the start). An episode across midnight has a
    `facts` row per day; they are merged here (same group, so no shuffle)."""
    from pyspark.sql import functions as F

    episodes = facts.filter(F.col("ep").isNotNull()).groupBy("group_id", "group_type", "ep").agg(
        F.min("start_ts").alias("start_ts"), F.min("end_ts").alias("end_ts"), F.sum("triggers").alias("triggers"))
    return (
        episodes.filter(F.col("start_ts").isNotNull())
        .withColumn("duration_ms", F.col("end_ts") - F.col("start_ts"))
        .withColumn("day", F.to_date(F.timestamp_millis("start_ts")))
    )


def build(rows: Any, partitions: int = 8) -> Tables:
    """Runs the one pass over the events now (`facts`, persisted) and returns every table, lazily,
    over it. The small frames several tables read are persisted on first use; `unpersist` frees
    them all."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    cells = facts(rows, partitions).persist(StorageLevel.MEMORY_AND_DISK)
    # Materialised before anything is planned over it, so that the plans know it is partitioned by
    # group and read it without a shuffle (an adaptive plan's partitioning is known once it ran).
    cells.count()
    episodes = episodes_of(cells).persist(StorageLevel.MEMORY_AND_DISK)  # ~1/15 of the events; five readers
    episodes.count()
    per_episode = episodes.groupBy(*GROUP_DAY).agg(
        F.count(F.lit(1)).alias("rebalances"),
        F.count("end_ts").alias("rebalances_completed"),
        F.sum("triggers").alias("rebalance_triggers"),
    )
    rebalance_ranks = _nearest_rank(
        episodes.filter(F.col("duration_ms").isNotNull()).groupBy(*GROUP_DAY, "duration_ms").count(),
        list(GROUP_DAY), "duration_ms", "rebalance")
    # Every (group, type, day) with a used row has a row, rebalance starts and ends included.
    per_row = cells.groupBy(*GROUP_DAY).agg(
        *[F.sum(name).alias(name) for _, name in KIND_COUNTS],
        *[F.sum(c).alias(c) for c in ("partitions_moved", "revocations_closed", "revocations_open",
                                      "unavailable_ms_total")],
    )
    values = cells.filter(F.col("value_ms").isNotNull())
    unavailable_ranks = _nearest_rank(
        values.select(*GROUP_DAY, F.col("value_ms").alias("unavailable_ms"), F.col("times").alias("count")),
        list(GROUP_DAY), "unavailable_ms", "unavailable")
    # Each side joined with its percentiles first: every join is then between frames partitioned
    # by group (the full join's coalesced keys would not be).
    group_day = (
        per_row.join(unavailable_ranks, list(GROUP_DAY), "left")
        .join(per_episode.join(rebalance_ranks, list(GROUP_DAY), "left"), list(GROUP_DAY), "full")
        .fillna(0, subset=list(COUNTS)).select(*GROUP_DAY_COLUMNS)
        .persist(StorageLevel.MEMORY_AND_DISK)  # one row per group and day; three readers
    )
    per_partition = cells.filter(F.col("partitions_revoked") > 0).select(
        "group_id", "group_type", "day", "topic", "partition", F.col("partitions_revoked").alias("revocations"),
        "revocations_closed", "unavailable_ms_total", "unavailable_max_ms")
    # The rebalance and unavailability times counted per (day, type, value): small, read by both roll-ups.
    durations = (episodes.filter(F.col("duration_ms").isNotNull()).groupBy("day", "group_type", "duration_ms")
                 .count().persist(StorageLevel.MEMORY_AND_DISK))
    unavailable = (values.groupBy("day", "group_type", F.col("value_ms").alias("unavailable_ms"))
                   .agg(F.sum("times").alias("count")).persist(StorageLevel.MEMORY_AND_DISK))
    return Tables(
        cached=[cells, episodes, group_day, durations, unavailable],
        group_day=group_day,
        episodes=episodes,
        partition_unavailability=per_partition,
        daily=_rollup(group_day, durations, unavailable, ["day"]),
        daily_by_type=_rollup(group_day, durations, unavailable, ["day", "group_type"]),
    )


def unpersist(tables: Tables) -> None:
    for frame in tables.cached:
        frame.unpersist()


def _rollup(group_day: Any, durations: Any, unavailable: Any, keys: list[str]) -> Any:
    """Sums of the group-day rows per `keys`, with percentiles over the episodes and revocations
    themselves (a percentile of per-group percentiles would mean nothing). `durations` and
    `unavailable` are the (day, group_type, value, count) pre-aggregates: one pass over the
    episodes and one over the revocations serve every roll-up."""
    from pyspark.sql import functions as F

    sums = group_day.groupBy(*keys).agg(
        F.countDistinct("group_id").alias("groups"), *[F.sum(c).alias(c) for c in DAILY_SUMS])
    times = durations.groupBy(*keys, "duration_ms").agg(F.sum("count").alias("count"))
    counted = unavailable.groupBy(*keys, "unavailable_ms").agg(F.sum("count").alias("count"))
    return (sums.join(_nearest_rank(times, keys, "duration_ms", "rebalance"), keys, "left")
            .join(_nearest_rank(counted, keys, "unavailable_ms", "unavailable"), keys, "left"))


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
    times = _nearest_rank(episodes.filter(F.col("duration_ms").isNotNull()).groupBy("group_type", "duration_ms").count(),
                          ["group_type"], "duration_ms", "rebalance")
    return sorted((r.asDict() for r in sums.join(times, "group_type", "left").collect()),
                  key=lambda r: r["group_type"])
