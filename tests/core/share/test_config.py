"""``share.auto.offset.reset`` as Kafka reads it, and the bounds Kafka puts on the share settings."""

from __future__ import annotations

import pytest

from coordinator.core.share.config import AutoOffsetReset, ResetStrategy, ShareConfig


def test_latest_is_the_log_end_and_earliest_the_log_start() -> None:
    assert AutoOffsetReset.parse("latest").start_offset(earliest=5, latest=90) == 90
    assert AutoOffsetReset.parse(" EARLIEST ").start_offset(earliest=5, latest=90) == 5


def test_by_duration_looks_back_that_long_and_falls_back_to_the_end() -> None:
    reset = AutoOffsetReset.parse("by_duration:P1DT2H3M4.5S")
    assert reset == AutoOffsetReset(ResetStrategy.BY_DURATION, ((24 + 2) * 60 + 3) * 60_000 + 4_500)
    assert reset.lookup_timestamp(100_000_000) == 100_000_000 - reset.duration_ms
    assert reset.start_offset(earliest=5, latest=90, offset_for_timestamp=40) == 40
    assert reset.start_offset(earliest=5, latest=90, offset_for_timestamp=-1) == 90, "nothing that recent"
    assert AutoOffsetReset.parse("by_duration:PT0S").duration_ms == 0


@pytest.mark.parametrize("text", ["", "none", "by_duration:", "by_duration:P", "by_duration:PT",
                                  "by_duration:-PT1H", "by_duration:1H", "by_duration:PT1.5H"])
def test_anything_else_is_refused_in_one_line(text: str) -> None:
    with pytest.raises(ValueError, match=r"share\.auto\.offset\.reset") as caught:
        AutoOffsetReset.parse(text)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("kwargs", [{"lock_duration_ms": 999}, {"delivery_count_limit": 1},
                                    {"max_in_flight_records": 0}, {"lock_duration_ms": 3_600_001}])
def test_settings_outside_kafkas_bounds_are_refused(kwargs: dict[str, int]) -> None:
    with pytest.raises(ValueError, match=r"share\."):
        ShareConfig(**kwargs)  # type: ignore[arg-type]
