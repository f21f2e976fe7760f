"""StreamsGroupDescribe's description of a live group built by heartbeats, encoded as Kafka's v0
response; timeouts fence members only while they still deserve it."""

from __future__ import annotations

from kio.schema.streams_group_describe.v0.response import StreamsGroupDescribeResponse

from coordinator.core.streams.describe import describe, rebalance_expired, session_expired
from coordinator.core.streams.member import MemberState
from coordinator.core.streams.topology import configure
from protocol.build import build
from tests.core.streams.harness import TOPICS, TOPOLOGY, Client, Coordinator


def test_a_described_group_shows_members_tasks_targets_and_offsets() -> None:
    coordinator, a, b = Coordinator(), Client("a"), Client("b", restore_per_heartbeat=100)
    coordinator.rounds([a, b], 3)
    assert coordinator.group is not None
    row = describe(coordinator.group, coordinator.soft, configure(TOPOLOGY, TOPICS), TOPICS)
    response = build(StreamsGroupDescribeResponse, {"groups": [row]})  # Kafka's v0 shape accepts it
    group = response.groups[0]
    assert (group.group_id, group.group_state, group.group_epoch) == ("app", "Stable", row["group_epoch"])
    changelog = group.topology.subtopologies[0].state_changelog_topics[0]
    assert (changelog.name, changelog.partitions) == ("app-counts-changelog", 6)  # the decided count
    member_b = next(m for m in group.members if m.member_id == "b")
    assert member_b.assignment.warmup_tasks and not member_b.target_assignment.warmup_tasks
    assert member_b.target_assignment.active_tasks  # where it is going
    assert member_b.task_offsets and member_b.task_end_offsets[0].offset == 1000
    assert not member_b.is_classic and member_b.process_id == "p-b"


def test_timeouts_fence_only_members_that_still_deserve_it() -> None:
    coordinator, a, b = Coordinator(), Client("a", api_version=0), Client("b", api_version=0)
    coordinator.rounds([a])
    coordinator.beat(b)
    coordinator.beat(a)  # a must revoke half its tasks
    group = coordinator.group
    assert group is not None and group.members["a"].state == MemberState.UNREVOKED_TASKS
    epoch = group.members["a"].member_epoch
    assert rebalance_expired(group, coordinator.soft, "a", epoch - 1) is None  # armed for another epoch
    step = rebalance_expired(group, coordinator.soft, "a", epoch)
    assert step is not None and "a" not in group.members
    assert session_expired(group, coordinator.soft, "a") is None
    assert session_expired(group, coordinator.soft, "b") is not None and group.state_name == "Empty"
    assert group.assignment_timestamp == 0  # the next group's first assignment is not held back
