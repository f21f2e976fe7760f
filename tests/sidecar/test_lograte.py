"""Rate-limited log lines: the first of a kind at once, then one per interval carrying how many were
held back, and at once again after the condition is over."""

from __future__ import annotations

from typing import Any

from coordinator.sidecar.lograte import RateLimitedLog


class Lines:
    """A logger's warning lines, as (event, fields)."""

    def __init__(self) -> None:
        self.lines: list[tuple[str, dict[str, Any]]] = []

    def warning(self, event: str, **fields: Any) -> None:
        self.lines.append((event, fields))


def test_one_line_per_kind_per_interval_with_the_count_held_back() -> None:
    now = [100.0]
    lines = Lines()
    limited = RateLimitedLog(lines, interval_s=10.0, clock=lambda: now[0])
    assert limited.warning("upstream_unreachable", attempt=1)
    for attempt in range(2, 12):  # ten more within the interval: held back
        now[0] += 0.5
        assert not limited.warning("upstream_unreachable", attempt=attempt)
    assert limited.warning("offset_mirror_failed", group_id="g")  # another kind has its own interval
    now[0] = 110.0
    assert limited.warning("upstream_unreachable", attempt=12)
    assert lines.lines == [
        ("upstream_unreachable", {"attempt": 1}),
        ("offset_mirror_failed", {"group_id": "g"}),
        ("upstream_unreachable", {"attempt": 12, "repeated": 10}),
    ]


def test_after_a_reset_the_next_line_leaves_at_once() -> None:
    now = [0.0]
    lines = Lines()
    limited = RateLimitedLog(lines, interval_s=10.0, clock=lambda: now[0])
    limited.warning("upstream_unreachable")
    limited.warning("upstream_unreachable")
    limited.warning("upstream_unreachable")
    assert limited.reset("upstream_unreachable") == 2
    now[0] = 1.0
    assert limited.warning("upstream_unreachable")
    assert [fields for _, fields in lines.lines] == [{}, {}]
