"""bench/share_bench.py at a tiny size against a real server: every reader gets every record, the
share groups acknowledge each exactly once, and the report's rows carry the targets. No timing
assertion: speed is measured by the bench, never by tests."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bench import share_bench as shb
from coordinator.shards.placement import DEFAULT_PARTITIONS, ShardLayout


def test_every_reader_gets_every_record_once_and_the_rows_carry_the_targets(tmp_path: Path) -> None:
    runs = asyncio.run(shb.sitting(3_000, 1, shb.KINDS, tmp_path))
    assert sorted((r.kind, r.topic) for r in runs) == sorted(
        [("plain", "share1"), ("share-x1", "share1"), ("share-x4", "share1"), ("plain", "share2"),
         ("share-x4", "share2")])
    # A record acquired twice would be acknowledged twice and overshoot the count.
    assert all(r.records == 3_000 for r in runs), [(r.kind, r.topic, r.records) for r in runs]
    rows = {(row.detail["kind"], row.detail["topic"]): row for row in shb.rows(runs) if row.detail}
    assert len(rows) == 5
    one, four = rows[("share-x1", "share1")], rows[("share-x4", "share1")]
    assert (one.target, four.target) == ("≥ 0.5× plain", "> share ×1 on 1 partition")
    assert one.met in ("yes", "**no**") and four.met in ("yes", "**no**")


def test_a_share_group_placed_on_shard_1_of_two_is_read_through_shard_0_once(tmp_path: Path) -> None:
    """``--shards 2 --group-shard 1``: the raw members and a ShareConsumer, bootstrapped at shard 0,
    each read every record of a group the placement puts on shard 1 (forwarded), none twice."""
    kinds = ["share-x1", "share-x4", "share-client-x1"]
    runs = asyncio.run(shb.sitting(2_000, 1, kinds, tmp_path, two_partitions=False, shards=2, group_shard=1))
    assert sorted(r.kind for r in runs) == sorted(kinds)
    assert all(r.records == 2_000 for r in runs), [(r.kind, r.records) for r in runs]
    # Server CPU is the supervisor's and both shards' together: shard 1 served the group.
    assert all(len(r.process_cpu_s) == 3 and r.server_cpu_s == sum(r.process_cpu_s) for r in runs)
    layout = ShardLayout(DEFAULT_PARTITIONS, 2)
    assert layout.shard_of_group(shb.group_id("share-x1-1", layout, 1)) == 1
    assert shb.group_id("share-x1-1", layout, None) == "share-x1-1"  # without --group-shard: as named


def test_a_group_shard_the_server_does_not_have_is_refused_before_anything_starts(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="--group-shard must be between 0 and 0"):
        asyncio.run(shb.sitting(10, 1, ["share-x1"], tmp_path, group_shard=1))
    assert not (tmp_path / "data").exists()
    with pytest.raises(SystemExit) as exited:  # from the command line: argparse's one line, exit 2
        shb.main(["--shards", "2", "--group-shard", "2"])
    assert exited.value.code == 2
