"""A synthetic rebalance history as a partitioned Parquet dataset, for measuring the pipeline.

    python -m pipeline.synthetic --events 10000000 --groups 10000 --output DIR [--days 7] [--seed 1]
                                 [--workers N]

DIR is replaced by the layout `coordinator history export --format parquet-partitioned` writes:
`day=YYYY-MM-DD/bucket=B/synthetic-BBB-N.parquet`, one file per bucket and day (written by
`coordinator.history.export.write_partitioned_tables`, so the generator and the export cannot drift
apart). A worker process generates whole buckets, column by column (`_Rows`; about 3 µs a row, so
10M rows take ~30 s on two cores); each group's rows depend only on (seed, group index). Each group is classic or consumer, has 2–12 members and 4–64 partitions of one topic, and
goes through rebalance episodes spread over `--days` days, each triggered by a join, a leave or a
session timeout, with the rows the coordinator writes for them: the trigger, the rebalance start
(classic) or epoch bump (consumer), revocations (eager classic groups revoke everything; consumer
groups only what moves), state changes, completion, and assignments after a realistic delay. Row
counts per group are sized so the total is close to `--events`.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import time
from multiprocessing import Pool
from pathlib import Path
from typing import Any

from coordinator.history.export import arrow_schema, write_partitioned_tables
from coordinator.history.schema import SCHEMA_VERSION, group_bucket

MIGRATING = 0.1
"""Share of classic groups upgraded to consumer groups half-way through."""
ROWS_PER_EPISODE = 15
"""About the rows an episode writes (13 on average), so the episodes spread over all the days."""
START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
DAY_MS = 86_400_000


def _range_assign(members: list[str], partitions: int) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {m: [] for m in members}
    if not members:
        return out
    per, extra = divmod(partitions, len(members))
    p = 0
    for i, m in enumerate(members):
        n = per + (1 if i < extra else 0)
        out[m] = list(range(p, p + n))
        p += n
    return out


def _group_id(index: int) -> str:
    return f"group-{index:06d}"


class _Group:
    def __init__(self, rng: random.Random, index: int, days: int) -> None:
        self.rng = rng
        self.group_id = _group_id(index)
        self.group_type = "consumer" if rng.random() < 0.5 else "classic"
        self.partitions = rng.choice((4, 6, 8, 12, 16, 32, 64))
        self.topic = f"topic-{index % 500:03d}"
        self.members: list[str] = []
        self.next_member = 0
        self.epoch = 0
        self.owned: dict[str, list[int]] = {}
        self.days = days

    def new_member(self) -> str:
        self.next_member += 1
        return f"{self.group_id}-m{self.next_member:04d}"


class _Rows:
    """The rows of one bucket, column by column: building a dict per row and converting the dicts
    cost more than the simulation itself. `ts_ms`, `kind`, `group_id` and `group_type` are set on
    every row; other fields as (row, value) pairs, as most rows leave most fields null."""

    def __init__(self) -> None:
        self.n = 0
        self.dense: dict[str, list[Any]] = {"ts_ms": [], "kind": [], "group_id": [], "group_type": []}
        self.sparse: dict[str, tuple[list[int], list[Any]]] = {}

    def add(self, ts: int, kind: str, group_id: str, group_type: str, fields: dict[str, Any]) -> None:
        dense = self.dense
        dense["ts_ms"].append(ts)
        dense["kind"].append(kind)
        dense["group_id"].append(group_id)
        dense["group_type"].append(group_type)
        for name, value in fields.items():
            if value is not None:
                rows, values = self.sparse.setdefault(name, ([], []))
                rows.append(self.n)
                values.append(value)
        self.n += 1

    def truncate(self, n: int) -> None:
        for column in self.dense.values():
            del column[n:]
        for rows, values in self.sparse.values():
            while rows and rows[-1] >= n:
                rows.pop()
                values.pop()
        self.n = min(self.n, n)

    def table(self, first_seq: int) -> Any:
        """The rows as a pyarrow table of `arrow_schema()`, `seq` counting from `first_seq`."""
        import pyarrow as pa

        schema = arrow_schema()
        constant = {"v": SCHEMA_VERSION, "node_id": 1, "cluster_id": "synthetic"}
        columns = []
        for field in schema:
            if field.name in self.dense:
                values = self.dense[field.name]
            elif field.name in constant:
                values = [constant[field.name]] * self.n
            elif field.name == "seq":
                values = list(range(first_seq, first_seq + self.n))
            else:
                values = [None] * self.n
                for row, value in zip(*self.sparse.get(field.name, ([], [])), strict=True):
                    values[row] = value
            columns.append(pa.array(values, field.type))
        return pa.Table.from_arrays(columns, schema=schema)


def _group_rows(rows: _Rows, index: int, events: int, days: int, seed: int) -> None:
    """Adds the rows of one group (deterministic in (seed, index), whatever the worker count)."""
    rng = random.Random(seed * 1_000_003 + index)
    group = _Group(rng, index, days)
    start = rows.n
    span = days * DAY_MS
    gap = max(1, span // max(1, events // ROWS_PER_EPISODE))  # mean time between triggers
    t = START_MS + rng.randrange(0, gap)
    # Some classic groups are upgraded half-way: every member leaves, then KIP-848 members take the
    # empty group over (the coordinator's offline upgrade), as `group_type_changed` shows.
    migrate_at = events // 2 if group.group_type == "classic" and rng.random() < MIGRATING else None
    while rows.n - start < events:
        t += rng.randrange(1, 2 * gap)
        if t >= START_MS + span:
            t = START_MS + span - 1
        if migrate_at is not None and rows.n - start >= migrate_at:
            migrate_at = None
            while group.members:
                _episode(group, rng, t, rows, leave=True)
                t += 1_000
            _row(rows, group, t, "group_type_changed", old_group_type="classic", group_type="consumer")
            group.group_type = "consumer"
            group.epoch = 0
            continue
        _episode(group, rng, t, rows)
    rows.truncate(start + events)


def _generate_bucket(args: tuple[int, list[int], int, int, int, int, Path]) -> int:
    """Every group of one bucket, as that bucket's files of each day."""
    bucket, indexes, per_group, extra, days, seed, output = args
    rows = _Rows()
    for index in indexes:
        _group_rows(rows, index, per_group + (1 if index < extra else 0), days, seed)
    return write_partitioned_tables([rows.table(bucket * 10**12)], output, basename=f"synthetic-{bucket:03d}",
                                    replace=False)


def _row(rows: _Rows, group: _Group, ts: int, kind: str, **fields: Any) -> None:
    rows.add(ts, kind, group.group_id, fields.pop("group_type", group.group_type), fields)


def _parts(group: _Group, partitions: list[int]) -> list[dict[str, Any]]:
    return [{"topic": group.topic, "partitions": sorted(partitions)}]


def _episode(group: _Group, rng: random.Random, t: int, rows: _Rows, leave: bool = False) -> None:
    """One trigger (a leave when `leave`) and the rebalance it causes."""
    members = group.members
    roll = 0.5 if leave else rng.random()
    if not leave and (len(members) < 2 or (roll < 0.45 and len(members) < 12)):
        trigger, member = "join", group.new_member()
        _row(rows, group, t, "member_joined", member_id=member, client_id="synthetic", client_host="/10.0.0.1")
        after = [*members, member]
    else:
        member = rng.choice(members)
        trigger = "leave" if roll < 0.8 else "timeout"
        if trigger == "timeout":
            t += 45_000  # the session timeout passes before the coordinator notices
            _row(rows, group, t, "session_expired", member_id=member)
        reason = "leave-group" if trigger == "leave" else "session-timeout"
        _row(rows, group, t, "member_left", member_id=member, reason=reason)
        if group.group_type == "consumer" and trigger == "timeout":
            _row(rows, group, t, "member_fenced", member_id=member, reason=reason,
                 partition_count=len(group.owned.get(member, [])))
        held = group.owned.pop(member, [])
        if held:
            _row(rows, group, t, "partitions_revoked", member_id=member, partitions=_parts(group, held),
                 partition_count=len(held), reason=reason)
        after = [m for m in members if m != member]
    target = _range_assign(after, group.partitions)
    if group.group_type == "classic":
        _classic_rebalance(group, rng, t, after, target, rows)
    else:
        _consumer_rebalance(group, rng, t, after, target, rows)
    group.members = after


def _classic_rebalance(group: _Group, rng: random.Random, t: int, after: list[str],
                       target: dict[str, list[int]], rows: _Rows) -> None:
    gen = group.epoch
    _row(rows, group, t, "rebalance_started", generation_id=gen, reason="synthetic")
    for m, held in sorted(group.owned.items()):
        if held:
            _row(rows, group, t, "partitions_revoked", member_id=m, partitions=_parts(group, held),
                 partition_count=len(held), generation_id=gen, reason="eager-rebalance")
    group.owned = {}
    _row(rows, group, t, "group_state_changed", old_state="Stable", new_state="PreparingRebalance")
    join = t + int(rng.lognormvariate(5.5, 1.0))  # ~250 ms median, long tail
    _row(rows, group, join, "group_state_changed", old_state="PreparingRebalance", new_state="CompletingRebalance")
    done = join + int(rng.lognormvariate(3.0, 0.8))
    group.epoch += 1
    if not after:
        _row(rows, group, done, "group_state_changed", old_state="CompletingRebalance", new_state="Empty")
    else:
        _row(rows, group, done, "group_state_changed", old_state="CompletingRebalance", new_state="Stable")
    _row(rows, group, done, "rebalance_completed", generation_id=group.epoch, duration_ms=float(done - t),
         member_count=len(after))
    for m in after:
        if target[m]:
            _row(rows, group, done, "partitions_assigned", member_id=m, partitions=_parts(group, target[m]),
                 partition_count=len(target[m]), generation_id=group.epoch)
            group.owned[m] = target[m]


def _consumer_rebalance(group: _Group, rng: random.Random, t: int, after: list[str],
                        target: dict[str, list[int]], rows: _Rows) -> None:
    group.epoch += 1
    epoch = group.epoch
    _row(rows, group, t, "group_epoch_bumped", group_epoch=epoch, reason="synthetic")
    _row(rows, group, t, "target_assignment_computed", group_epoch=epoch, assignor="uniform",
         member_count=len(after), partition_count=group.partitions, duration_ms=rng.random())
    if not after:
        _row(rows, group, t, "group_state_changed", old_state="Reconciling", new_state="Empty")
        group.owned = {}
        return
    _row(rows, group, t, "group_state_changed", old_state="Stable", new_state="Reconciling")
    now = t
    freed: list[int] = []
    for m in sorted(group.owned):
        keep = set(target.get(m, []))
        lose = [p for p in group.owned[m] if p not in keep]
        if lose:
            now += int(rng.lognormvariate(4.0, 1.0))  # the member's next heartbeat
            _row(rows, group, now, "member_assignment_changed", member_id=m, member_epoch=epoch - 1,
                 assigned_count=0, revoked_count=len(lose))
            _row(rows, group, now, "partitions_revoked", member_id=m, partitions=_parts(group, lose),
                 partition_count=len(lose), member_epoch=epoch - 1)
            group.owned[m] = [p for p in group.owned[m] if p in keep]
            freed += lose
    owned_now = {p for held in group.owned.values() for p in held}
    for m in after:
        gain = [p for p in target[m] if p not in owned_now]
        if gain:
            now += int(rng.lognormvariate(4.5, 1.0))  # the revocations are acknowledged first
            _row(rows, group, now, "member_assignment_changed", member_id=m, member_epoch=epoch,
                 assigned_count=len(gain), revoked_count=0)
            _row(rows, group, now, "partitions_assigned", member_id=m, partitions=_parts(group, gain),
                 partition_count=len(gain), member_epoch=epoch)
            group.owned[m] = sorted([*group.owned.get(m, []), *gain])
    now += int(rng.lognormvariate(3.0, 1.0))
    _row(rows, group, now, "group_state_changed", old_state="Reconciling", new_state="Stable")


def generate(events: int, groups: int, output: Path, days: int = 7, workers: int | None = None,
             seed: int = 1) -> int:
    """Write the dataset (replacing `output`); returns the row count."""
    if output.exists():
        shutil.rmtree(output)
    output.mkdir(parents=True)
    per_group, extra = divmod(events, groups)
    by_bucket: dict[int, list[int]] = {}
    for index in range(groups):
        by_bucket.setdefault(group_bucket(_group_id(index)), []).append(index)
    jobs = [(b, indexes, per_group, extra, days, seed, output) for b, indexes in sorted(by_bucket.items())]
    workers = workers or os.cpu_count() or 1
    if workers == 1:
        return sum(map(_generate_bucket, jobs))
    with Pool(workers) as pool:
        return sum(pool.imap_unordered(_generate_bucket, jobs))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pipeline.synthetic", description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, required=True)
    parser.add_argument("--groups", type=int, required=True)
    parser.add_argument("--output", type=Path, required=True)
    parser.add_argument("--days", type=int, default=7)
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    started = time.monotonic()
    written = generate(args.events, args.groups, args.output, args.days, args.workers, args.seed)
    print(f"wrote {written} rows for {args.groups} groups to {args.output} in {time.monotonic() - started:.1f}s",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
