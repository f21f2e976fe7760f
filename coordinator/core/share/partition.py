"""One share partition's state (Kafka's ``SharePartition``), its replay, and how a change becomes records.

Theory of operation
-------------------
A share partition is the state of one (share group, topic, partition): which records of the log
the group has finished with and which are in flight to which consumer.

- ``start_offset`` (Kafka's SPSO): every offset below it is finished (acknowledged or archived)
  and forgotten. ``next_offset`` (Kafka's SPEO + 1): the first offset never acquired. Between them
  every offset has an :class:`OffsetState` in ``offsets``: AVAILABLE (released, expired, or its
  batch was acquired in part), ACQUIRED (by ``member_id`` until ``lock_deadline``), ACKNOWLEDGED
  or ARCHIVED (terminal), with the number of times it was delivered.
- Offsets are grouped into batches, one per acquisition of new records (``batches``: first ->
  last, ascending, contiguous from the first batch to ``next_offset - 1``). A batch is the unit
  of a record: a change rewrites the batch records it touched (see :mod:`.records`).
- Transitions (Kafka's ``RecordState.validateTransition``): AVAILABLE -> ACQUIRED (the delivery
  count goes up by one); ACQUIRED -> ACKNOWLEDGED | ARCHIVED | AVAILABLE; a move to AVAILABLE of
  a record delivered ``delivery_count_limit`` times archives it instead; terminal states never
  change. After every change the start offset moves past the finished prefix, and batches wholly
  below it are tombstoned.

The ONLY code that changes this state is :meth:`SharePartition.replay`. An operation
(:mod:`.acquisition`, :mod:`.acknowledgement`, :mod:`.release`) reads the state, decides the new
state of the offsets it touches (a :class:`Change`), and :func:`commit` counts its transitions
(:class:`Transitions`, the counters' source), :func:`plan` s its records and replays them
(:func:`apply`), live exactly as at load or on a standby. So a replayed
partition equals the live one after every step, which the tests check after each operation.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import Counter, deque
from dataclasses import dataclass, field
from itertools import groupby, repeat
from operator import attrgetter
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


class OffsetState(msgspec.Struct, frozen=True, gc=False):
    """One offset's state. ``member_id`` and ``lock_deadline`` only mean something while ACQUIRED."""

    state: RecordState
    delivery_count: int
    member_id: str = ""
    lock_deadline: int = -1


class SharePartition:
    """The state of one share partition; mutated only by :meth:`replay`."""

    __slots__ = ("_available", "_deadlines", "_starts", "applied", "batches", "key", "next_offset", "offsets",
                 "start_offset", "state_epoch")

    def __init__(self, group_id: str, topic_id: UUID, partition: int) -> None:
        self.key = SharePartitionKey(group_id, topic_id, partition)
        self.state_epoch = -1  # -1: never initialized (no partition record yet)
        self.start_offset = -1
        self.next_offset = -1
        self.offsets: dict[int, OffsetState] = {}
        self.batches: dict[int, int] = {}  # first offset -> last offset, ascending
        self._starts: list[int] = []  # the keys of ``batches`` in order, for bisection
        # Per batch, derived from its record's runs at replay, so that a fetch never walks the whole
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

    def next_fetch_offset(self) -> int:
        """Where the next read of the log starts (Kafka's ``nextFetchOffset``): the first AVAILABLE
        offset (a redelivery), else the first offset never acquired."""
        return min(self._available.values(), default=self.next_offset)

    def in_flight_window(self) -> int:
        """Kafka's ``numInFlightRecords``: the whole start..next window, finished offsets included."""
        return self.next_offset - self.start_offset

    def count(self, state: RecordState) -> int:
        return sum(1 for s in self.offsets.values() if s.state is state)

    def delivery_complete_count(self) -> int:
        """Finished offsets at or above the start offset (Kafka's ``deliveryCompleteCount``, for lag)."""
        return sum(1 for s in self.offsets.values() if s.state.terminal)

    def lag(self, log_end_offset: int) -> int:
        """DescribeShareGroupOffsets v1's lag: records not yet finished up to the log end."""
        return max(0, log_end_offset - self.start_offset - self.delivery_complete_count())

    def next_lock_deadline(self) -> int | None:
        """The earliest lock deadline of an ACQUIRED offset (when the runtime's timer fires), or None."""
        return min(self._deadlines.values(), default=None)

    def view(self) -> tuple[int, int, int, dict[int, int], dict[int, OffsetState]]:
        """Everything durable, for comparing a replayed partition with a live one."""
        return self.state_epoch, self.start_offset, self.next_offset, dict(self.batches), dict(self.offsets)

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
            self.offsets.clear()
            self.batches.clear()
            self._starts.clear()
            self._available.clear()
            self._deadlines.clear()
        previous_start = self.start_offset
        self.state_epoch = value.state_epoch
        self.start_offset = value.start_offset
        self.next_offset = value.next_offset
        while self._starts and self.batches[self._starts[0]] < self.start_offset:
            if previous_start >= 0:  # the offsets up to its last are forgotten with it
                previous_start = max(previous_start, self.batches[self._starts[0]] + 1)
            self._drop_batch(self._starts[0])
        if previous_start >= 0 and self.start_offset - previous_start <= len(self.offsets):
            _forget(self.offsets, previous_start, self.start_offset)  # the start moved by a few offsets: just those
        else:  # a jump (the log start passed everything): one pass over what is left
            for offset in [o for o in self.offsets if o < self.start_offset]:
                del self.offsets[offset]
        if self._starts and self._starts[0] < self.start_offset:  # a batch the start offset cut into
            self._summarize(self._starts[0])

    def _set_batch(self, first: int, value: ShareBatchValue) -> None:
        if value.last_offset < self.start_offset:
            return  # finished already (a compacted log can hold it before the start record)
        if first not in self.batches:
            self.batches[first] = value.last_offset
            i = bisect_right(self._starts, first)
            self._starts.insert(i, first)
        start = self.start_offset
        available: int | None = None
        deadline: int | None = None
        for run in value.runs:
            if run.last < start:
                continue
            state = OffsetState(RecordState(run.state), run.delivery_count, run.member_id, run.lock_deadline)
            lo = max(run.first, start)
            self.offsets.update(dict.fromkeys(range(lo, run.last + 1), state))  # one state object per run
            if state.state is RecordState.AVAILABLE and available is None:
                available = lo
            elif state.state is RecordState.ACQUIRED and (deadline is None or state.lock_deadline < deadline):
                deadline = state.lock_deadline
        if _covers(value.runs, max(first, start), value.last_offset):
            self._set_summary(first, available, deadline)
        else:  # runs that leave some offsets as they were: look at the offsets themselves
            self._summarize(first)

    def _summarize(self, first: int) -> None:
        """Derive a batch's summary from its offsets (a batch cut by the start offset, partial runs)."""
        available: int | None = None
        deadline: int | None = None
        offsets = self.offsets
        for offset in range(max(first, self.start_offset), self.batches[first] + 1):
            state = offsets.get(offset)
            if state is None:
                continue
            if state.state is RecordState.AVAILABLE and available is None:
                available = offset
            elif state.state is RecordState.ACQUIRED and (deadline is None or state.lock_deadline < deadline):
                deadline = state.lock_deadline
        self._set_summary(first, available, deadline)

    def _set_summary(self, first: int, available: int | None, deadline: int | None) -> None:
        if available is None:
            self._available.pop(first, None)
        else:
            self._available[first] = available
        if deadline is None:
            self._deadlines.pop(first, None)
        else:
            self._deadlines[first] = deadline

    def _drop_batch(self, first: int) -> None:
        last = self.batches.pop(first, None)
        if last is None:
            return
        self._starts.remove(first)
        self._available.pop(first, None)
        self._deadlines.pop(first, None)
        _forget(self.offsets, first, last + 1)


def _forget(offsets: dict[int, OffsetState], first: int, end: int) -> None:
    """Remove ``first..end-1`` from ``offsets`` (those present), the per-offset loop run by C:
    a start offset passing a batch forgets every offset of it, hundreds per fetch."""
    deque(map(offsets.pop, range(first, end), repeat(None, end - first)), maxlen=0)


def _covers(runs: list[StateRun], first: int, last: int) -> bool:
    """The runs (ascending) give a state to every offset of ``first..last`` (what :func:`plan` writes)."""
    expected = first
    for run in runs:
        if run.last < first:
            continue
        if max(run.first, first) != expected:
            return False
        expected = run.last + 1
    return expected > last


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
    """What an operation decided: new states of some offsets, and maybe a new batch of new records."""

    states: dict[int, OffsetState] = field(default_factory=dict)
    new_batch: tuple[int, int] | None = None  # (first, last) acquired past next_offset
    start_offset: int | None = None  # a start the log forces (log start moved), else computed

    def __bool__(self) -> bool:
        return bool(self.states) or self.new_batch is not None or self.start_offset is not None


def plan(p: SharePartition, change: Change) -> list[ShareRecord]:
    """The records that make ``change`` durable: touched batches, tombstones for batches the start
    offset passed, then the partition record if the start or next offset moved (one log entry)."""
    if not change:
        return []
    next_offset = p.next_offset if change.new_batch is None else change.new_batch[1] + 1

    changed, offsets = change.states, p.offsets

    start = max(p.start_offset, change.start_offset if change.start_offset is not None else p.start_offset)
    # The start moves past the finished prefix, counted per run of equal states by C (an
    # acknowledgement finishes hundreds of offsets at once, sharing a state object); the states are
    # read lazily, so the walk stops in the first unfinished run.
    span = range(start, next_offset)
    for state, same in groupby(map(changed.get, span, map(offsets.get, span))):
        if state is None or state.state not in _TERMINAL:  # None: never (every offset below next has one)
            break
        start += len(list(same))
    next_offset = max(next_offset, start)  # the log start passed everything ever acquired

    records: list[ShareRecord] = []
    touched = _touched_batches(p, changed)
    for first in p._starts:
        if p.batches[first] < start:
            records.append(batch_tombstone(p.key, first))
        elif first in touched:
            records.append(batch_record(p.key, first, p.batches[first], _runs(max(first, start), p.batches[first],
                                                                               changed, offsets)))
    if change.new_batch is not None:
        first, last = change.new_batch
        if last >= start:
            records.append(batch_record(p.key, first, last, _runs(max(first, start), last, changed, offsets)))
    if start != p.start_offset or next_offset != p.next_offset:
        records.append(partition_record(p.key, p.state_epoch, start, next_offset))
    return records


def _touched_batches(p: SharePartition, changed: dict[int, OffsetState]) -> set[int]:
    """The first offsets of the batches holding a changed offset: one bisection per batch, not
    per offset (a fetch changes hundreds of offsets in a handful of batches)."""
    ordered = sorted(changed)
    end = bisect_left(ordered, p.next_offset)  # the offsets past it are a new batch's
    touched: set[int] = set()
    i = 0
    while i < end:
        first = p.batch_of(ordered[i])
        if first is None:
            i += 1
            continue
        touched.add(first)
        i = bisect_right(ordered, p.batches[first], i, end)
    return touched


def _runs(first: int, last: int, changed: dict[int, OffsetState], offsets: dict[int, OffsetState]) -> list[StateRun]:
    """``first..last`` as runs of equal states, the change's over the partition's (the per-offset
    work done by C: ``map`` over the two dicts, ``groupby`` comparing neighbours)."""
    span = range(first, last + 1)
    states = (map(changed.get, span, map(offsets.__getitem__, span)) if first in offsets
              else map(changed.__getitem__, span))  # a new batch: every offset is the change's
    runs: list[StateRun] = []
    run_first = first
    for state, same in groupby(states):
        n = len(list(same))  # counted by C, not a generator step per offset
        runs.append(StateRun(run_first, run_first + n - 1, int(state.state), state.delivery_count, state.member_id,
                             state.lock_deadline))
        run_first += n
    return runs


def apply(p: SharePartition, records: list[ShareRecord]) -> list[ShareRecord]:
    """Replay ``records`` into ``p`` (the live path) and return them, for the caller's log entry."""
    for record in records:
        p.replay(record)
    return records


def commit(p: SharePartition, change: Change, delivers: bool = True, lock_expired: bool = False) -> list[ShareRecord]:
    """What every operation ends with: the change's transitions added to ``p.applied`` (the
    counters: only here, never at replay), its records planned and applied; the records.

    Counted by the new states alone (one C-level pass: the per-offset work stays the operation's),
    which the transitions allow: an operation makes an offset ACQUIRED only from AVAILABLE or new
    (an acquisition, ``delivers``) or from ACQUIRED (a renewal, ``delivers=False``), AVAILABLE only
    from ACQUIRED (a release, or ``lock_expired``: every offset of the change lost its lock), and
    ACKNOWLEDGED or ARCHIVED only from a state that is neither."""
    if change.states:
        # Counted per run of equal states: an operation shares one state object among the offsets
        # it moves alike, so a fetch's hundreds of offsets are a few runs (groupby compares in C).
        by_state: Counter[RecordState] = Counter()
        for state, same in groupby(change.states.values()):
            by_state[state.state] += len(list(same))
        t = p.applied
        if delivers:
            t.acquired += by_state[RecordState.ACQUIRED]
        t.acknowledged += by_state[RecordState.ACKNOWLEDGED]
        t.archived += by_state[RecordState.ARCHIVED]
        if lock_expired:
            t.lock_expired += len(change.states)
        else:
            t.released += by_state[RecordState.AVAILABLE]
    return apply(p, plan(p, change))


_STATE = attrgetter("state")
_TERMINAL = frozenset((RecordState.ACKNOWLEDGED, RecordState.ARCHIVED))
