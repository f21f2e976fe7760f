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
from itertools import islice

from .config import ShareConfig
from .partition import Change, OffsetState, SharePartition, commit
from .records import RecordState, ShareRecord


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
    budget = max_records

    throttled = False
    redelivery_end = p.next_offset if last_fetched_offset is None else min(p.next_offset, last_fetched_offset + 1)
    # Nothing below the first AVAILABLE offset can be redelivered: start the walk there.
    for offset in range(max(p.start_offset, p.next_fetch_offset()), redelivery_end):
        if budget <= 0:
            break
        current = p.offsets[offset]
        if current.state is not RecordState.AVAILABLE:
            continue
        if current.delivery_count >= throttle_limit(config.delivery_count_limit):
            if change.states:
                break  # a record that keeps failing is delivered apart from the others
            budget = min(budget, _throttled_size(p, offset, config.delivery_count_limit))
            throttled = True
        change.states[offset] = OffsetState(RecordState.ACQUIRED, current.delivery_count + 1, member_id, deadline)
        budget -= 1
        if throttled and budget <= 0:
            break

    capacity = config.max_in_flight_records - p.in_flight_window()
    if budget > 0 and capacity > 0 and not throttled:
        last = _last_new_offset(p.next_offset, log_batches, min(budget, capacity), mode)
        if last is not None:
            last = min(last, p.next_offset + capacity - 1)
            # One state object for every new offset (frozen, so sharing it is safe).
            change.states.update(dict.fromkeys(range(p.next_offset, last + 1),
                                               OffsetState(RecordState.ACQUIRED, 1, member_id, deadline)))
            change.new_batch = (p.next_offset, last)

    acquired = _ranges(change.states, change.new_batch)
    return Acquisition(acquired, commit(p, change))


def throttle_limit(delivery_count_limit: int) -> int:
    """From this delivery count on, a redelivery is throttled (Kafka's ``throttleRecordsDeliveryLimit``)."""
    return max(2, -(-delivery_count_limit // 2))


def _throttled_size(p: SharePartition, first: int, delivery_count_limit: int) -> int:
    """How many offsets a throttled redelivery from ``first`` hands out: half the available run of
    its batch per delivery past the throttle limit, and one alone on the last attempt."""
    count = p.offsets[first].delivery_count
    if delivery_count_limit > 2 and count == delivery_count_limit - 1:
        return 1
    batch_first = p.batch_of(first)
    last = p.batches[batch_first] if batch_first is not None else first
    run = 0
    for offset in range(first, last + 1):
        if p.offsets[offset].state is not RecordState.AVAILABLE:
            break
        run += 1
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


def _ranges(states: dict[int, OffsetState], new_batch: tuple[int, int] | None = None) -> list[AcquiredRange]:
    """Adjacent acquired offsets with the same delivery count as one range (KAFKA-19957). The new
    batch (delivered for the first time, after every redelivery) is one range without a walk."""
    ranges: list[AcquiredRange] = []
    # The redeliveries were put in first, ascending; the new batch's offsets after them.
    redelivered = sorted(states) if new_batch is None else islice(states, len(states) - (new_batch[1] - new_batch[0] + 1))
    for offset in redelivered:
        count = states[offset].delivery_count
        if ranges and ranges[-1].last_offset == offset - 1 and ranges[-1].delivery_count == count:
            ranges[-1] = AcquiredRange(ranges[-1].first_offset, offset, count)
        else:
            ranges.append(AcquiredRange(offset, offset, count))
    if new_batch is not None:
        first, last = new_batch
        if ranges and ranges[-1].last_offset == first - 1 and ranges[-1].delivery_count == 1:
            ranges[-1] = AcquiredRange(ranges[-1].first_offset, last, 1)
        else:
            ranges.append(AcquiredRange(first, last, 1))
    return ranges
