"""StreamsGroupHeartbeat as one pure step: members join, scale out with warm-ups and leave through
heartbeats alone; every step's records replay to the live group; bad requests change nothing."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from coordinator.core.errors import CoordinatorError, ErrorCode
from coordinator.core.streams import records as r
from coordinator.core.streams.heartbeat import heartbeat
from tests.core.streams.harness import (
    SETTINGS,
    TOPICS,
    TOPOLOGY,
    Client,
    Coordinator,
    metadata_hash,
    tasks_of,
)


def test_two_v0_members_join_and_split_the_tasks_at_once() -> None:
    coordinator, a, b = Coordinator(), Client("a", api_version=0), Client("b", api_version=0)
    first = coordinator.beat(a)
    assert first["member_epoch"] == 1 and len(tasks_of(first["active_tasks"])) == 6
    assert first["status"] == [] and "acceptable_recovery_lag" not in first
    coordinator.rounds([a, b])
    assert coordinator.group is not None and coordinator.group.state_name == "Stable"
    assert len(a.active) == len(b.active) == 3 and not a.active & b.active


def test_a_scale_out_warms_up_then_hands_over() -> None:
    coordinator, a, b = Coordinator(), Client("a"), Client("b")
    coordinator.rounds([a, b], 10)  # b warmed up and took over its share
    assert len(a.active) == len(b.active) == 3
    before = {"a": a.active, "b": b.active}
    c = Client("c", restore_per_heartbeat=0)  # restores nothing yet
    coordinator.rounds([a, b, c])
    assert coordinator.group is not None
    target = coordinator.group.targets
    assert len(target["c"].active) == 2
    assert c.warmup == target["c"].active and not c.active  # warming up, nothing moved yet
    assert {"a": a.active, "b": b.active} == before  # every task still processed where its state is
    c.restore_per_heartbeat = 400
    coordinator.rounds([a, b, c], 10)
    assert c.active == target["c"].active and not c.warmup
    assert a.active == target["a"].active and b.active == target["b"].active


def test_offsets_reported_once_while_the_group_reconciles_still_promote_the_warm_up() -> None:
    """The trunk client sends its offsets only when they change: a caught-up report that arrives
    while the group is not stable is kept, and the hand-over happens once it is."""
    coordinator, a = Coordinator(), Client("a", api_version=0)  # reports nothing: only b's report counts
    coordinator.rounds([a], 2)
    b = Client("b", restore_per_heartbeat=1000, only_changes=True)
    coordinator.beat(b)  # joins: warm-ups
    coordinator.beat(b)  # restored at once: its one report, while a has not reconciled yet
    assert coordinator.group is not None and coordinator.group.state_name != "Stable"
    assert b.warmup and not b.active
    coordinator.rounds([a, b], 6)
    assert b.active == coordinator.group.targets["b"].active and len(b.active) == 3 and not b.warmup


def test_a_v0_newcomer_gets_its_tasks_at_once() -> None:
    coordinator, a, b = Coordinator(), Client("a"), Client("b", api_version=0)
    assert coordinator.beat(a)["acceptable_recovery_lag"] == 100
    coordinator.rounds([a, b])
    assert len(b.active) == 3 and not b.warmup


def test_a_leave_fences_the_member_and_bumps_the_group() -> None:
    coordinator, a, b = Coordinator(), Client("a"), Client("b")
    coordinator.rounds([a, b], 10)
    assert coordinator.group is not None
    epoch = coordinator.group.group_epoch
    b.epoch = -1
    assert coordinator.beat(b)["member_epoch"] == -1
    assert set(coordinator.group.members) == {"a"} and coordinator.group.group_epoch == epoch + 1
    coordinator.rounds([a])
    assert len(a.active) == 6


def test_missing_internal_topics_keep_the_group_not_ready_with_empty_assignments() -> None:
    coordinator, a = Coordinator(), Client("a")
    coordinator.group, step = heartbeat(None, coordinator.soft, a.request(), {"words": 6}, metadata_hash, SETTINGS,
                                        "a", "/127.0.0.1", 1)
    assert coordinator.group.state_name == "NotReady"
    assert step.response["status"] == [{"status_code": 3, "status_detail": "Internal topics are missing: "
                                                                           "app-counts-changelog"}]
    assert [t.name for t in step.internal_topics] == ["app-counts-changelog"]
    assert step.response["active_tasks"] == []


@pytest.mark.parametrize(("change", "code"), [
    ({"member_epoch": 3}, ErrorCode.FENCED_MEMBER_EPOCH),
    ({"member_id": "stranger", "member_epoch": 1}, ErrorCode.UNKNOWN_MEMBER_ID),
    ({"group_id": "other", "member_epoch": 1}, ErrorCode.GROUP_ID_NOT_FOUND),
    ({"instance_id": "i-1"}, ErrorCode.UNKNOWN_MEMBER_ID),
    ({"task_offsets": (("0", 1, 5), ("0", 1, 6))}, ErrorCode.INVALID_REQUEST),
    ({"active_tasks": frozenset({("0", 9)})}, ErrorCode.INVALID_REQUEST),
    ({"member_epoch": 0, "member_id": "d", "rebalance_timeout_ms": 1, "process_id": "p",
      "topology": r.StreamsGroupTopologyValue(0, TOPOLOGY.subtopologies * 1 + (r.Subtopology(
          "1", source_topics=("words",)),))}, ErrorCode.INVALID_REQUEST),
])
def test_a_refused_heartbeat_writes_nothing(change: dict[str, Any], code: ErrorCode) -> None:
    coordinator, a = Coordinator(), Client("a")
    coordinator.rounds([a], 2)
    group = coordinator.group
    assert group is not None
    members, epoch = dict(group.members), group.group_epoch
    request = msgspec.structs.replace(a.request(), **change)
    with pytest.raises(CoordinatorError) as refused:
        heartbeat(None if change.get("group_id") else group, coordinator.soft, request, TOPICS, metadata_hash,
                  SETTINGS, "a", "/127.0.0.1", 10_000)
    assert refused.value.code == code
    assert group.members == members and group.group_epoch == epoch


def test_a_static_member_leaves_for_a_while_and_comes_back_under_a_new_id_without_a_rebalance() -> None:
    coordinator = Coordinator()
    a = Client("a1", api_version=0, instance_id="i-a", process_id="pa")
    b = Client("b", api_version=0)
    coordinator.rounds([a, b])
    group = coordinator.group
    assert group is not None
    epoch, tasks = group.group_epoch, a.active
    a.epoch = -2
    assert coordinator.beat(a)["member_epoch"] == -2
    assert group.members["a1"].member_epoch == -2 and group.members["a1"].assigned.tasks().active == tasks
    assert all(e == 0 for e in group.members["a1"].assigned.active.values())
    back = Client("a2", api_version=0, instance_id="i-a", process_id="pa")  # restarted: a new member id
    coordinator.rounds([back, b])
    assert set(group.members) == {"a2", "b"} and back.active == tasks
    assert group.group_epoch == epoch  # same process, same topology: nothing for the assignor to redo


def test_an_instance_id_is_held_by_one_member_at_a_time() -> None:
    coordinator = Coordinator()
    a = Client("a1", api_version=0, instance_id="i-a")
    coordinator.rounds([a])
    assert coordinator.group is not None
    for request, code in (
        (Client("a2", api_version=0, instance_id="i-a").request(), ErrorCode.UNRELEASED_INSTANCE_ID),
        (msgspec.structs.replace(a.request(), member_id="a3"), ErrorCode.FENCED_INSTANCE_ID),
        (msgspec.structs.replace(a.request(), member_epoch=-2, instance_id="i-x"), ErrorCode.UNKNOWN_MEMBER_ID),
    ):
        with pytest.raises(CoordinatorError) as refused:
            heartbeat(coordinator.group, coordinator.soft, request, TOPICS, metadata_hash, SETTINGS, "c", "h", 1)
        assert refused.value.code == code
    assert set(coordinator.group.members) == {"a1"}


def test_a_warm_up_over_an_empty_changelog_is_promoted_once_its_move_stalls() -> None:
    """The trunk client reports a warm-up over an empty changelog as offset 0, end Long.MAX_VALUE,
    once (its offsets never change), and the owner reports nothing: the lag is unknown. The task
    stays with its owner for two report periods, then moves without waiting any longer."""
    coordinator, a = Coordinator(), Client("a", api_version=0)
    coordinator.rounds([a], 2)
    b = Client("b", restore_per_heartbeat=0, only_changes=True)
    b.end = 2**63 - 1
    coordinator.rounds([a, b], 6)
    assert coordinator.group is not None
    assert len(b.warmup) == 2 and not b.active  # the budget: two warm-ups, nothing moved yet
    bound = 2 * max(SETTINGS.task_offset_interval_ms, SETTINGS.heartbeat_interval_ms)
    coordinator.now += bound - 2_000  # just short of the bound: still held
    coordinator.rounds([a, b], 2)
    assert not b.active
    coordinator.now += 2_000
    coordinator.rounds([a, b], 6)  # the first two stall and move; the third warms up, then its turn
    coordinator.now += bound
    coordinator.rounds([a, b], 6)
    assert b.active == coordinator.group.targets["b"].active and len(b.active) == 3 and not b.warmup
    assert a.active == coordinator.group.targets["a"].active
