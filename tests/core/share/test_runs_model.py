"""The run-based share partition against a per-offset model (``offset_model``), over random
sequences of fetches (both acquisition modes, reads cut short, log starts that move, aborted
transactions), acknowledgements of every type (one type per range, or one per offset, several
ranges in one request, a shared boundary offset), renewals, releases, lock expiries and crashes:
after every step each offset's state, the start and next offsets, the answers (acquired ranges,
error codes), the transition counters and the two summaries (next fetch offset, next lock
deadline) are the model's, and the partition rebuilt from its log equals the live one (``Twin``)."""

from __future__ import annotations

from itertools import pairwise

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from coordinator.core.share.acknowledgement import AckBatch, AckType, acknowledge
from coordinator.core.share.acquisition import AcquireMode
from coordinator.core.share.config import ShareConfig
from coordinator.core.share.fetch import acquire_from_log
from coordinator.core.share.partition import Transitions
from coordinator.core.share.release import (
    advance_log_start,
    expire_locks,
    release_all,
    release_member,
)

from .offset_model import OffsetModel
from .twin import Twin

LOG = [(0, 2), (3, 3), (4, 9), (10, 11), (12, 19), (20, 29), (30, 30), (31, 44), (45, 59)]
END = 60
LOCK = 1_000
MEMBERS = st.sampled_from(["a", "b"])
TYPES = st.sampled_from([AckType.ACCEPT, AckType.RELEASE, AckType.REJECT, AckType.GAP, AckType.RENEW])


class RunsAgainstOffsets(RuleBasedStateMachine):
    @initialize(limit=st.sampled_from([2, 3, 5]), in_flight=st.sampled_from([8, 25, 200]), renew=st.booleans())
    def start(self, limit: int, in_flight: int, renew: bool) -> None:
        config = ShareConfig(lock_duration_ms=LOCK, delivery_count_limit=limit, max_in_flight_records=in_flight,
                             renew_enabled=renew)
        self.t = Twin(config=config)
        self.model = OffsetModel(config)
        self.now = 10_000
        self.counted = Transitions()  # what the live path counted, taken after every step

    @rule(member=MEMBERS, max_records=st.integers(1, 30), record_limit=st.booleans(),
          read_batches=st.integers(1, len(LOG)), log_start=st.integers(0, END), moves_log_start=st.booleans(),
          aborted=st.lists(st.sampled_from([(3, 3), (10, 11), (30, 30), (31, 44)]), max_size=2, unique=True))
    def fetch(self, member: str, max_records: int, record_limit: bool, read_batches: int, log_start: int,
              moves_log_start: bool, aborted: list[tuple[int, int]]) -> None:
        mode = AcquireMode.RECORD_LIMIT if record_limit else AcquireMode.BATCH_OPTIMIZED
        log_start = log_start if moves_log_start else 0
        # The read starts at the batch holding the next fetch offset, as the edge reads.
        at = max(self.t.p.next_fetch_offset(), log_start)
        read = [b for b in LOG if b[1] >= at][:read_batches]
        aborted = sorted(aborted)
        got = acquire_from_log(self.t.p, member, log_start, read, aborted, max_records, self.now, self.t.config, mode)
        self.t.log_records(got.records)

        self.model.advance_log_start(log_start)
        expected: list[tuple[int, int, int]] = []
        if read:
            expected = self.model.acquire(member, read, max_records, self.now, mode, read[-1][1])
            aborted_offsets = sorted({o for f, last, _ in expected for a, b in aborted
                                      for o in range(max(f, a), min(last, b) + 1)})
            self.model.archive_aborted(aborted_offsets)
            expected = _cut(expected, set(aborted_offsets))
        assert [(r.first_offset, r.last_offset, r.delivery_count) for r in got.acquired] == expected

    @rule(member=MEMBERS, first=st.integers(0, END), size=st.integers(1, 20), ack=TYPES)
    def acknowledge_one_type(self, member: str, first: int, size: int, ack: AckType) -> None:
        self.ack(member, [(first, first + size - 1, (int(ack),))])

    @rule(member=MEMBERS, first=st.integers(0, END), types=st.lists(TYPES, min_size=1, max_size=20))
    def acknowledge_per_offset(self, member: str, first: int, types: list[AckType]) -> None:
        self.ack(member, [(first, first + len(types) - 1, tuple(int(t) for t in types))])

    @rule(data=st.data(), count=st.integers(1, 4), shares_boundary=st.booleans())
    def acknowledge_what_a_member_holds(self, data: st.DataObject, count: int, shares_boundary: bool) -> None:
        """Several ranges in one request over what one member holds (a boundary offset may be named twice)."""
        held = sorted(o for o, s in self.model.states.items() if s[0].name == "ACQUIRED")
        if not held:
            return
        member = self.model.states[held[0]][2]
        held = [o for o in held if self.model.states[o][2] == member]
        count = min(count, len(held))
        cuts = sorted(data.draw(st.lists(st.sampled_from(held), min_size=count, max_size=count, unique=True)))
        batches = []
        for i, first in enumerate(cuts):
            last = (cuts[i + 1] if shares_boundary else cuts[i + 1] - 1) if i + 1 < len(cuts) else first
            size = data.draw(st.sampled_from([1, last - first + 1]))
            types = tuple(int(t) for t in data.draw(st.lists(TYPES, min_size=size, max_size=size)))
            batches.append((first, last, types))
        self.ack(member, batches)

    def ack(self, member: str, batches: list[tuple[int, int, tuple[int, ...]]]) -> None:
        result = acknowledge(self.t.p, member, [AckBatch(*b) for b in batches], self.now, self.t.config)
        self.t.log_records(result.records)
        assert result.error == self.model.acknowledge(member, batches, self.now), (batches, result)

    @rule(ms=st.integers(1, 2 * LOCK))
    def time_passes(self, ms: int) -> None:
        self.now += ms

    @rule()
    def locks_expire(self) -> None:
        self.t.log_records(expire_locks(self.t.p, self.now, self.t.config))
        self.model.release(None, expired_by=self.now)

    @rule(member=MEMBERS)
    def session_ends(self, member: str) -> None:
        self.t.log_records(release_member(self.t.p, member, self.t.config))
        self.model.release(member)

    @rule(log_start=st.integers(0, END + 5))
    def log_start_moves(self, log_start: int) -> None:
        self.t.log_records(advance_log_start(self.t.p, log_start))
        self.model.advance_log_start(log_start)

    @rule(release_held=st.booleans())
    def coordinator_crashes(self, release_held: bool) -> None:
        self.take_counters()
        self.t = self.t.crash()
        if release_held:
            self.t.log_records(release_all(self.t.p, self.t.config))
            self.model.release(None)

    @invariant()
    def runs_equal_the_offsets(self) -> None:
        if not hasattr(self, "t"):
            return
        p, m = self.t.p, self.model
        assert (p.start_offset, p.next_offset) == (m.start, m.next)
        assert {o: (s.state, s.delivery_count, s.member_id, s.lock_deadline) for o, s in p.offsets.items()} == m.states
        assert p.next_fetch_offset() == m.next_fetch_offset()
        assert p.next_lock_deadline() == m.next_lock_deadline()
        self.take_counters()
        assert self.counted == m.counted
        assert sum(p.counts().values()) == len(m.states)
        for runs in p.runs.values():  # canonical: neighbours differ, so one state has one form
            for a, b in pairwise(runs):
                assert a.last + 1 == b.first
                assert (a.state, a.delivery_count, a.member_id, a.lock_deadline) != (
                    b.state, b.delivery_count, b.member_id, b.lock_deadline)


    def take_counters(self) -> None:
        taken = self.t.p.applied.take()
        c = self.counted
        c.acquired += taken.acquired
        c.acknowledged += taken.acknowledged
        c.released += taken.released
        c.archived += taken.archived
        c.lock_expired += taken.lock_expired


def _cut(ranges: list[tuple[int, int, int]], offsets: set[int]) -> list[tuple[int, int, int]]:
    """The ranges with ``offsets`` taken out (what the answer reports after aborted ones are archived)."""
    out: list[tuple[int, int, int]] = []
    for first, last, count in ranges:
        for offset in range(first, last + 1):
            if offset in offsets:
                continue
            if out and out[-1][1] == offset - 1 and out[-1][2] == count and out[-1][0] >= first:
                out[-1] = (out[-1][0], offset, count)
            else:
                out.append((offset, offset, count))
    return out


TestRunsAgainstOffsets = RunsAgainstOffsets.TestCase
TestRunsAgainstOffsets.settings = settings(max_examples=200, stateful_step_count=50, deadline=None)
