"""The shard's `LogSink` over the log partitions' transactional writers (issue 27, point 3).

Theory of operation. The shard appends one entry per Result; the sink gives it the next number of
one process-wide sequence (its "offset": the shard only compares them) and files its records under
the log partition of their group (`partition_of`). Records of no group (CoordinatorEpoch, SCRAM
credentials, ACLs) go to `WIDE_PARTITION`, partition 0: its owner holds the node-wide state, as
Kafka's own coordinator keeps nothing outside its partitions. An entry naming groups of several
partitions (DeleteGroups) is split: each partition's part is atomic, as Kafka's per-partition
writes are.

A committer task takes everything buffered as one round: per partition one transaction
(AddPartitionsToTxn once, one Produce batch, EndTxn commit), the partitions of a round in parallel;
while a round is out, new entries gather for the next one (group commit, as the local log shares
one fsync). When every partition of a round committed, `durable_end` passes the round's last
entry and the shard releases the replies. A round with a failed partition releases nothing: the
shard is told `on_refused(first entry of the round, code)`, so every reply of the round (and of what
was buffered behind it, computed from the same state) is answered `code` (COORDINATOR_NOT_AVAILABLE
when the upstream could not be reached, NOT_COORDINATOR otherwise) and the core is
rebuilt from what the log holds (`read_committed`). Entries of the round that did commit stay in
the log: a client may be refused a write that later turns out committed (as with Kafka), never
told of one that did not. A fenced partition (another instance claimed its transactional id) is
reported to `on_fenced` first, so it stops being served before the refusal answers anything.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Sequence

from protocol.errors import ErrorCode

from ..core.records import decode_record_key, group_of
from ..logging import get_logger
from ..recordlog.errors import WriteRefused
from ..recordlog.record import record_identity
from ..runtime.shard_contract import Refused
from .cluster import LogUnavailable
from .writer import Fenced, PartitionWriter

log = get_logger("coordinator.clusterlog.sink")

WIDE_PARTITION = 0
"""Where records of no group (CoordinatorEpoch, SCRAM credentials, ACLs) are written."""

Entry = tuple[bytes, bytes | None]


class NotOwned(Exception):
    """The partition is not this instance's (any more): nothing may be written to it."""


class UpstreamSink:
    """`LogSink` (runtime/shard.py) over the partitions' writers; `writer_of(p)` is None when this
    instance does not own p."""

    def __init__(self, writer_of: Callable[[int], PartitionWriter | None], partition_of: Callable[[str], int],
                 on_fenced: Callable[[int, str], None], retry_for_s: float = 30.0) -> None:
        self._writer_of = writer_of
        self._partition_of = partition_of
        self._on_fenced = on_fenced
        self.retry_for_s = retry_for_s
        self._next = 0
        self._durable_end = 0
        self._round_first = 0
        self._buffer: dict[int, list[Entry]] = {}
        self._points: list[tuple[int, asyncio.Future[int]]] = []
        self._on_durable: Callable[[int], None] | None = None
        self._on_refused: Refused | None = None
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.rounds = 0
        self.refused_rounds = 0

    # -- LogSink --------------------------------------------------------------------------------
    def append(self, records: Sequence[tuple[int, bytes, bytes | None]], timestamp_ms: int) -> int:
        offset = self._next
        self._next += 1
        buffer = self._buffer
        for rtype, key, value in records:
            group = group_of(decode_record_key(rtype, key))
            partition = WIDE_PARTITION if group is None else self._partition_of(group)
            buffer.setdefault(partition, []).append((record_identity(rtype, key), value))
        self._wake.set()
        return offset

    @property
    def durable_end(self) -> int:
        return self._durable_end

    @property
    def next_offset(self) -> int:
        return self._next

    def watch(self, on_durable: Callable[[int], None], on_refused: Refused | None = None) -> None:
        self._on_durable = on_durable
        self._on_refused = on_refused

    def durable_point(self) -> asyncio.Future[int] | None:
        if self._durable_end >= self._next:
            return None
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._points.append((self._next, future))
        return future

    # -- the committer --------------------------------------------------------------------------
    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="cluster-log-committer")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def settled(self) -> None:
        """Returns once every entry appended so far is committed or refused (entries appended
        meanwhile are not waited for, so a busy shard cannot hold a hand-over up)."""
        point = self.durable_point()
        if point is not None:
            with contextlib.suppress(WriteRefused):
                await point

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            if not self._buffer:
                continue
            buffer, self._buffer = self._buffer, {}
            first, end = self._round_first, self._next
            self._round_first = end
            started = time.perf_counter()
            outcomes = await asyncio.gather(*(self._commit(p, entries) for p, entries in buffer.items()),
                                            return_exceptions=True)
            self.rounds += 1
            failures = [(p, o) for p, o in zip(buffer, outcomes, strict=True) if isinstance(o, BaseException)]
            if not failures:
                self._durable(end)
            else:
                self._refuse(first, failures)
            log.debug("log_round", partitions=len(buffer), entries=end - first, failed=len(failures),
                      seconds=round(time.perf_counter() - started, 4))

    async def _commit(self, partition: int, entries: list[Entry]) -> None:
        """One partition's part of a round, retried while the upstream cannot be reached (for up to
        `retry_for_s`). A retry claims the partition again, which settles the transaction left
        behind (aborted, or committed if its EndTxn had reached the coordinator), then writes the
        entries again: a record written twice replays to the same state (records are upserts)."""
        deadline = time.monotonic() + self.retry_for_s
        delay = 0.05
        while True:
            writer = self._writer_of(partition)
            if writer is None:
                raise NotOwned(f"log partition {partition} is not owned here")
            try:
                if not writer.claimed:  # a failure before left the outcome unknown: a claim settles it
                    await writer.claim()
                await writer.write(entries)
                await writer.commit()
                return
            except LogUnavailable:
                if time.monotonic() + delay > deadline:
                    raise
            await asyncio.sleep(delay)
            delay = min(2 * delay, 1.0)

    def _durable(self, end: int) -> None:
        self._durable_end = end
        points, self._points = self._points, []
        for target, future in points:
            if target <= end:
                if not future.done():
                    future.set_result(end)
            else:
                self._points.append((target, future))
        if self._on_durable is not None:
            self._on_durable(end)

    def _refuse(self, first: int, failures: list[tuple[int, BaseException]]) -> None:
        self.refused_rounds += 1
        for partition, exc in failures:
            if isinstance(exc, Fenced):
                self._on_fenced(partition, str(exc))
            elif isinstance(exc, LogUnavailable | NotOwned):
                log.warning("log_write_failed", partition=partition, error=str(exc))
            else:
                log.error("log_write_failed", partition=partition, exc_info=exc)
        # What was buffered behind the round was computed from the refused state: it goes too, and
        # its offsets are never used (a gap, as a cut local log leaves).
        self._buffer = {}
        self._round_first = self._next
        self._durable_end = self._next
        points, self._points = self._points, []
        for _, future in points:
            if not future.done():
                future.set_exception(WriteRefused(f"log round refused from entry {first}", first))
        if self._on_refused is not None:
            # The upstream out of reach is COORDINATOR_NOT_AVAILABLE (retriable where it is);
            # anything else, as a refused local write, NOT_COORDINATOR.
            unreachable = all(isinstance(exc, LogUnavailable) for _, exc in failures)
            self._on_refused(first, ErrorCode.COORDINATOR_NOT_AVAILABLE if unreachable else ErrorCode.NOT_COORDINATOR)
