"""The synthetic history (built column by column) lands in the partitions the export defines, has the
requested row count, and does not depend on the number of worker processes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.dataset as ds

from coordinator.history.export import write_partitioned
from coordinator.history.schema import day_of, group_bucket
from pipeline.synthetic import generate


def _rows(path: Path) -> list[dict[str, Any]]:
    table = ds.dataset(path, partitioning="hive").to_table()
    return sorted(table.to_pylist(), key=lambda r: r["seq"])


def test_every_row_is_in_its_day_and_bucket_and_workers_do_not_change_the_rows(tmp_path: Path) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    assert generate(20_000, 40, one, days=3, workers=1) == 20_000
    assert generate(20_000, 40, two, days=3, workers=2) == 20_000
    rows = _rows(one)
    assert len(rows) == 20_000 and rows == _rows(two)
    for row in rows:
        assert (row["day"], row["bucket"]) == (day_of(row["ts_ms"]), group_bucket(row["group_id"]))
    assert {r["kind"] for r in rows} >= {"partitions_assigned", "partitions_revoked", "group_state_changed",
                                         "rebalance_started", "group_epoch_bumped", "group_type_changed"}
    assert len({r["group_id"] for r in rows}) == 40


def test_the_export_puts_rows_before_the_epoch_on_their_day(tmp_path: Path) -> None:
    # The partition keys are computed vectorised: whole days round down, as `day_of` does.
    rows = [{"v": 1, "ts_ms": ts, "seq": i, "node_id": 1, "cluster_id": "c", "kind": "member_joined", "group_id": g}
            for i, (ts, g) in enumerate([(-1, "a"), (0, "b"), (86_400_000 * 5 - 1, "c"), (86_400_000 * 5, "a")])]
    assert write_partitioned(rows, tmp_path) == 4
    for row in _rows(tmp_path):
        assert (row["day"], row["bucket"]) == (day_of(row["ts_ms"]), group_bucket(row["group_id"]))
