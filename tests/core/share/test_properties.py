"""Properties of the share partition under any interleaving of fetches, acknowledgements, releases,
lock expiries and coordinator crashes (Hypothesis state machine against a model of who holds what):

- a record is never held by two members at once, and never handed out once finished;
- a record is never acknowledged twice (ACCEPT succeeds at most once per offset);
- an acknowledgement the model says is valid succeeds, and one it says is not is refused;
- after a crash (the partition rebuilt from its compacted log) nothing finished comes back, and what
  was held and not acknowledged is delivered again (when its lock ends or its holder is released);
- in the end, with every lock expired and a consumer draining, every record is acknowledged or
  archived, and archived only after ``share.delivery.count.limit`` deliveries or a reject.
Every step also rebuilds the partition from its log and compares it with the live one (``Twin``).
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from coordinator.core.errors import ErrorCode
from coordinator.core.share.acknowledgement import AckBatch, AckType, acknowledge
from coordinator.core.share.acquisition import AcquireMode, acquire
from coordinator.core.share.config import ShareConfig
from coordinator.core.share.records import RecordState
from coordinator.core.share.release import expire_locks, release_all, release_member

from .twin import Twin

LOG = [(0, 2), (3, 3), (4, 9), (10, 11), (12, 19), (20, 29)]
END = 30
LIMIT = 3
LOCK = 1_000
MEMBERS = st.sampled_from(["a", "b", "c"])


@dataclass
class Held:
    member: str
    deadline: int


class SharePartitionMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.t = Twin(config=ShareConfig(lock_duration_ms=LOCK, delivery_count_limit=LIMIT, max_in_flight_records=12))
        self.now = 10_000
        self.held: dict[int, Held] = {}
        self.deliveries: dict[int, int] = {}
        self.accepted: set[int] = set()
        self.archived: set[int] = set()

    def finished(self, offset: int) -> bool:
        return offset in self.accepted or offset in self.archived

    def give_back(self, offset: int) -> None:
        del self.held[offset]
        if self.deliveries[offset] >= LIMIT:
            self.archived.add(offset)

    @rule(member=MEMBERS, max_records=st.integers(1, 15), record_limit=st.booleans())
    def fetch(self, member: str, max_records: int, record_limit: bool) -> None:
        mode = AcquireMode.RECORD_LIMIT if record_limit else AcquireMode.BATCH_OPTIMIZED
        got = acquire(self.t.p, member, LOG, max_records, self.now, self.t.config, mode)
        self.t.log_records(got.records)
        for r in got.acquired:
            for offset in range(r.first_offset, r.last_offset + 1):
                assert offset not in self.held, f"{offset} handed to {member} while {self.held.get(offset)} holds it"
                assert not self.finished(offset), f"{offset} handed out again after it was finished"
                self.deliveries[offset] = self.deliveries.get(offset, 0) + 1
                assert r.delivery_count == self.deliveries[offset]
                assert r.delivery_count <= LIMIT
                self.held[offset] = Held(member, self.now + LOCK)

    @rule(member=MEMBERS, first=st.integers(0, END + 2), size=st.integers(1, 6),
          ack=st.sampled_from([AckType.ACCEPT, AckType.RELEASE, AckType.REJECT, AckType.GAP, AckType.RENEW]))
    def acknowledge(self, member: str, first: int, size: int, ack: AckType) -> None:
        self.ack_range(member, first, first + size - 1, ack)

    @rule(data=st.data(), size=st.integers(1, 4), as_holder=st.booleans(),
          ack=st.sampled_from([AckType.ACCEPT, AckType.RELEASE, AckType.REJECT, AckType.RENEW]))
    def acknowledge_what_is_held(self, data: st.DataObject, size: int, as_holder: bool, ack: AckType) -> None:
        if not self.held:
            return
        first = data.draw(st.sampled_from(sorted(self.held)))
        member = self.held[first].member if as_holder else data.draw(MEMBERS)
        self.ack_range(member, first, first + size - 1, ack)

    def ack_range(self, member: str, first: int, last: int, ack: AckType) -> None:
        result = acknowledge(self.t.p, member, [AckBatch(first, last, (int(ack),))], self.now, self.t.config)
        self.t.log_records(result.records)
        expected_ok = self._expect_ok(member, first, last)
        assert (result.error == ErrorCode.NONE) == expected_ok, (result, member, first, last, self.held)
        if result.error != ErrorCode.NONE:
            return
        for offset in range(first, last + 1):
            if offset not in self.held:
                continue  # below the start offset: skipped, finished already
            if ack == AckType.ACCEPT:
                assert offset not in self.accepted, f"{offset} acknowledged twice"
                self.accepted.add(offset)
                del self.held[offset]
            elif ack in (AckType.REJECT, AckType.GAP):
                self.archived.add(offset)
                del self.held[offset]
            elif ack == AckType.RELEASE:
                self.give_back(offset)
            else:
                self.held[offset].deadline = self.now + LOCK

    def _expect_ok(self, member: str, first: int, last: int) -> bool:
        # An offset that is not held is acceptable only below the start offset (skipped): the start
        # offset is the first offset not finished.
        for offset in range(first, last + 1):
            held = self.held.get(offset)
            if held is not None:
                if held.member != member or held.deadline <= self.now:
                    return False
            elif not (self.finished(offset) and self._all_finished_below(offset)):
                return False
        return True

    def _all_finished_below(self, offset: int) -> bool:
        return all(self.finished(o) for o in range(0, offset + 1))

    @rule(ms=st.integers(1, 2 * LOCK))
    def time_passes(self, ms: int) -> None:
        self.now += ms

    @rule()
    def locks_expire(self) -> None:
        self.t.log_records(expire_locks(self.t.p, self.now, self.t.config))
        for offset in [o for o, h in self.held.items() if h.deadline <= self.now]:
            self.give_back(offset)

    @rule(member=MEMBERS)
    def session_ends(self, member: str) -> None:
        self.t.log_records(release_member(self.t.p, member, self.t.config))
        for offset in [o for o, h in self.held.items() if h.member == member]:
            self.give_back(offset)

    @rule(release_held=st.booleans())
    def coordinator_crashes(self, release_held: bool) -> None:
        self.t = self.t.crash()
        if release_held:  # a new coordinator has no sessions: it may hand everything held out again
            self.t.log_records(release_all(self.t.p, self.t.config))
            for offset in list(self.held):
                self.give_back(offset)

    @invariant()
    def partition_agrees_with_the_model(self) -> None:
        p = self.t.p
        for offset, held in self.held.items():
            state = p.offsets[offset]
            assert (state.state, state.member_id, state.lock_deadline) == (RecordState.ACQUIRED, held.member,
                                                                          held.deadline)
        for offset in range(p.start_offset):
            assert self.finished(offset), f"{offset} below the start offset but not finished"
        for offset in self.accepted | self.archived:
            assert offset < p.start_offset or p.offsets[offset].state.terminal

    def teardown(self) -> None:
        self.now += 10 * LOCK
        self.locks_expire()
        for _ in range(4 * END):
            got = acquire(self.t.p, "drain", LOG, 7, self.now, self.t.config)
            self.t.log_records(got.records)
            if not got.acquired:
                break
            for r in got.acquired:
                for offset in range(r.first_offset, r.last_offset + 1):
                    assert not self.finished(offset)
                    assert offset not in self.accepted
                    self.accepted.add(offset)
                result = acknowledge(self.t.p, "drain", [AckBatch(r.first_offset, r.last_offset, (1,))], self.now,
                                     self.t.config)
                assert result.error == ErrorCode.NONE
                self.t.log_records(result.records)
        assert self.accepted | self.archived == set(range(END)), "every record acknowledged or archived"
        assert not self.accepted & self.archived
        assert self.t.p.start_offset == END
        for offset in self.archived:
            assert self.deliveries[offset] >= 1


TestSharePartition = SharePartitionMachine.TestCase
TestSharePartition.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
