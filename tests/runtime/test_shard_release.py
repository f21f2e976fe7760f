"""When the shard releases a reply: never before the log entries it could reveal are durable, and a
reply about one group does not wait for other groups' entries. One contract: `submit` returns a
completion, already done when it returns if the reply may leave at once (an `Answered`: no future,
no waiter); the same rule holds whether the idle shard handled the request in place or its task
handled it in a batch.

The shard runs on a real core; its log is a sink whose entries become durable when the test says so.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import pytest
import pytest_asyncio

from coordinator.core import requests as core
from coordinator.core.records import CoordinatorEpochKey, CoordinatorEpochValue, Record
from coordinator.core.result import Result
from coordinator.core.shard import CoordinatorShard
from coordinator.runtime.shard import ShardRuntime
from coordinator.runtime.shard_contract import Answered, Completion
from tests.support.polling import eventually

UNKNOWN_MEMBER_ID = 25


class ManualSink:
    """A record log whose entries become durable only on `make_durable()`, in order."""

    def __init__(self) -> None:
        self.entries: list[Sequence[Any]] = []
        self.durable_end = 0
        self._on_durable: Callable[[int], None] | None = None
        self._points: list[tuple[int, asyncio.Future[None]]] = []

    def append(self, records: Sequence[Any], timestamp_ms: int) -> int:
        self.entries.append(records)
        return len(self.entries) - 1

    def watch(self, on_durable: Callable[[int], None]) -> None:
        self._on_durable = on_durable

    def durable_point(self) -> asyncio.Future[None] | None:
        if self.durable_end >= len(self.entries):
            return None
        point: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._points.append((len(self.entries), point))
        return point

    def make_durable(self, upto: int | None = None) -> None:
        """Every entry durable, or the first ``upto`` of them."""
        end = len(self.entries) if upto is None else upto
        if end <= self.durable_end:
            return
        self.durable_end = end
        for covers, point in self._points:
            if covers <= end and not point.done():
                point.set_result(None)
        if self._on_durable is not None:
            self._on_durable(end)


@pytest_asyncio.fixture
async def shard() -> AsyncIterator[tuple[ShardRuntime, ManualSink]]:
    """A started shard whose task waits for work, so requests are handled at once."""
    sink = ManualSink()
    runtime = ShardRuntime(CoordinatorShard(), sink, clock=lambda: 1_000_000)
    await runtime.start()
    await eventually(lambda: runtime.idle)
    try:
        yield runtime, sink
    finally:
        await runtime.stop()


def commit(runtime: ShardRuntime, group: str) -> Completion:
    return runtime.submit(core.OffsetCommit(
        ref=runtime.new_ref(), group_id=group, generation_id_or_member_epoch=-1, member_id="",
        group_instance_id=None, retention_time_ms=-1,
        topics=(core.OffsetCommitTopic("t", (core.OffsetCommitPartition(0, 42),)),)))


def heartbeat(runtime: ShardRuntime, group: str) -> Completion:
    return runtime.submit(core.Heartbeat(ref=runtime.new_ref(), group_id=group, generation_id=1, member_id="m",
                                         group_instance_id=None))


async def settle(*futures: Completion) -> None:
    await asyncio.wait_for(asyncio.gather(*futures), timeout=5)


@pytest.mark.asyncio
async def test_a_reply_about_another_group_does_not_wait_for_an_unflushed_commit(
        shard: tuple[ShardRuntime, ManualSink]) -> None:
    runtime, sink = shard
    committed = commit(runtime, "a")
    assert not committed.done()  # its own entry is not durable

    other = heartbeat(runtime, "b")
    assert other.done()  # answered in place
    assert other.result().error_code == UNKNOWN_MEMBER_ID

    same = heartbeat(runtime, "a")
    listing = runtime.submit(core.ListGroups(ref=runtime.new_ref()))
    await asyncio.sleep(0)  # a loop turn: whatever is ready to be released would be
    assert not same.done()  # could reveal group a's state
    assert not listing.done()  # concerns every group

    sink.make_durable()
    await settle(committed, same, listing)
    assert [p.error_code for t in committed.result().topics for p in t.partitions] == [0]
    assert same.result().error_code == UNKNOWN_MEMBER_ID
    assert [g.group_id for g in listing.result().groups] == ["a"]


@pytest.mark.asyncio
async def test_a_coordinator_wide_entry_holds_every_reply(shard: tuple[ShardRuntime, ManualSink]) -> None:
    runtime, sink = shard
    runtime._settle(Result([Record(CoordinatorEpochKey(), CoordinatorEpochValue(1, "writer"))]))
    held = heartbeat(runtime, "b")
    await asyncio.sleep(0)
    assert not held.done()
    sink.make_durable()
    await settle(held)
    assert held.result().error_code == UNKNOWN_MEMBER_ID
    assert heartbeat(runtime, "b").done()  # nothing pending any more


@pytest.mark.asyncio
async def test_a_group_waits_only_until_its_own_latest_entry_is_durable(shard: tuple[ShardRuntime, ManualSink]) -> None:
    runtime, sink = shard
    first = commit(runtime, "a")
    sink.make_durable()
    await settle(first)
    second = commit(runtime, "b")  # pending, but about another group
    answer = heartbeat(runtime, "a")
    assert answer.done()
    sink.make_durable()
    await settle(second)


@pytest.mark.asyncio
async def test_a_batch_follows_the_same_rule_as_the_idle_path(shard: tuple[ShardRuntime, ManualSink]) -> None:
    runtime, sink = shard
    runtime.post(core.TopicsChanged())  # the task is busy: what follows queues into one batch
    assert not runtime.idle
    committed = commit(runtime, "a")
    same = heartbeat(runtime, "a")
    other = heartbeat(runtime, "b")
    assert not (committed.done() or same.done() or other.done())  # queued, not handled yet
    await eventually(other.done)  # handled in the batch; about group b: nothing of b is pending
    assert other.result().error_code == UNKNOWN_MEMBER_ID
    await asyncio.sleep(0)
    assert not committed.done() and not same.done()  # group a's entry is not durable yet
    sink.make_durable()
    await settle(committed, same)
    assert same.result().error_code == UNKNOWN_MEMBER_ID


@pytest.mark.asyncio
async def test_an_answer_released_in_place_is_a_done_completion_that_leaves_nothing_behind(
        shard: tuple[ShardRuntime, ManualSink]) -> None:
    runtime, _ = shard
    answer = heartbeat(runtime, "b")
    assert isinstance(answer, Answered)
    assert answer.done() and not answer.cancelled() and answer.exception() is None
    assert answer.result().error_code == UNKNOWN_MEMBER_ID
    assert (await answer).error_code == UNKNOWN_MEMBER_ID  # awaitable like a done future
    called: asyncio.Future[Completion] = asyncio.get_running_loop().create_future()
    answer.add_done_callback(called.set_result)
    assert await asyncio.wait_for(called, timeout=5) is answer
    assert not answer.cancel()  # too late, as for a done future
    assert runtime.idle and not runtime._waiters  # no future, no waiter entry


@pytest.mark.asyncio
async def test_a_reply_held_by_the_rule_gets_a_future_even_when_handled_in_place(
        shard: tuple[ShardRuntime, ManualSink]) -> None:
    runtime, sink = shard
    committed = commit(runtime, "a")  # its own records: waits for its entry
    held = heartbeat(runtime, "a")  # record-less, but group a has an unflushed entry
    assert isinstance(committed, asyncio.Future) and isinstance(held, asyncio.Future)
    assert runtime.idle  # both were handled in place
    sink.make_durable()
    await settle(committed, held)
    assert held.result().error_code == UNKNOWN_MEMBER_ID
    assert not runtime._waiters


@pytest.mark.asyncio
async def test_a_core_bug_in_place_fails_that_request_only(shard: tuple[ShardRuntime, ManualSink]) -> None:
    runtime, _ = shard
    handlers = runtime.core._handlers
    real = handlers[core.Heartbeat]

    def buggy(request: Any, fx: Any) -> None:
        if request.group_id == "boom":
            raise RuntimeError("a core bug")
        real(request, fx)

    handlers[core.Heartbeat] = buggy
    failed = heartbeat(runtime, "boom")
    assert failed.done() and isinstance(failed.exception(), RuntimeError)
    after = heartbeat(runtime, "b")  # the shard keeps serving, in place
    assert isinstance(after, Answered) and after.result().error_code == UNKNOWN_MEMBER_ID


@pytest.mark.asyncio
async def test_replies_carried_by_entries_leave_as_their_own_entry_becomes_durable_in_log_order(
        shard: tuple[ShardRuntime, ManualSink]) -> None:
    runtime, sink = shard
    commits = [commit(runtime, group) for group in ("a", "b", "c", "d")]  # four entries, in place
    assert len(sink.entries) == 4 and not any(c.done() for c in commits)
    for durable in (1, 3):
        sink.make_durable(durable)
        await eventually(lambda durable=durable: all(c.done() for c in commits[:durable]))
        await asyncio.sleep(0)  # a loop turn: nothing later may have left
        assert not any(c.done() for c in commits[durable:])
    sink.make_durable()
    await settle(*commits)
    assert all(p.error_code == 0 for c in commits for t in c.result().topics for p in t.partitions)
    assert not runtime._carried and not runtime._waiters
