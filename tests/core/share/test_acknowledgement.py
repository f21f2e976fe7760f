"""The shape checks Kafka's KafkaApis.validateAcknowledgementBatches makes before any state is
touched (each failure answers the partition INVALID_REQUEST), and per-offset acknowledgement types."""

from __future__ import annotations

import pytest

from coordinator.core.errors import ErrorCode
from coordinator.core.share.acknowledgement import AckBatch, AckType, acknowledge, validate_batches
from coordinator.core.share.acquisition import acquire
from coordinator.core.share.records import RecordState

from .twin import Twin

A, R, J, G, N = (int(x) for x in (AckType.ACCEPT, AckType.RELEASE, AckType.REJECT, AckType.GAP, AckType.RENEW))


@pytest.mark.parametrize(("batches", "version", "renew", "why"), [
    ([AckBatch(5, 4, (A,))], 2, False, "<= last offset"),
    ([AckBatch(-1, 4, (A,))], 2, False, ">= 0"),
    ([AckBatch(0, 4, (A,)), AckBatch(3, 6, (A,))], 2, False, "must not overlap"),
    ([AckBatch(5, 6, (A,)), AckBatch(0, 1, (A,))], 2, False, "ascending"),
    ([AckBatch(0, 4, ())], 2, False, "one for the batch or one per offset"),
    ([AckBatch(0, 4, (A, A))], 2, False, "one for the batch or one per offset"),
    ([AckBatch(0, 0, (5,))], 2, True, "invalid acknowledge type 5"),
    ([AckBatch(0, 0, (N,))], 1, True, "invalid acknowledge type 4"),
    ([AckBatch(0, 0, (N,))], 2, False, "needs IsRenewAck"),
])
def test_malformed_batches_are_named(batches: list[AckBatch], version: int, renew: bool, why: str) -> None:
    reason = validate_batches(batches, version, renew)
    assert reason is not None and why in reason


def test_well_formed_batches_pass() -> None:
    assert validate_batches([AckBatch(0, 2, (A, G, J)), AckBatch(3, 3, (R,))], 1, False) is None
    assert validate_batches([AckBatch(0, 1, (N,))], 2, True) is None


def test_one_type_per_offset_applies_each_and_a_renew_among_them_keeps_the_lock() -> None:
    t = Twin()
    t.log_records(acquire(t.p, "a", [(0, 4)], 5, 0, t.config).records)
    result = acknowledge(t.p, "a", [AckBatch(0, 4, (A, R, J, G, N))], 100, t.config)
    t.log_records(result.records)
    assert result.error == ErrorCode.NONE
    states = [t.p.offsets[o].state for o in range(1, 5)]
    assert states == [RecordState.AVAILABLE, RecordState.ARCHIVED, RecordState.ARCHIVED, RecordState.ACQUIRED]
    assert t.p.start_offset == 1 and t.p.offsets[4].lock_deadline == 100 + t.config.lock_duration_ms


def test_batches_sharing_one_offset_pass_the_shape_check_and_fail_on_the_state() -> None:
    assert validate_batches([AckBatch(0, 4, (A,)), AckBatch(4, 6, (A,))], 1, False) is None
    t = Twin()
    t.log_records(acquire(t.p, "a", [(0, 9)], 10, 0, t.config).records)
    result = acknowledge(t.p, "a", [AckBatch(0, 4, (A,)), AckBatch(4, 6, (A,))], 0, t.config)
    assert result.error == ErrorCode.INVALID_RECORD_STATE and result.records == []
    assert t.p.offsets[0].state is RecordState.ACQUIRED, "nothing of the partition changed"
