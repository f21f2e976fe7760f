"""Acquisition: which records a ShareFetch hands to a member, under a lock (Kafka's ``SharePartition.acquire``).

Theory of operation
-------------------
A fetch for a member acquires, in offset order and within the request's ``MaxRecords`` budget:

1. redeliveries: AVAILABLE offsets between the start offset and ``next_offset`` (released,
   expired, or left over by an earlier acquisition cut at the budget), each one's delivery count
   up by one;
2. then new records, from ``next_offset`` through the record batches the caller read from the log
   there (``log_batches``: (base offset, last offset) of each batch, ascending). In
   ``batch_optimized`` mode (ShareFetch v2's mode 0, Kafka's default) whole log batches are taken
   until the budget is reached, so a batch is never split between consumers; ``record_limit``
   (mode 1) takes exactly the budget. Offsets missing between log batches (compaction) are
   acquired with them: the client acknowledges what it did not receive as GAP, as Kafka's does.
   New records are bounded by ``share.partition.max.record.locks``: the start..next window never
   grows past it (Kafka's ``maxInFlightRecords``, KAFKA-19555).

Each acquired offset gets the member and the deadline ``now + share.record.lock.duration.ms``.
The delivery count is never decremented (KAFKA-19972), so a record is delivered at most
``share.delivery.count.limit`` times: at the limit a release or lock expiry archives it.

Delivery throttling (Kafka's KAFKA-17541): a record delivered ``throttle_limit`` times already
(half the delivery limit, at least 2) is redelivered apart from everything else, in a run half as
long at each further attempt and alone on its last one. A poison record that crashes its consumer
(and so fails every record delivered with it) is thereby isolated before the limit archives it,
and the records around it are not archived with it.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from .config import ShareConfig
from .partition import Change, SharePartition, commit
from .records import ShareRecord, StateRun
from .runs import ACQUIRED, AVAILABLE, Runs


class AcquireMode(enum.IntEnum):
    """ShareFetch v2's ``ShareAcquireMode`` (KIP-1206)."""

    BATCH_OPTIMIZED = 0
    RECORD_LIMIT = 1


@dataclass(frozen=True, slots=True)
class AcquiredRange:
    """One ``AcquiredRecords`` entry of a ShareFetch answer."""

    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class Acquisition:
    acquired: list[AcquiredRange]
    records: list[ShareRecord]

    @property
    def count(self) -> int:
        return sum(r.last_offset - r.first_offset + 1 for r in self.acquired)


def acquire(
    p: SharePartition,
    member_id: str,
    log_batches: Sequence[tuple[int, int]],
    max_records: int,
    now_ms: int,
    config: ShareConfig,
    mode: AcquireMode = AcquireMode.BATCH_OPTIMIZED,
    last_fetched_offset: int | None = None,
) -> Acquisition:
    """Acquire for ``member_id`` and replay the records that say so (the caller logs them).

    ``last_fetched_offset``: the last offset the caller read from the log; a redelivery past it
    waits for a read that reaches it (the records sent are the batches read, so an offset acquired
    beyond them would reach the member without its record). None: no bound (the caller read
    everything up to ``next_offset``)."""
    if not p.initialized or max_records <= 0 or not member_id:
        return Acquisition([], [])
    deadline = now_ms + config.lock_duration_ms
    change = Change()
    taken: Runs = []  # every acquired run, ascending: the answer's ranges
    budget = max_records

    throttled = False
    redelivery_end = p.next_offset if last_fetched_offset is None else min(p.next_offset, last_fetched_offset + 1)
    limit = throttle_limit(config.delivery_count_limit)
    # Nothing below the first AVAILABLE offset can be redelivered: start the walk at its batch.
    # Walked per run; a run of AVAILABLE offsets is acquired whole (or up to the budget) at once.
    walk_from = max(p.start_offset, p.next_fetch_offset())
    done = walk_from >= redelivery_end
    for first in () if done else p.first_batches(walk_from):
        if first >= redelivery_end:
            break
        if not p.has_available(first):
            continue
        moved: Runs = []
        for r in p.runs[first]:
            if r.state != AVAILABLE or r.last < walk_from:
                continue
            lo, hi = max(r.first, walk_from), min(r.last, redelivery_end - 1)
            if lo > hi or budget <= 0:
                done = True
                break
            count = r.delivery_count
            if count >= limit:
                if taken or moved:
                    done = True  # a record that keeps failing is delivered apart from the others
                    break
                budget = min(budget, _throttled_size(p, first, lo, count, config.delivery_count_limit))
                throttled = True
                n = 1  # its neighbours in this run keep failing too: each is delivered apart
            else:
                n = min(budget, hi - lo + 1)
            moved.append(StateRun(lo, lo + n - 1, ACQUIRED, count + 1, member_id, deadline))
            budget -= n
            if lo + n - 1 < r.last:  # the rest of this run waits: no budget, throttled, or past the read
                done = True
                break
        if moved:
            change.set(p, first, moved)
            taken += moved
        if done:
            break

    capacity = config.max_in_flight_records - p.in_flight_window()
    if budget > 0 and capacity > 0 and not throttled:
        last = _last_new_offset(p.next_offset, log_batches, min(budget, capacity), mode)
        if last is not None:
            last = min(last, p.next_offset + capacity - 1)
            run = StateRun(p.next_offset, last, ACQUIRED, 1, member_id, deadline)
            change.runs[p.next_offset] = [run]
            change.entered[ACQUIRED] += last - p.next_offset + 1
            change.new_batch = (p.next_offset, last)
            taken.append(run)

    acquired = _ranges(taken)
    return Acquisition(acquired, commit(p, change))


def throttle_limit(delivery_count_limit: int) -> int:
    """From this delivery count on, a redelivery is throttled (Kafka's ``throttleRecordsDeliveryLimit``)."""
    return max(2, -(-delivery_count_limit // 2))


def _throttled_size(p: SharePartition, batch: int, first: int, count: int, delivery_count_limit: int) -> int:
    """How many offsets a throttled redelivery from ``first`` (delivered ``count`` times, in the
    batch starting at ``batch``) hands out: half the available run of its batch per delivery past
    the throttle limit, and one alone on the last attempt."""
    if delivery_count_limit > 2 and count == delivery_count_limit - 1:
        return 1
    run = 0
    expected = first
    for r in p.runs[batch]:
        if r.last < first:
            continue
        if r.state != AVAILABLE or r.first > expected:
            break
        run += r.last - expected + 1
        expected = r.last + 1
    return max(1, run >> (count - throttle_limit(delivery_count_limit) + 1))


def _last_new_offset(
    first: int, log_batches: Sequence[tuple[int, int]], budget: int, mode: AcquireMode
) -> int | None:
    """The last offset of the new records to acquire from ``first``, or None if the log has none."""
    ends = [last for _, last in log_batches if last >= first]
    if not ends:
        return None
    limit = first + budget - 1
    if mode is AcquireMode.RECORD_LIMIT:
        return min(limit, ends[-1])
    for end in ends:  # whole log batches: stop at the first batch end that reaches the budget
        if end >= limit:
            return end
    return ends[-1]


def _ranges(taken: Runs) -> list[AcquiredRange]:
    """Adjacent acquired runs with the same delivery count as one range (KAFKA-19957): the
    redeliveries, ascending, then the new batch (delivered for the first time)."""
    ranges: list[AcquiredRange] = []
    for r in taken:
        if ranges and ranges[-1].last_offset == r.first - 1 and ranges[-1].delivery_count == r.delivery_count:
            ranges[-1] = AcquiredRange(ranges[-1].first_offset, r.last, r.delivery_count)
        else:
            ranges.append(AcquiredRange(r.first, r.last, r.delivery_count))
    return ranges
