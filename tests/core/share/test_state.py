"""A shard's share partitions: initialized once, reset to a new start with a new state epoch (nothing
in flight survives, also after replay), and deleted so that the next initialization starts afresh."""

from __future__ import annotations

from coordinator.core.share.acknowledgement import AckBatch, AckType, acknowledge
from coordinator.core.share.acquisition import acquire
from coordinator.core.share.records import RecordState
from coordinator.core.share.state import delete, initialize, reset

from .twin import GROUP, TOPIC, Twin


def test_initialize_happens_once() -> None:
    t = Twin(start_offset=40)
    assert initialize(t.partitions, GROUP, TOPIC, 0, 0) == []
    assert (t.p.state_epoch, t.p.start_offset, t.p.next_offset) == (0, 40, 40)


def test_reset_forgets_what_was_in_flight_and_bumps_the_state_epoch() -> None:
    t = Twin()
    t.log_records(acquire(t.p, "a", [(0, 9)], 10, 0, t.config).records)
    t.log_records(reset(t.partitions, GROUP, TOPIC, 0, 5))
    assert (t.p.state_epoch, t.p.start_offset, t.p.next_offset, t.p.offsets) == (1, 5, 5, {})
    after = acknowledge(t.p, "a", [AckBatch(5, 5, (int(AckType.ACCEPT),))], 0, t.config)
    assert after.error != 0, "the old acquisition is gone"
    again = acquire(t.p, "b", [(0, 9)], 10, 0, t.config)
    t.log_records(again.records)
    assert again.acquired[0].first_offset == 5
    assert t.crash().p.view() == t.p.view()


def test_delete_forgets_the_partition_and_its_batches() -> None:
    t = Twin()
    t.log_records(acquire(t.p, "a", [(0, 9)], 3, 0, t.config).records)
    assert t.p.count(RecordState.ACQUIRED) == 10
    t.log_records(delete(t.partitions, GROUP, TOPIC, 0))
    assert t.partitions.get(GROUP, TOPIC, 0) is None and len(t.partitions) == 0
    assert t.compacted() == [], "nothing of it survives compaction"
    t.log_records(initialize(t.partitions, GROUP, TOPIC, 0, 7))
    assert (t.p.state_epoch, t.p.start_offset) == (0, 7)
