"""Warm-up stalls: a move whose lag is unknown or stops coming down goes ahead after a bound of
time, and stays gone ahead; a move that keeps getting closer keeps waiting."""

from __future__ import annotations

from coordinator.core.streams.stall import Move, Progress, stall_bound_ms, stalled, track
from coordinator.core.streams.tasks import Task

T0: Task = ("0", 0)
MOVE: Move = ("b", T0)
BOUND = 1_000


def step(progress: dict[Move, Progress], lag: int | None, now: int, pending: bool = True) -> dict[Move, Progress]:
    return track(progress, [MOVE], lambda _: lag, lambda _: pending, now, BOUND)


def test_the_bound_is_two_report_periods() -> None:
    assert stall_bound_ms(60_000, 5_000) == 120_000
    assert stall_bound_ms(1_000, 5_000) == 10_000  # offsets ride on heartbeats


def test_an_unknown_lag_stalls_after_the_bound_and_not_before() -> None:
    progress = step({}, None, 0)
    progress = step(progress, None, BOUND - 1)
    assert stalled(progress, BOUND - 1, BOUND) == frozenset()
    assert stalled(progress, BOUND, BOUND) == {MOVE}
    progress = step(progress, None, BOUND)
    assert progress[MOVE].stalled


def test_a_lower_lag_restarts_the_clock_and_a_higher_one_does_not() -> None:
    progress = step({}, 900, 0)
    progress = step(progress, 500, 800)  # restoring: closer
    assert progress[MOVE] == Progress(500, 800)
    progress = step(progress, 5_000, 1_500)  # went backwards (store wiped): no progress
    progress = step(progress, None, 1_700)  # unknown: no progress either
    assert progress[MOVE] == Progress(500, 800)
    assert stalled(progress, 1_800, BOUND) == {MOVE}


def test_a_stalled_move_stays_stalled_even_when_a_lower_lag_arrives() -> None:
    progress = step(step({}, 900, 0), 10, BOUND)  # due at this very report: final
    assert progress[MOVE].stalled
    assert step(progress, 0, BOUND + 5)[MOVE].stalled


def test_a_move_is_forgotten_once_it_is_no_longer_pending() -> None:
    progress = step({}, None, 0)
    assert step(progress, None, 10, pending=False) == {}
    assert track(progress, [], lambda _: None, lambda _: True, 10, BOUND) == progress  # kept while promoted
