"""Warm-up stalls: the rule that makes every warm-up end even when its lag never comes within the
acceptable recovery lag.

A warm-up is promoted by ``warmup.refine`` once its lag is at most the acceptable recovery lag. Two
kinds of report would hold it forever: a lag that is unknown (the trunk client reports a warm-up
over an empty changelog with offset 0 and end offset ``Long.MAX_VALUE``, and a running active task
reports nothing, so no member knows the end) and a lag that stops coming down (restoration stalled,
or the store was wiped and the lag went backwards). Kafka's client-side assignor never waits on a
task nobody is caught up on (``HighAvailabilityTaskAssignor`` moves it at once), and re-checks the
others at ``probing.rebalance.interval.ms``; here the same idea is a bound of time:

- each pending move to a newcomer (a warm-up, then the promoted task until the newcomer runs it)
  remembers the lowest known lag the newcomer reported for it and when that low was reached
  (first seen counts as a low; an unknown lag is never a new low);
- a move whose low has not improved for ``bound_ms`` is **stalled**: the task moves at once, as it
  would with warm-ups off, and stays stalled (a later lower lag does not hold it back again);
- a move is forgotten when the newcomer runs the task, the target no longer gives it the task, or
  it left.

Lags are integers at least 0, so a low can improve only finitely often: every move ends within
(first known lag + 1) x ``bound_ms``, and within ``bound_ms`` when its lag is never known. Pure:
time comes in as ``now_ms``; kept in memory only (after a failover the clocks start again).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

import msgspec

from .tasks import Task

Move = tuple[str, Task]
"""(newcomer member id, task)."""


class Progress(msgspec.Struct, frozen=True):
    best_lag: int | None
    """The lowest known lag reported for the move; None while its lag was never known."""
    since_ms: int
    """When ``best_lag`` was last lowered, or the move first seen."""
    stalled: bool = False


def stall_bound_ms(task_offset_interval_ms: int, heartbeat_interval_ms: int) -> int:
    """Two report periods: a restoring member reports a lower lag at least every task-offset
    interval, on a heartbeat, so two periods without a new low mean it is not getting closer."""
    return 2 * max(task_offset_interval_ms, heartbeat_interval_ms)


def track(progress: Mapping[Move, Progress], warmups: Iterable[Move], lag_of: Callable[[Move], int | None],
          pending: Callable[[Move], bool], now_ms: int, bound_ms: int) -> dict[Move, Progress]:
    """The moves' progress after a refinement: ``warmups`` are the refined assignment's warm-ups
    (new ones start their clock now), ``pending`` says whether a move is still under way."""
    result: dict[Move, Progress] = {}
    for move in [*progress, *(w for w in warmups if w not in progress)]:
        if not pending(move):
            continue
        old = progress.get(move)
        lag = lag_of(move)
        if old is None:
            result[move] = Progress(lag, now_ms)
        elif old.stalled or now_ms - old.since_ms >= bound_ms:
            # Due is final, even when this very report is lower: the refinement already let it go.
            result[move] = Progress(old.best_lag, old.since_ms, True)
        elif lag is not None and (old.best_lag is None or lag < old.best_lag):
            result[move] = Progress(lag, now_ms)
        else:
            result[move] = old
    return result


def stalled(progress: Mapping[Move, Progress], now_ms: int, bound_ms: int) -> frozenset[Move]:
    """The moves that go ahead without waiting any longer (stalled, or due now)."""
    return frozenset(m for m, p in progress.items() if p.stalled or now_ms - p.since_ms >= bound_ms)
