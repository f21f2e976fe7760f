"""Regenerating BENCHMARKS.md keeps the sections written by hand below the marker."""

from __future__ import annotations

from pathlib import Path

from bench.report import HAND_WRITTEN, with_hand_written

ROOT = Path(__file__).resolve().parents[2]


def test_a_regenerated_report_keeps_what_was_written_below_the_marker() -> None:
    previous = f"# Benchmarks\n\n## Results\n\nold rows\n\n{HAND_WRITTEN}\n\n## Pipeline\n\n215 s\n"
    text = with_hand_written("# Benchmarks\n\n## Results\n\nnew rows\n", previous)
    assert "new rows" in text and "old rows" not in text
    assert text.endswith(f"{HAND_WRITTEN}\n\n## Pipeline\n\n215 s\n")


def test_a_first_report_gets_the_marker_to_write_under() -> None:
    assert with_hand_written("# Benchmarks\n", None) == f"# Benchmarks\n\n{HAND_WRITTEN}\n"


def test_the_checked_in_report_has_its_hand_written_sections_below_the_marker() -> None:
    generated, marker, hand = (ROOT / "BENCHMARKS.md").read_text().partition(HAND_WRITTEN)
    assert marker, "BENCHMARKS.md lost the marker bench/run keeps hand-written sections under"
    assert "## Results" in generated and "## Results" not in hand
