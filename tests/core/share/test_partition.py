"""A share partition through the life of its records: acquired, acknowledged, released, rejected,
renewed, expired, archived at the delivery limit, bounded in flight; and after every step the
partition rebuilt from its log (whole and compacted) equals the live one (``Twin.check``)."""

from __future__ import annotations

from coordinator.core.errors import ErrorCode
from coordinator.core.share.acknowledgement import AckBatch, AckType, acknowledge
from coordinator.core.share.acquisition import AcquiredRange, AcquireMode, acquire
from coordinator.core.share.config import ShareConfig
from coordinator.core.share.records import RecordState
from coordinator.core.share.release import advance_log_start, expire_locks, release_member

from .twin import Twin

LOG = [(0, 4), (5, 9), (10, 19)]  # record batches of the log: (base offset, last offset)
NOW = 1_000_000
LOCK = 30_000


def fetch(t: Twin, member: str, max_records: int = 500, now: int = NOW, log: list[tuple[int, int]] | None = None,
          mode: AcquireMode = AcquireMode.BATCH_OPTIMIZED) -> list[AcquiredRange]:
    got = acquire(t.p, member, log if log is not None else LOG, max_records, now, t.config, mode)
    t.log_records(got.records)
    return got.acquired


def ack(t: Twin, member: str, first: int, last: int, *types: AckType, now: int = NOW) -> ErrorCode:
    result = acknowledge(t.p, member, [AckBatch(first, last, tuple(int(x) for x in types))], now, t.config)
    t.log_records(result.records)
    return result.error


def test_whole_log_batches_are_acquired_up_to_the_budget_and_the_next_fetch_gets_the_rest() -> None:
    t = Twin()
    assert fetch(t, "a", max_records=7) == [AcquiredRange(0, 9, 1)]  # 7 reaches into batch 5-9: all of it
    assert fetch(t, "b", max_records=7) == [AcquiredRange(10, 19, 1)]
    assert fetch(t, "c") == []
    assert (t.p.start_offset, t.p.next_offset, t.p.count(RecordState.ACQUIRED)) == (0, 20, 20)
    assert t.p.offsets[3].member_id == "a" and t.p.offsets[12].member_id == "b"


def test_record_limit_mode_takes_exactly_the_budget() -> None:
    t = Twin()
    assert fetch(t, "a", max_records=7, mode=AcquireMode.RECORD_LIMIT) == [AcquiredRange(0, 6, 1)]
    assert t.p.next_offset == 7


def test_accept_finishes_records_and_the_start_offset_passes_them() -> None:
    t = Twin()
    fetch(t, "a")
    assert ack(t, "a", 0, 9, AckType.ACCEPT) == ErrorCode.NONE
    assert t.p.start_offset == 10
    assert ack(t, "a", 12, 12, AckType.ACCEPT) == ErrorCode.NONE
    assert t.p.start_offset == 10 and t.p.offsets[12].state is RecordState.ACKNOWLEDGED
    assert ack(t, "a", 10, 19, AckType.ACCEPT, AckType.ACCEPT, AckType.GAP, *[AckType.ACCEPT] * 7) != ErrorCode.NONE
    assert t.p.offsets[10].state is RecordState.ACQUIRED, "a failed partition changes nothing"
    assert ack(t, "a", 10, 11, AckType.ACCEPT) == ErrorCode.NONE
    assert ack(t, "a", 13, 19, AckType.REJECT) == ErrorCode.NONE
    assert (t.p.start_offset, t.p.offsets, t.p.batches) == (20, {}, {})


def test_released_records_come_back_with_their_delivery_count_and_rejected_ones_do_not() -> None:
    t = Twin()
    fetch(t, "a", max_records=5)
    assert ack(t, "a", 0, 4, AckType.ACCEPT, AckType.RELEASE, AckType.REJECT, AckType.RELEASE, AckType.ACCEPT) == 0
    assert t.p.next_fetch_offset() == 1
    assert fetch(t, "b", max_records=2) == [AcquiredRange(1, 1, 2), AcquiredRange(3, 3, 2)]
    assert t.p.offsets[2].state is RecordState.ARCHIVED


def test_a_record_that_always_fails_is_archived_at_the_delivery_limit() -> None:
    t = Twin(config=ShareConfig(delivery_count_limit=3))
    for attempt in range(1, 4):
        assert fetch(t, "a", max_records=1, log=[(0, 0)]) == [AcquiredRange(0, 0, attempt)]
        assert ack(t, "a", 0, 0, AckType.RELEASE) == ErrorCode.NONE
    assert fetch(t, "a", max_records=1, log=[(0, 0)]) == []
    assert t.p.start_offset == 1, "archived: finished, the start offset passed it"


def test_a_lock_expires_the_record_comes_back_and_the_late_ack_is_refused() -> None:
    t = Twin()
    fetch(t, "a", max_records=5)
    assert t.p.next_lock_deadline() == NOW + LOCK
    late = NOW + LOCK
    assert ack(t, "a", 0, 0, AckType.ACCEPT, now=late) == ErrorCode.INVALID_RECORD_STATE, "deadline passed, no timer yet"
    t.log_records(expire_locks(t.p, late, t.config))
    assert t.p.count(RecordState.AVAILABLE) == 5 and t.p.next_lock_deadline() is None
    assert ack(t, "a", 0, 4, AckType.ACCEPT, now=late) == ErrorCode.INVALID_RECORD_STATE
    assert fetch(t, "b", max_records=5, now=late) == [AcquiredRange(0, 4, 2)]


def test_renew_restarts_the_lock_and_needs_the_switch() -> None:
    t = Twin()
    fetch(t, "a", max_records=5)
    assert ack(t, "a", 0, 4, AckType.RENEW, now=NOW + 20_000) == ErrorCode.NONE
    assert t.p.offsets[0].lock_deadline == NOW + 20_000 + LOCK and t.p.offsets[0].state is RecordState.ACQUIRED
    t.log_records(expire_locks(t.p, NOW + LOCK, t.config))
    assert t.p.count(RecordState.ACQUIRED) == 5, "renewed locks outlive the first deadline"
    off = Twin(config=ShareConfig(renew_enabled=False))
    fetch(off, "a", max_records=5)
    assert ack(off, "a", 0, 4, AckType.RENEW) == ErrorCode.INVALID_RECORD_STATE


def test_kafkas_answers_to_bad_acknowledgements() -> None:
    t = Twin()
    assert ack(t, "a", 0, 0, AckType.ACCEPT) == ErrorCode.INVALID_RECORD_STATE, "nothing in flight"
    fetch(t, "a", max_records=5)
    assert ack(t, "a", 3, 7, AckType.ACCEPT) == ErrorCode.INVALID_REQUEST, "never delivered"
    assert ack(t, "b", 0, 0, AckType.ACCEPT) == ErrorCode.INVALID_RECORD_STATE, "another member's"
    assert ack(t, "a", 1, 1, AckType.ACCEPT) == ErrorCode.NONE
    assert ack(t, "a", 1, 1, AckType.ACCEPT) == ErrorCode.INVALID_RECORD_STATE, "already acknowledged"
    assert ack(t, "a", 0, 0, AckType.ACCEPT) == ErrorCode.NONE
    assert ack(t, "a", 0, 1, AckType.REJECT) == ErrorCode.NONE, "below the start offset: skipped"
    assert t.p.offsets[2].state is RecordState.ACQUIRED


def test_new_records_stop_at_the_in_flight_limit_but_redeliveries_do_not() -> None:
    t = Twin(config=ShareConfig(max_in_flight_records=8))
    assert fetch(t, "a") == [AcquiredRange(0, 7, 1)]
    assert fetch(t, "b") == []
    assert ack(t, "a", 0, 1, AckType.RELEASE) == ErrorCode.NONE
    assert fetch(t, "b") == [AcquiredRange(0, 1, 2)]
    assert ack(t, "a", 2, 7, AckType.ACCEPT) == ErrorCode.NONE
    assert ack(t, "b", 0, 1, AckType.ACCEPT) == ErrorCode.NONE
    assert t.p.in_flight_window() == 0
    assert fetch(t, "b") == [AcquiredRange(8, 15, 1)], "the window is full again at 8, mid log batch"
    assert t.p.in_flight_window() == 8


def test_a_member_released_gives_its_records_back_and_keeps_the_counts() -> None:
    t = Twin()
    fetch(t, "a", max_records=5)
    fetch(t, "b", max_records=5)
    t.log_records(release_member(t.p, "a", t.config))
    assert [t.p.offsets[o].state for o in (0, 5)] == [RecordState.AVAILABLE, RecordState.ACQUIRED]
    assert t.p.offsets[0].delivery_count == 1


def test_the_log_start_moving_past_records_forgets_them() -> None:
    t = Twin()
    fetch(t, "a", max_records=5)
    t.log_records(advance_log_start(t.p, 3))
    assert (t.p.start_offset, min(t.p.offsets)) == (3, 3)
    assert ack(t, "a", 0, 4, AckType.ACCEPT) == ErrorCode.NONE
    assert t.p.start_offset == 5
    t.log_records(advance_log_start(t.p, 30))
    assert (t.p.start_offset, t.p.next_offset, t.p.batches) == (30, 30, {})


def test_a_crash_keeps_what_was_acknowledged_and_redelivers_what_was_held() -> None:
    t = Twin()
    fetch(t, "a", max_records=10)
    assert ack(t, "a", 0, 4, AckType.ACCEPT) == ErrorCode.NONE
    after = t.crash()
    assert after.p.view() == t.p.view()
    assert fetch(after, "b", now=NOW + LOCK - 1) == [AcquiredRange(10, 19, 1)], "held by a until its lock ends"
    after.log_records(expire_locks(after.p, NOW + LOCK, after.config))
    assert fetch(after, "b", now=NOW + LOCK) == [AcquiredRange(5, 9, 2)]


def test_a_poison_record_is_isolated_and_archived_alone() -> None:
    # A consumer that crashes on offset 3 before acknowledging anything it got with it: every
    # delivery that includes 3 ends by lock expiry. Throttling delivers the failing batch in ever
    # smaller runs, so only 3 reaches the delivery limit.
    t = Twin(config=ShareConfig(delivery_count_limit=5))
    now = NOW
    accepted: list[int] = []
    deliveries_of_3 = 0
    for _ in range(40):
        got = fetch(t, "a", max_records=8, now=now, log=[(0, 7)])
        if not got:
            break
        offsets = [o for r in got for o in range(r.first_offset, r.last_offset + 1)]
        if 3 in offsets:
            deliveries_of_3 += 1
            now += LOCK
            t.log_records(expire_locks(t.p, now, t.config))
        else:
            for r in got:
                assert ack(t, "a", r.first_offset, r.last_offset, AckType.ACCEPT, now=now) == ErrorCode.NONE
            accepted += offsets
    assert sorted(accepted) == [0, 1, 2, 4, 5, 6, 7], "only the poison record was archived"
    assert deliveries_of_3 == 5 and t.p.start_offset == 8
