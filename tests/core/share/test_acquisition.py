"""Acquisition at the edges of the log: a log batch that starts before the next offset, offsets a
compaction removed (acquired with their batch, acknowledged as GAP by the client), a budget that
mixes redeliveries with new records, and nothing for an empty member id or budget."""

from __future__ import annotations

from coordinator.core.errors import ErrorCode
from coordinator.core.share.acknowledgement import AckBatch, AckType, acknowledge
from coordinator.core.share.acquisition import AcquiredRange, acquire
from coordinator.core.share.records import RecordState

from .twin import Twin


def test_a_log_batch_straddling_the_next_offset_is_acquired_from_the_next_offset() -> None:
    t = Twin(start_offset=3)
    got = acquire(t.p, "a", [(0, 9)], 4, 0, t.config)
    t.log_records(got.records)
    assert got.acquired == [AcquiredRange(3, 9, 1)]


def test_compacted_holes_are_acquired_and_the_client_acknowledges_them_as_gaps() -> None:
    t = Twin()
    got = acquire(t.p, "a", [(0, 1), (5, 6)], 10, 0, t.config)  # 2-4 compacted away
    t.log_records(got.records)
    assert got.acquired == [AcquiredRange(0, 6, 1)]
    types = tuple(int(x) for x in [AckType.ACCEPT] * 2 + [AckType.GAP] * 3 + [AckType.ACCEPT] * 2)
    result = acknowledge(t.p, "a", [AckBatch(0, 6, types)], 0, t.config)
    t.log_records(result.records)
    assert result.error == ErrorCode.NONE and t.p.start_offset == 7


def test_redeliveries_come_first_then_new_records_within_one_budget() -> None:
    t = Twin()
    t.log_records(acquire(t.p, "a", [(0, 4)], 5, 0, t.config).records)
    result = acknowledge(t.p, "a", [AckBatch(1, 2, (int(AckType.RELEASE),))], 0, t.config)
    t.log_records(result.records)
    got = acquire(t.p, "b", [(0, 4), (5, 7)], 4, 0, t.config)
    t.log_records(got.records)
    assert got.acquired == [AcquiredRange(1, 2, 2), AcquiredRange(5, 7, 1)], "2 redelivered, then a whole batch"
    assert t.p.offsets[0].state is RecordState.ACQUIRED and t.p.offsets[0].member_id == "a"


def test_no_member_or_no_budget_acquires_nothing() -> None:
    t = Twin()
    assert acquire(t.p, "", [(0, 4)], 5, 0, t.config).acquired == []
    assert acquire(t.p, "a", [(0, 4)], 0, 0, t.config).acquired == []
    assert acquire(t.p, "a", [], 5, 0, t.config).acquired == []
    assert t.p.next_offset == 0


def test_a_redelivery_past_what_the_caller_read_waits_for_a_read_that_reaches_it() -> None:
    t = Twin()
    t.log_records(acquire(t.p, "a", [(0, 4), (5, 9)], 10, 0, t.config).records)
    result = acknowledge(t.p, "a", [AckBatch(1, 1, (int(AckType.RELEASE),)), AckBatch(7, 7, (int(AckType.RELEASE),))],
                         0, t.config)
    t.log_records(result.records)
    got = acquire(t.p, "b", [(0, 4)], 10, 0, t.config, last_fetched_offset=4)
    t.log_records(got.records)
    assert got.acquired == [AcquiredRange(1, 1, 2)], "offset 7 was not read: it stays available"
    assert t.p.offsets[7].state is RecordState.AVAILABLE
    later = acquire(t.p, "b", [(5, 9)], 10, 0, t.config, last_fetched_offset=9)
    assert later.acquired == [AcquiredRange(7, 7, 2)]
