"""The streams section (`bench/streams_scaleout.py`, `bench/run --only streams`): without the trunk
client it says why instead of failing, at tiny sizes it says it did not run, and a run's numbers
become one table row with the load. The scenario itself runs in
`tests/interop/test_streams_scaleout.py` (slow); only the report's shape is checked here, never a
timing."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import pytest

from bench import streams_scaleout
from bench.suite import QUICK, TINY, section_streams
from tests.support.streams_scaleout import MovedTask, ScaleOut


def test_without_the_trunk_client_the_section_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKA_TRUNK_CLIENTS", str(tmp_path))  # a folder without the jars
    assert streams_scaleout.measure(1, 1_000, tmp_path)[0] == []
    rows = asyncio.run(section_streams(replace(QUICK, streams_runs=1), tmp_path))
    assert len(rows) == 1 and rows[0].result.startswith("not run: no trunk Kafka Streams jars in "), rows


def test_at_tiny_sizes_the_section_says_it_did_not_run(tmp_path: Path) -> None:
    rows = asyncio.run(section_streams(TINY, tmp_path))
    assert len(rows) == 1 and rows[0].result.startswith("not run at tiny sizes"), rows


def test_a_run_becomes_one_row_with_the_longest_moved_gap_and_the_load() -> None:
    result = ScaleOut(True, [MovedTask("0_2", 900, True, 0, 100, 33_000, 33_300),
                             MovedTask("0_5", 1_200, True, 12, 110, 33_500, 33_300)],
                      baseline_gap_ms=400, settle_s=6.5, duplicated=0)
    summary = streams_scaleout.summary(1, result)
    assert summary["moved_gap_ms"] == 1_200
    row = streams_scaleout.row_text(summary)
    assert row.startswith("| 1 | on | 0_2, 0_5 | **1,200 ms** | 400 ms | 0 in 100 ms, 12 in 110 ms | 33,000, 33,500 |")
    assert row.count("|") == streams_scaleout.HEADER.splitlines()[0].count("|")
