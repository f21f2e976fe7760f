"""Streams group records: Kafka's type ids, a round trip through the log's format for every
factory, and a member rebuilt from its records equal to the member that wrote them."""

from __future__ import annotations

import msgspec
import pytest

from coordinator.core.streams import records as r
from coordinator.core.streams.member import Endpoint, MemberState, StreamsGroupMember
from coordinator.core.streams.tasks import TasksTuple, TasksWithEpochs

MEMBER = StreamsGroupMember(
    member_id="m-1", process_id="p-1", member_epoch=7, previous_member_epoch=6, state=MemberState.UNREVOKED_TASKS,
    instance_id="i-1", rack_id=None, client_id="c", client_host="/127.0.0.1", rebalance_timeout_ms=300000,
    topology_epoch=2, user_endpoint=Endpoint("localhost", 8080), client_tags=(("zone", "a"),),
    assigned=TasksWithEpochs({("0", 1): 5, ("0", 3): 7, ("1", 0): 6}, frozenset({("1", 2)}), frozenset({("0", 2)})),
    pending_revocation=TasksWithEpochs({("0", 4): 3}, frozenset(), frozenset({("1", 5)})),
)
TOPOLOGY = r.StreamsGroupTopologyValue(2, (
    r.Subtopology("0", source_topics=("in",), repartition_sink_topics=("app-rep",),
                  state_changelog_topics=(r.TopicInfo("app-s-changelog", topic_configs=(
                      r.TopicConfig("cleanup.policy", "compact"),)),)),
    r.Subtopology("1", repartition_source_topics=(r.TopicInfo("app-rep", 4, 3),),
                  copartition_groups=(r.CopartitionGroup(repartition_source_topics=(0,)),)),
))


def test_type_ids_are_kafkas() -> None:
    assert {s.name: s.type_id for s in r.RECORD_TYPES} == {
        "StreamsGroupMetadata": 17, "StreamsGroupMemberMetadata": 19, "StreamsGroupTargetAssignmentMetadata": 20,
        "StreamsGroupTargetAssignmentMember": 21, "StreamsGroupCurrentMemberAssignment": 22,
        "StreamsGroupTopology": 23}


@pytest.mark.parametrize("record", [
    r.group_epoch_record("g", 9, -12345678901, 2, {"num.standby.replicas": "1"}),
    r.member_metadata_record("g", MEMBER),
    r.topology_record("g", TOPOLOGY),
    r.target_epoch_record("g", 9, 1_700_000_000_000),
    r.target_member_record("g", "m-1", TasksTuple(frozenset({("0", 1)}), frozenset({("1", 2)}))),
    r.current_assignment_record("g", MEMBER),
    *r.group_tombstones("g", ["m-2", "m-1"]),
], ids=lambda rec: type(rec.key).__name__ + ("-tombstone" if rec.value is None else ""))
def test_every_record_round_trips_through_the_log_format(record: r.StreamsRecord) -> None:
    type_id, key, value = r.encode_record(record)
    assert r.decode_record(type_id, key, value) == record


def test_a_member_rebuilt_from_its_records_is_the_member_that_wrote_them() -> None:
    metadata = r.decode_record(*r.encode_record(r.member_metadata_record("g", MEMBER))).value
    assignment = r.decode_record(*r.encode_record(r.current_assignment_record("g", MEMBER))).value
    assert isinstance(metadata, r.StreamsGroupMemberMetadataValue)
    assert isinstance(assignment, r.StreamsGroupCurrentMemberAssignmentValue)
    assert r.member_from_records("m-1", metadata, assignment) == MEMBER


def test_task_lists_are_sorted_and_active_ones_carry_their_assignment_epochs() -> None:
    value = r.current_assignment_record("g", MEMBER).value
    assert isinstance(value, r.StreamsGroupCurrentMemberAssignmentValue)
    assert value.active_tasks == (r.AssignedTaskIds("0", (1, 3), (5, 7)), r.AssignedTaskIds("1", (0,), (6,)))
    assert value.standby_tasks == (r.AssignedTaskIds("1", (2,)),)
    assert value.state == 2


def test_a_record_without_assignment_epochs_reads_them_as_the_member_epoch() -> None:
    value = r.StreamsGroupCurrentMemberAssignmentValue(4, 3, 1, (r.AssignedTaskIds("0", (0, 1)),))
    metadata = r.member_metadata_record("g", MEMBER).value
    assert isinstance(metadata, r.StreamsGroupMemberMetadataValue)
    member = r.member_from_records("m-1", metadata, value)
    assert member.assigned.active == {("0", 0): 4, ("0", 1): 4}
    unknown = msgspec.structs.replace(value, state=99)
    assert r.member_from_records("m-1", metadata, unknown).state == MemberState.UNKNOWN


def test_tombstones_come_in_kafkas_order() -> None:
    assert [type(t.key).__name__ for t in r.member_tombstones("g", "m")] == [
        "StreamsGroupCurrentMemberAssignmentKey", "StreamsGroupTargetAssignmentMemberKey",
        "StreamsGroupMemberMetadataKey"]
    names = [type(t.key).__name__ for t in r.group_tombstones("g", ["b", "a"])]
    assert names[-3:] == ["StreamsGroupMemberMetadataKey", "StreamsGroupMetadataKey", "StreamsGroupTopologyKey"]
    assert all(t.value is None for t in r.group_tombstones("g", ["a"]))


def test_older_bytes_read_with_kafkas_defaults_and_unknown_types_are_refused() -> None:
    type_id, key, _ = r.encode_record(r.group_epoch_record("g", 1, 2, 3, {}))
    short = b"\x00\x00" + msgspec.msgpack.encode([5, 6])  # a value written before the tagged fields
    value = r.decode_record(type_id, key, short).value
    assert value == r.StreamsGroupMetadataValue(5, 6, -1, None, -1, -1)
    with pytest.raises(r.UnknownStreamsRecord):
        r.decode_record(18, key, None)
    with pytest.raises(r.UnknownStreamsRecord):
        r.decode_record(type_id, key, b"\x00\x09" + msgspec.msgpack.encode([5, 6]))
