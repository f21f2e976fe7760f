"""A share partition as the simplest thing that could work: one entry per in-flight offset, every
operation a walk over offsets (the shape the core had before it held runs). The run-based core
must answer and end up exactly as this does (``test_runs_model``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from coordinator.core.errors import ErrorCode
from coordinator.core.share.acknowledgement import AckType
from coordinator.core.share.acquisition import AcquireMode, throttle_limit
from coordinator.core.share.config import ShareConfig
from coordinator.core.share.partition import Transitions
from coordinator.core.share.records import RecordState

# (state, delivery count, member, lock deadline): member and deadline only while ACQUIRED
State = tuple[RecordState, int, str, int]
AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED = (RecordState.AVAILABLE, RecordState.ACQUIRED,
                                               RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


@dataclass
class OffsetModel:
    config: ShareConfig
    start: int = 0
    next: int = 0
    states: dict[int, State] = field(default_factory=dict)
    batches: dict[int, int] = field(default_factory=dict)  # first -> last: one per acquisition of new records
    counted: Transitions = field(default_factory=Transitions)

    # ---- operations ----

    def acquire(self, member: str, log: list[tuple[int, int]], max_records: int, now: int, mode: AcquireMode,
                last_fetched: int | None) -> list[tuple[int, int, int]]:
        if max_records <= 0 or not member:
            return []
        deadline = now + self.config.lock_duration_ms
        budget, throttled = max_records, False
        got: dict[int, int] = {}  # offset -> its delivery count now
        end = self.next if last_fetched is None else min(self.next, last_fetched + 1)
        for offset in range(self.start, end):
            if budget <= 0:
                break
            state, count, _, _ = self.states[offset]
            if state is not AVAILABLE:
                continue
            if count >= throttle_limit(self.config.delivery_count_limit):
                if got:
                    break
                budget = min(budget, self._throttled_size(offset))
                throttled = True
            got[offset] = count + 1
            budget -= 1
            if throttled and budget <= 0:
                break
        capacity = self.config.max_in_flight_records - (self.next - self.start)
        if budget > 0 and capacity > 0 and not throttled:
            ends = [last for _, last in log if last >= self.next]
            if ends:
                limit = self.next + min(budget, capacity) - 1
                if mode is AcquireMode.RECORD_LIMIT:
                    last = min(limit, ends[-1])
                else:
                    last = next((e for e in ends if e >= limit), ends[-1])
                last = min(last, self.next + capacity - 1)
                self.batches[self.next] = last
                for offset in range(self.next, last + 1):
                    got[offset] = 1
                self.next = last + 1
        for offset, count in got.items():
            self.states[offset] = (ACQUIRED, count, member, deadline)
        self.counted.acquired += len(got)
        self._move_start()
        ranges: list[tuple[int, int, int]] = []
        for offset in sorted(got):
            if ranges and ranges[-1][1] == offset - 1 and ranges[-1][2] == got[offset]:
                ranges[-1] = (ranges[-1][0], offset, got[offset])
            else:
                ranges.append((offset, offset, got[offset]))
        return ranges

    def archive_aborted(self, offsets: list[int]) -> None:
        """Acquired offsets of aborted transactions: archived at once, never a delivery."""
        for offset in offsets:
            _, count, _, _ = self.states[offset]
            self.states[offset] = (ARCHIVED, count, "", -1)
        self.counted.acquired -= len(offsets)
        self.counted.archived += len(offsets)
        self._move_start()

    def acknowledge(self, member: str, batches: list[tuple[int, int, tuple[int, ...]]], now: int) -> ErrorCode:
        work = dict(self.states)
        changed: set[int] = set()
        for first, last, types in batches:
            if last < self.start:
                continue
            if not self.batches:
                return ErrorCode.INVALID_RECORD_STATE
            if last >= self.next:
                return ErrorCode.INVALID_REQUEST
            for offset in range(max(first, self.start), last + 1):
                state, count, holder, deadline = work[offset]
                if state is not ACQUIRED or holder != member or deadline <= now:
                    return ErrorCode.INVALID_RECORD_STATE
                ack = types[0] if len(types) == 1 else types[offset - first]
                if ack == AckType.ACCEPT:
                    work[offset] = (ACKNOWLEDGED, count, "", -1)
                elif ack == AckType.RELEASE:
                    work[offset] = self._released(count)
                elif ack == AckType.RENEW:
                    if not self.config.renew_enabled:
                        return ErrorCode.INVALID_RECORD_STATE
                    work[offset] = (ACQUIRED, count, holder, now + self.config.lock_duration_ms)
                else:
                    work[offset] = (ARCHIVED, count, "", -1)
                changed.add(offset)
        self.states = work
        for offset in changed:
            state = work[offset][0]
            if state is ACKNOWLEDGED:
                self.counted.acknowledged += 1
            elif state is ARCHIVED:
                self.counted.archived += 1
            elif state is AVAILABLE:
                self.counted.released += 1
        self._move_start()
        return ErrorCode.NONE

    def release(self, member: str | None, expired_by: int | None = None) -> None:
        """Give back what ``member`` holds (None: everyone), or (``expired_by``) every lock ended by then."""
        for offset, (state, count, holder, deadline) in list(self.states.items()):
            if state is not ACQUIRED:
                continue
            if expired_by is not None and deadline > expired_by:
                continue
            if expired_by is None and member is not None and holder != member:
                continue
            self.states[offset] = after = self._released(count)
            if expired_by is not None:
                self.counted.lock_expired += 1
            elif after[0] is AVAILABLE:
                self.counted.released += 1
            if after[0] is ARCHIVED:
                self.counted.archived += 1
        self._move_start()

    def advance_log_start(self, log_start: int) -> None:
        if log_start <= self.start:
            return
        self.start = log_start
        self.next = max(self.next, log_start)
        self._move_start()

    # ---- derived ----

    def next_fetch_offset(self) -> int:
        return min((o for o, s in self.states.items() if s[0] is AVAILABLE), default=self.next)

    def next_lock_deadline(self) -> int | None:
        return min((s[3] for s in self.states.values() if s[0] is ACQUIRED), default=None)

    def _released(self, count: int) -> State:
        return (ARCHIVED if count >= self.config.delivery_count_limit else AVAILABLE, count, "", -1)

    def _throttled_size(self, offset: int) -> int:
        count = self.states[offset][1]
        limit = self.config.delivery_count_limit
        if limit > 2 and count == limit - 1:
            return 1
        last = next((last for first, last in self.batches.items() if first <= offset <= last), offset)
        run = 0
        while offset + run <= last and self.states[offset + run][0] is AVAILABLE:
            run += 1
        return max(1, run >> (count - throttle_limit(limit) + 1))

    def _move_start(self) -> None:
        while self.start < self.next and self.states.get(self.start, (AVAILABLE,))[0] in (ACKNOWLEDGED, ARCHIVED):
            self.start += 1
        self.next = max(self.next, self.start)
        self.states = {o: s for o, s in self.states.items() if o >= self.start}
        self.batches = {f: last for f, last in self.batches.items() if last >= self.start}
