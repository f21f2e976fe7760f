"""A new target: records only for members whose target changed, empty targets while not ready,
and replaying the records gives the group that target."""

from __future__ import annotations

from coordinator.core.streams import records as r
from coordinator.core.streams.group import StreamsGroupState
from coordinator.core.streams.member import StreamsGroupMember
from coordinator.core.streams.targets import compute_target
from coordinator.core.streams.tasks import EMPTY
from coordinator.core.streams.topology import configure
from coordinator.core.streams.warmup import MemberTaskOffsets

TOPOLOGY = r.StreamsGroupTopologyValue(0, (r.Subtopology("0", source_topics=("in",)),))


def group_of(*member_ids: str) -> StreamsGroupState:
    group = StreamsGroupState("app")
    for member_id in member_ids:
        group.replay(r.member_metadata_record("app", StreamsGroupMember(member_id=member_id,
                                                                        process_id=f"p-{member_id}")))
    group.replay(r.group_epoch_record("app", len(member_ids), 0, 0, {}))
    return group


def test_records_persist_the_target_and_only_what_changed() -> None:
    ready = configure(TOPOLOGY, {"in": 4})
    group = group_of("a")
    target, records = compute_target(group, ready, {}, 0, 100)
    assert target["a"].active == {("0", p) for p in range(4)}
    for record in records:
        group.replay(record)
    assert group.targets == target and (group.assignment_epoch, group.assignment_timestamp) == (1, 100)

    group.replay(r.member_metadata_record("app", StreamsGroupMember(member_id="b", process_id="p-b")))
    group.replay(r.group_epoch_record("app", 2, 0, 0, {}))
    target, records = compute_target(group, ready, {"b": MemberTaskOffsets({("0", 3): 5}, {}, True)}, 0, 200)
    assert {type(x.key).__name__ for x in records[:-1]} == {"StreamsGroupTargetAssignmentMemberKey"}
    assert len(records) == 3 and len(target["a"].active) == len(target["b"].active) == 2
    for record in records:
        group.replay(record)
    _, again = compute_target(group, ready, {"b": MemberTaskOffsets({("0", 3): 5}, {}, True)}, 0, 300)
    assert len(again) == 1  # nothing changed: only the epoch record


def test_a_topology_that_is_not_ready_gives_empty_targets() -> None:
    group = group_of("a", "b")
    target, _ = compute_target(group, configure(TOPOLOGY, {}), {}, 1, 100)
    assert target == {"a": EMPTY, "b": EMPTY}
