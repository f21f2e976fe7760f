"""DiskThread: calls run in order on one thread, results and exceptions come back on the loop."""

from __future__ import annotations

import asyncio
import threading

import pytest

from coordinator.recordlog.disk_thread import DiskThread

pytestmark = pytest.mark.asyncio


async def test_calls_run_one_at_a_time_in_order_on_one_other_thread() -> None:
    disk = DiskThread("test-disk")
    seen: list[tuple[int, int]] = []

    def call(i: int) -> int:
        seen.append((i, threading.get_ident()))
        return i * 10

    results = await asyncio.gather(*(disk.run(call, i) for i in range(50)))
    disk.stop()
    assert results == [i * 10 for i in range(50)]
    assert [i for i, _ in seen] == list(range(50))
    threads = {ident for _, ident in seen}
    assert len(threads) == 1 and threading.get_ident() not in threads


async def test_an_exception_in_a_call_is_raised_to_its_awaiter_and_later_calls_still_run() -> None:
    disk = DiskThread("test-disk")

    def fail() -> None:
        raise OSError(5, "Input/output error")

    with pytest.raises(OSError, match="Input/output error"):
        await disk.run(fail)
    assert await disk.run(lambda: "after") == "after"
    disk.stop()


async def test_stop_lets_the_queued_calls_finish_first() -> None:
    disk = DiskThread("test-disk")
    release = threading.Event()
    done: list[int] = []
    first = disk.run(release.wait, 10)
    later = [disk.run(done.append, i) for i in range(3)]
    release.set()
    await asyncio.to_thread(disk.stop)
    assert done == [0, 1, 2]
    assert await first is True
    await asyncio.gather(*later)


async def test_a_cancelled_awaiter_does_not_stop_the_thread() -> None:
    disk = DiskThread("test-disk")
    release = threading.Event()
    waiting = disk.run(release.wait, 10)
    waiting.cancel()
    release.set()
    assert await disk.run(lambda: 7) == 7
    disk.stop()
