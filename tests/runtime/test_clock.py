"""Timers: one firing per key with its latest deadline, however often it is re-armed."""

from __future__ import annotations

import asyncio

import pytest

from coordinator.runtime.clock import Timers, now_ms


def recording_timers() -> tuple[Timers, list[tuple[object, int]], asyncio.Event]:
    """Timers whose firings are recorded; the event is set at each one."""
    fired: list[tuple[object, int]] = []
    done = asyncio.Event()

    def fire(key: object, deadline: int) -> None:
        fired.append((key, deadline))
        done.set()

    return Timers(asyncio.get_running_loop(), fire), fired, done


@pytest.mark.asyncio
async def test_rearming_later_fires_once_with_the_latest_deadline() -> None:
    timers, fired, done = recording_timers()
    start = now_ms()
    for step in range(1, 21):  # a heartbeat every few ms pushes the deadline later
        timers.arm("member", start + 20 + step * 5)
    latest = start + 20 + 20 * 5
    await asyncio.wait_for(done.wait(), timeout=5)
    assert fired == [("member", latest)]
    assert now_ms() >= latest
    assert len(timers) == 0


@pytest.mark.asyncio
async def test_earlier_deadline_replaces_and_cancel_stops_firing() -> None:
    timers, fired, done = recording_timers()
    start = now_ms()
    timers.arm("cancelled", start + 10)
    timers.arm("cancelled", None)
    timers.arm("sooner", start + 60_000)
    timers.arm("sooner", start + 20)
    await asyncio.wait_for(done.wait(), timeout=5)
    assert fired == [("sooner", start + 20)]
    timers.cancel_all()
    assert len(timers) == 0
