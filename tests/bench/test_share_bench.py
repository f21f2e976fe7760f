"""bench/share_bench.py at a tiny size against a real server: every reader gets every record, the
share groups acknowledge each exactly once, and the report's rows carry the targets. No timing
assertion: speed is measured by the bench, never by tests."""

from __future__ import annotations

import asyncio
from pathlib import Path

from bench import share_bench as shb


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
