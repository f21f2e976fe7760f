"""One share partition's state (Kafka's ``SharePartition``), its replay, and how a change becomes records.

Theory of operation
-------------------
A share partition is the state of one (share group, topic, partition): which records of the log
the group has finished with and which are in flight to which consumer.

- ``start_offset`` (Kafka's SPSO): every offset below it is finished (acknowledged or archived)
  and forgotten. ``next_offset`` (Kafka's SPEO + 1): the first offset never acquired. Between them
  every offset has a state: AVAILABLE (released, expired, or its batch was acquired in part),
  ACQUIRED (by a member until a lock deadline), ACKNOWLEDGED or ARCHIVED (terminal), with the
  number of times it was delivered.
- Offsets are grouped into batches, one per acquisition of new records (``batches``: first ->
  last, ascending, contiguous from the first batch to ``next_offset - 1``). A batch is the unit
  of a record: a change rewrites the batch records it touched (see :mod:`.records`).
- Each batch's states are held as it is written: runs of equal state (``runs``: first ->
  :class:`StateRun` s, ascending, covering ``max(first, start_offset)..last``, neighbours never
  equal). A whole acquisition is one run, and so is that acquisition accepted, so acquiring,
  acknowledging, releasing, expiring and moving the start offset cost per run, not per offset,
  and a batch record's runs are the state itself (replay stores them, plan writes them).
- Transitions (Kafka's ``RecordState.validateTransition``): AVAILABLE -> ACQUIRED (the delivery
  count goes up by one); ACQUIRED -> ACKNOWLEDGED | ARCHIVED | AVAILABLE; a move to AVAILABLE of
  a record delivered ``delivery_count_limit`` times archives it instead; terminal states never
  change. After every change the start offset moves past the finished prefix, and batches wholly
  below it are tombstoned.

The ONLY code that changes this state is :meth:`SharePartition.replay`. An operation
(:mod:`.acquisition`, :mod:`.acknowledgement`, :mod:`.release`) reads the state, decides the new
runs of the batches it touches (a :class:`Change`), and :func:`commit` counts its transitions
(:class:`Transitions`, the counters' source), :func:`plan` s its records and replays them
(:func:`apply`), live exactly as at load or on a standby. So a replayed
partition equals the live one after every step, which the tests check after each operation.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from uuid import UUID

import msgspec

from .records import (
    RecordState,
    ShareBatchKey,
    ShareBatchValue,
    SharePartitionKey,
    SharePartitionValue,
    ShareRecord,
    StateRun,
    batch_record,
    batch_tombstone,
    partition_record,
)
from .runs import (
    ACKNOWLEDGED,
    ACQUIRED,
    ARCHIVED,
    AVAILABLE,
    FIRST,
    Runs,
    canonical,
    clip,
    covers,
    overlay,
    with_span,
)


class OffsetState(msgspec.Struct, frozen=True, gc=False):
    """One offset's state (what :attr:`SharePartition.offsets` reads out of a run). ``member_id``
    and ``lock_deadline`` only mean something while ACQUIRED."""

    state: RecordState
    delivery_count: int
    member_id: str = ""
    lock_deadline: int = -1


class SharePartition:
    """The state of one share partition; mutated only by :meth:`replay`."""

    __slots__ = ("_available", "_deadlines", "_starts", "applied", "batches", "key", "next_offset", "runs",
                 "start_offset", "state_epoch")

    def __init__(self, group_id: str, topic_id: UUID, partition: int) -> None:
        self.key = SharePartitionKey(group_id, topic_id, partition)
        self.state_epoch = -1  # -1: never initialized (no partition record yet)
        self.start_offset = -1
        self.next_offset = -1
        self.batches: dict[int, int] = {}  # first offset -> last offset, ascending
        self.runs: dict[int, Runs] = {}  # first offset -> the batch's runs from max(first, start_offset)
        self._starts: list[int] = []  # the keys of ``batches`` in order, for bisection
        # Per batch, derived from its runs when they are set, so that a fetch never walks the whole
        # in-flight window (up to share.partition.max.record.locks offsets) for these two answers:
        self._available: dict[int, int] = {}  # first offset -> its first AVAILABLE offset (if any)
        self._deadlines: dict[int, int] = {}  # first offset -> its earliest lock deadline (if any is ACQUIRED)
        self.applied = Transitions()
        """What the live path (:func:`commit`) changed since the owner last took it (the counters);
        replay never adds to it, so a load or a second replay of the same records counts nothing."""

    # ---- queries ----

    @property
    def initialized(self) -> bool:
        return self.state_epoch >= 0

    def batch_of(self, offset: int) -> int | None:
        """The first offset of the batch holding ``offset``, or None."""
        i = bisect_right(self._starts, offset) - 1
        if i < 0:
            return None
        first = self._starts[i]
        return first if offset <= self.batches[first] else None

    def first_batches(self, offset: int) -> list[int]:
        """The first offsets of the batches from the one holding ``offset`` (or the first after it) on."""
        return self._starts[max(0, bisect_right(self._starts, offset) - 1):]

    def run_at(self, offset: int) -> StateRun | None:
        """The run holding ``offset``, or None (below the start offset, or never acquired)."""
        first = self.batch_of(offset)
        if first is None:
            return None
        runs = self.runs[first]
        i = bisect_right(runs, offset, key=FIRST) - 1
        return runs[i] if i >= 0 and offset <= runs[i].last else None

    @property
    def offsets(self) -> Mapping[int, OffsetState]:
        """Every in-flight offset's state, read out of the runs on access (for inspection and tests:
        the operations work on :attr:`runs`)."""
        return _Offsets(self)

    def next_fetch_offset(self) -> int:
        """Where the next read of the log starts (Kafka's ``nextFetchOffset``): the first AVAILABLE
        offset (a redelivery), else the first offset never acquired."""
        return min(self._available.values(), default=self.next_offset)

    def in_flight_window(self) -> int:
        """Kafka's ``numInFlightRecords``: the whole start..next window, finished offsets included."""
        return self.next_offset - self.start_offset

    def counts(self) -> dict[RecordState, int]:
        """How many in-flight offsets are in each state (operators' describe, the gauges)."""
        by_id = dict.fromkeys((AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED), 0)
        for runs in self.runs.values():
            for r in runs:
                by_id[r.state] += r.last - r.first + 1
        return {RecordState(state): n for state, n in by_id.items()}

    def count(self, state: RecordState) -> int:
        return self.counts()[state]

    def delivery_complete_count(self) -> int:
        """Finished offsets at or above the start offset (Kafka's ``deliveryCompleteCount``, for lag)."""
        counts = self.counts()
        return counts[RecordState.ACKNOWLEDGED] + counts[RecordState.ARCHIVED]

    def lag(self, log_end_offset: int) -> int:
        """DescribeShareGroupOffsets v1's lag: records not yet finished up to the log end."""
        return max(0, log_end_offset - self.start_offset - self.delivery_complete_count())

    def next_lock_deadline(self) -> int | None:
        """The earliest lock deadline of an ACQUIRED offset (when the runtime's timer fires), or None."""
        return min(self._deadlines.values(), default=None)

    def has_available(self, first: int) -> bool:
        """The batch starting at ``first`` holds an AVAILABLE offset."""
        return first in self._available

    def batches_locked_until(self, now_ms: int) -> list[int]:
        """The first offsets of the batches holding a lock whose deadline is ``now_ms`` or earlier."""
        return [first for first, deadline in self._deadlines.items() if deadline <= now_ms]

    def view(self) -> tuple[int, int, int, dict[int, int], dict[int, Runs]]:
        """Everything durable, for comparing a replayed partition with a live one (runs are held in
        one canonical form, so equal states are equal runs)."""
        return self.state_epoch, self.start_offset, self.next_offset, dict(self.batches), dict(self.runs)

    # ---- the one mutator ----

    def replay(self, record: ShareRecord) -> None:
        """Apply one record of this partition (a partition tombstone is the container's business)."""
        key, value = record.key, record.value
        if isinstance(key, ShareBatchKey):
            if value is None:
                self._drop_batch(key.first_offset)
            else:
                assert isinstance(value, ShareBatchValue)
                self._set_batch(key.first_offset, value)
        elif isinstance(value, SharePartitionValue):
            self._set_offsets(value)

    def _set_offsets(self, value: SharePartitionValue) -> None:
        if self.initialized and value.state_epoch != self.state_epoch:
            # A reset: a fresh start. Its entry tombstoned every batch already; clearing here keeps a
            # log cut between those tombstones and this record from carrying anything over.
            self.batches.clear()
            self.runs.clear()
            self._starts.clear()
            self._available.clear()
            self._deadlines.clear()
        self.state_epoch = value.state_epoch
        self.start_offset = start = value.start_offset
        self.next_offset = value.next_offset
        starts = self._starts
        passed = 0
        while passed < len(starts) and self.batches[starts[passed]] < start:
            passed += 1
        for first in starts[:passed]:  # wholly below the start: forgotten, a prefix at once
            del self.batches[first]
            self.runs.pop(first, None)
            self._available.pop(first, None)
            self._deadlines.pop(first, None)
        del starts[:passed]
        if starts and starts[0] < start:  # a batch the start offset cut into
            first = starts[0]
            self._put(first, clip(self.runs.get(first, []), start))

    def _set_batch(self, first: int, value: ShareBatchValue) -> None:
        last = value.last_offset
        if last < self.start_offset:
            return  # finished already (a compacted log can hold it before the start record)
        if first not in self.batches:
            self.batches[first] = last
            self._starts.insert(bisect_right(self._starts, first), first)
        lo = max(first, self.start_offset)
        runs = clip(value.runs, lo, last)
        if not covers(runs, lo, last):  # runs that leave some offsets as they were
            runs = overlay(self.runs.get(first, []), runs)
        self._put(first, canonical(runs))

    def _put(self, first: int, runs: Runs) -> None:
        """Set a batch's runs and its two summaries (one pass over its runs)."""
        self.runs[first] = runs
        available: int | None = None
        deadline: int | None = None
        for r in runs:
            if r.state == AVAILABLE:
                if available is None:
                    available = r.first
            elif r.state == ACQUIRED and (deadline is None or r.lock_deadline < deadline):
                deadline = r.lock_deadline
        if available is None:
            self._available.pop(first, None)
        else:
            self._available[first] = available
        if deadline is None:
            self._deadlines.pop(first, None)
        else:
            self._deadlines[first] = deadline

    def _drop_batch(self, first: int) -> None:
        if self.batches.pop(first, None) is None:
            return
        self._starts.remove(first)
        self.runs.pop(first, None)
        self._available.pop(first, None)
        self._deadlines.pop(first, None)


class _Offsets(Mapping[int, OffsetState]):
    """A share partition's runs read as one state per offset (built on access, never stored)."""

    __slots__ = ("_p",)

    def __init__(self, p: SharePartition) -> None:
        self._p = p

    def __getitem__(self, offset: int) -> OffsetState:
        run = self._p.run_at(offset)
        if run is None:
            raise KeyError(offset)
        return OffsetState(RecordState(run.state), run.delivery_count, run.member_id, run.lock_deadline)

    def __iter__(self) -> Iterator[int]:
        for first in self._p._starts:
            for r in self._p.runs[first]:
                yield from range(r.first, r.last + 1)

    def __len__(self) -> int:
        return sum(r.last - r.first + 1 for runs in self._p.runs.values() for r in runs)


@dataclass(slots=True)
class Transitions:
    """Offsets that entered a state: ACQUIRED (a delivery, not a renewal), ACKNOWLEDGED, AVAILABLE
    from ACQUIRED by a release (``released``), ARCHIVED; and ACQUIRED offsets whose lock ran out
    (``lock_expired``: AVAILABLE again, not counted as released, or ARCHIVED, counted there too)."""

    acquired: int = 0
    acknowledged: int = 0
    released: int = 0
    archived: int = 0
    lock_expired: int = 0

    def __bool__(self) -> bool:
        return bool(self.acquired or self.acknowledged or self.released or self.archived or self.lock_expired)

    def take(self) -> Transitions:
        """The counts so far, and start again from zero."""
        taken = Transitions(self.acquired, self.acknowledged, self.released, self.archived, self.lock_expired)
        self.acquired = self.acknowledged = self.released = self.archived = self.lock_expired = 0
        return taken


@dataclass(slots=True)
class Change:
    """What an operation decided: the new runs of the batches it touched (and of a batch of new
    records), and how many offsets it moved into each state (its transitions, counted as it goes)."""

    runs: dict[int, Runs] = field(default_factory=dict)  # batch first offset -> its runs after the change
    new_batch: tuple[int, int] | None = None  # (first, last) acquired past next_offset; its runs in ``runs``
    start_offset: int | None = None  # a start the log forces (log start moved), else computed
    entered: list[int] = field(default_factory=lambda: [0] * (ARCHIVED + 1))  # offsets per new state id

    def __bool__(self) -> bool:
        return bool(self.runs) or self.new_batch is not None or self.start_offset is not None

    def runs_of(self, p: SharePartition, first: int) -> Runs:
        """The batch's runs as this change has them so far."""
        runs = self.runs.get(first)
        return p.runs[first] if runs is None else runs

    def set(self, p: SharePartition, first: int, moved: Runs) -> None:
        """Give the offsets of ``moved`` (ascending, within the batch at ``first``) their new states."""
        self.runs[first] = overlay(self.runs_of(p, first), moved)
        for r in moved:
            self.entered[r.state] += r.last - r.first + 1

    def set_span(self, p: SharePartition, moved: Runs) -> None:
        """:meth:`set` for runs that may cross batches (each cut at its batches' bounds)."""
        by_batch: dict[int, Runs] = {}
        for r in moved:
            lo = r.first
            while lo <= r.last:
                first = p.batch_of(lo)
                assert first is not None, f"offset {lo} is in no batch"
                hi = min(r.last, p.batches[first])
                by_batch.setdefault(first, []).append(with_span(r, lo, hi))
                lo = hi + 1
        for first, runs in by_batch.items():
            self.set(p, first, runs)


def plan(p: SharePartition, change: Change) -> list[ShareRecord]:
    """The records that make ``change`` durable: touched batches, tombstones for batches the start
    offset passed, then the partition record if the start or next offset moved (one log entry)."""
    if not change:
        return []
    new_batch = change.new_batch
    next_offset = p.next_offset if new_batch is None else new_batch[1] + 1

    start = p.start_offset if change.start_offset is None else max(p.start_offset, change.start_offset)
    # The start moves past the finished prefix, run by run (an accepted acquisition is one run).
    firsts = p.first_batches(start)
    if new_batch is not None:
        firsts = [*firsts, new_batch[0]]
    moving = True
    for first in firsts:
        if first > start:
            break  # offsets in no batch: never acquired
        for r in change.runs_of(p, first):
            if r.last < start:
                continue
            if r.first > start or not (r.state == ACKNOWLEDGED or r.state == ARCHIVED):
                moving = False
                break
            start = r.last + 1
        if not moving:
            break
    next_offset = max(next_offset, start)  # the log start passed everything ever acquired

    records: list[ShareRecord] = []
    for first in p._starts:  # the passed batches are a prefix
        if p.batches[first] >= start:
            break
        records.append(batch_tombstone(p.key, first))
    for first in sorted(change.runs):
        last = p.batches.get(first)
        if last is not None and last >= start:
            records.append(batch_record(p.key, first, last, clip(change.runs[first], max(first, start))))
    if new_batch is not None:
        first, last = new_batch
        if last >= start:
            records.append(batch_record(p.key, first, last, clip(change.runs[first], max(first, start))))
    if start != p.start_offset or next_offset != p.next_offset:
        records.append(partition_record(p.key, p.state_epoch, start, next_offset))
    return records


def apply(p: SharePartition, records: list[ShareRecord]) -> list[ShareRecord]:
    """Replay ``records`` into ``p`` (the live path) and return them, for the caller's log entry."""
    for record in records:
        p.replay(record)
    return records


def commit(p: SharePartition, change: Change, delivers: bool = True, lock_expired: bool = False) -> list[ShareRecord]:
    """What every operation ends with: the change's transitions added to ``p.applied`` (the
    counters: only here, never at replay), its records planned and applied; the records.

    Counted by the new states alone (the change counted them per run as it was built), which the
    transitions allow: an operation makes an offset ACQUIRED only from AVAILABLE or new (an
    acquisition, ``delivers``) or from ACQUIRED (a renewal, ``delivers=False``), AVAILABLE only
    from ACQUIRED (a release, or ``lock_expired``: every offset of the change lost its lock), and
    ACKNOWLEDGED or ARCHIVED only from a state that is neither."""
    entered = change.entered
    if any(entered):
        t = p.applied
        if delivers:
            t.acquired += entered[ACQUIRED]
        t.acknowledged += entered[ACKNOWLEDGED]
        t.archived += entered[ARCHIVED]
        if lock_expired:
            t.lock_expired += sum(entered)
        else:
            t.released += entered[AVAILABLE]
    return apply(p, plan(p, change))
