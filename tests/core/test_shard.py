"""Shard-level contract: loading, restart, idempotent replay, epochs, unload, metric views."""

from __future__ import annotations

from coordinator.core.config import GroupConfig
from coordinator.core.errors import ErrorCode
from coordinator.core.records import CoordinatorEpochKey, CoordinatorEpochValue, Record
from coordinator.core.result import Result
from coordinator.core.shard import CoordinatorShard
from tests.core.harness import FAST, Harness


def test_restart_restores_stable_groups_with_fresh_sessions() -> None:
    h = Harness()
    (leader, follower), gen = h.stable_group("g", 2)
    h.advance(9_000)  # both sessions are 1 s from expiring
    h.restart()
    group = h.group("g")
    assert (group.state_name, group.generation_id, group.leader_id) == ("Stable", gen, leader)
    assert h.timers[("classic-heartbeat", "g", follower)] == h.now + 10_000
    assert h.reply(h.heartbeat("g", follower, gen)).error_code == ErrorCode.NONE
    assert h.reply(h.sync("g", follower, gen)).assignment == f"assign-{follower}".encode()


def test_restart_mid_rebalance_returns_to_the_last_persisted_generation() -> None:
    h = Harness()
    (leader, follower), gen = h.stable_group("g", 2)
    h.join("g", leader)
    h.join("g", follower)
    assert h.state("g") == "CompletingRebalance"
    h.restart()
    group = h.group("g")
    assert (group.state_name, group.generation_id) == ("Stable", gen)
    assert h.reply(h.heartbeat("g", leader, gen + 1)).error_code == ErrorCode.ILLEGAL_GENERATION


def test_members_that_do_not_come_back_after_restart_expire() -> None:
    h = Harness()
    (leader, _follower), gen = h.stable_group("g", 2)
    h.restart()
    h.advance(5_000)
    h.heartbeat("g", leader, gen)
    h.advance(5_000)
    assert list(h.group("g").members) == [leader]


class _RuntimeThatReplays(Harness):
    """A runtime that (needlessly) calls replay() for every record handle() returned."""

    def _absorb(self, result: Result) -> None:
        for record in result.records:
            self.shard.replay(record)
        super()._absorb(result)


def _scenario(h: Harness) -> tuple[object, ...]:
    (leader, follower), gen = h.stable_group("g", 2, instance_id=None)
    h.commit("g", generation_id=gen, member_id=leader)
    h.join("g", leader)  # soft state now runs ahead of the log
    h.join("g", follower)
    h.join("s", instance_id="i0")
    h.advance(0)
    h.sync("s", h.group("s").leader_id or "", 1, [])
    h.join("s", instance_id="i0")  # static replacement while Stable: writes a record
    h.leave("g", follower)
    group = h.group("g")
    return (h.shard.durable_view(), group.state_name, list(group.members), h.group("s").state_name, h.replies)


def test_replaying_records_from_handle_is_a_no_op() -> None:
    assert _scenario(_RuntimeThatReplays()) == _scenario(Harness())


def test_replay_rebuilds_a_group_that_differs() -> None:
    h = Harness()
    h.stable_group("g", 2)
    fresh = CoordinatorShard(FAST)
    for record in h.records:
        fresh.replay(record)
    assert fresh.durable_view() == h.shard.durable_view()
    assert fresh.groups_by_state_and_type() == {("Stable", "classic"): 1}
    assert fresh.member_counts() == {"g": 2}


def test_over_capacity_group_rebalances_after_load() -> None:
    h = Harness()
    h.stable_group("g", 3)
    h.config = GroupConfig(group_initial_rebalance_delay_ms=0, group_max_size=2)
    h.restart()
    assert h.state("g") == "PreparingRebalance"


def test_coordinator_epoch_is_written_by_each_new_writer() -> None:
    shard = CoordinatorShard()
    first = shard.on_loaded(0, writer_id="a")
    assert first.records == [Record(CoordinatorEpochKey(), CoordinatorEpochValue(0, "a"))]
    standby = CoordinatorShard()
    standby.replay(first.records[0])
    second = standby.on_loaded(10, writer_id="b")
    assert second.records == [Record(CoordinatorEpochKey(), CoordinatorEpochValue(1, "b"))]
    assert standby.durable_view()["coordinator_epoch"] == CoordinatorEpochValue(1, "b")
    assert [op.key for op in second.timers] == [("offsets-expiration",)]


def test_unload_answers_parked_requests_and_cancels_timers() -> None:
    h = Harness()
    (leader, _follower), _ = h.stable_group("g", 2)
    join_ref = h.join("g", leader)
    h.join_new("other")
    other_ids = list(h.group("other").members)
    h.advance(0)
    sync_ref = h.sync("other", other_ids[0], 1) if h.group("other").leader_id != other_ids[0] else None
    result = h.shard.on_unloaded(h.now)
    h._absorb(result)
    assert h.reply(join_ref).error_code == ErrorCode.NOT_COORDINATOR
    if sync_ref is not None:
        assert h.reply(sync_ref).error_code == ErrorCode.NOT_COORDINATOR
    assert h.timers == {}
    assert h.shard.groups_by_state_and_type() == {("Dead", "classic"): 2}


def test_metric_views() -> None:
    h = Harness()
    h.stable_group("a", 2)
    h.join_new("b")
    h.commit("c")
    assert h.shard.groups_by_state_and_type() == {
        ("Stable", "classic"): 1,
        ("PreparingRebalance", "classic"): 1,
        ("Empty", "classic"): 1,
    }
    assert h.shard.member_counts() == {"a": 2, "b": 1, "c": 0}


def test_timer_for_a_cancelled_key_is_ignored() -> None:
    h = Harness()
    result = h.fire(("classic-join", "nope"), 123)
    assert (result.records, result.replies, result.timers) == ([], [], [])
