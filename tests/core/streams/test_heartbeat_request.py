"""The checks a StreamsGroupHeartbeat passes before the group sees it, with Kafka's codes and
messages."""

from __future__ import annotations

import msgspec
import pytest

from coordinator.core.errors import CoordinatorError, ErrorCode
from coordinator.core.streams.heartbeat_request import StreamsHeartbeat, check_heartbeat
from coordinator.core.streams.records import StreamsGroupTopologyValue, Subtopology, TopicInfo
from coordinator.core.streams.tasks import TasksTuple

TOPOLOGY = StreamsGroupTopologyValue(0, (Subtopology("0", source_topics=("in",)),))
JOIN = StreamsHeartbeat("app", "m-1", 0, rebalance_timeout_ms=300000, topology=TOPOLOGY, active_tasks=frozenset(),
                        standby_tasks=frozenset(), warmup_tasks=frozenset(), process_id="p")
STEADY = StreamsHeartbeat("app", "m-1", 4)


def test_a_join_and_a_steady_heartbeat_pass() -> None:
    check_heartbeat(JOIN)
    check_heartbeat(STEADY)
    check_heartbeat(StreamsHeartbeat("app", "m-1", -2, instance_id="i"))
    assert JOIN.owned() == TasksTuple() and STEADY.owned() is None


@pytest.mark.parametrize(("request_", "code", "message"), [
    (msgspec.structs.replace(JOIN, member_id=" "), ErrorCode.INVALID_REQUEST, "MemberId can't be empty."),
    (msgspec.structs.replace(STEADY, group_id=""), ErrorCode.INVALID_REQUEST, "GroupId can't be empty."),
    (msgspec.structs.replace(STEADY, instance_id=""), ErrorCode.INVALID_REQUEST, "InstanceId can't be empty."),
    (msgspec.structs.replace(STEADY, rack_id=" "), ErrorCode.INVALID_REQUEST, "RackId can't be empty."),
    (msgspec.structs.replace(JOIN, rebalance_timeout_ms=-1), ErrorCode.INVALID_REQUEST,
     "RebalanceTimeoutMs must be provided in first request."),
    (msgspec.structs.replace(JOIN, standby_tasks=frozenset({("0", 1)})), ErrorCode.INVALID_REQUEST,
     "StandbyTasks must be empty when (re-)joining."),
    (msgspec.structs.replace(JOIN, topology=None), ErrorCode.INVALID_REQUEST,
     "Topology must be non-null when (re-)joining."),
    (StreamsHeartbeat("app", "m-1", -2), ErrorCode.INVALID_REQUEST, "InstanceId can't be null."),
    (StreamsHeartbeat("app", "m-1", -3), ErrorCode.INVALID_REQUEST,
     "MemberEpoch is -3, but must be greater than or equal to -2."),
    (msgspec.structs.replace(STEADY, active_tasks=frozenset()), ErrorCode.INVALID_REQUEST,
     "If one task-type is non-null, all must be non-null."),
    (msgspec.structs.replace(STEADY, topology=TOPOLOGY), ErrorCode.INVALID_REQUEST,
     "Topology can only be provided when (re-)joining."),
    (msgspec.structs.replace(STEADY, topology=StreamsGroupTopologyValue(0, (
        Subtopology("0", source_topics=("__transaction_state",)),))), ErrorCode.STREAMS_INVALID_TOPOLOGY,
     "Use of Kafka internal topics __transaction_state in a Kafka Streams topology is prohibited."),
    (msgspec.structs.replace(JOIN, topology=StreamsGroupTopologyValue(0, (
        Subtopology("0", source_topics=("in",), state_changelog_topics=(TopicInfo("c", 2),)),))),
     ErrorCode.STREAMS_INVALID_TOPOLOGY, "Changelog topic c must have an undefined partition count, but it is set to 2."),
])
def test_kafka_refuses_these_before_the_group_sees_them(request_: StreamsHeartbeat, code: ErrorCode,
                                                        message: str) -> None:
    with pytest.raises(CoordinatorError) as refused:
        check_heartbeat(request_)
    assert (refused.value.code, refused.value.message) == (code, message)
