"""Interactive Queries metadata: each member's endpoint with the input partitions of its tasks."""

from __future__ import annotations

from coordinator.core.streams.endpoints import EndpointPartitions, partitions_by_user_endpoint
from coordinator.core.streams.member import Endpoint, StreamsGroupMember
from coordinator.core.streams.records import StreamsGroupTopologyValue, Subtopology, TopicInfo
from coordinator.core.streams.tasks import TasksWithEpochs
from coordinator.core.streams.topology import configure

TOPOLOGY = StreamsGroupTopologyValue(0, (
    Subtopology("0", source_topics=("big", "small"), repartition_sink_topics=("rep",)),
    Subtopology("1", repartition_source_topics=(TopicInfo("rep"),), state_changelog_topics=(TopicInfo("cl"),)),
))
COUNTS = {"big": 4, "small": 2, "rep": 4, "cl": 4}
CONFIGURED = configure(TOPOLOGY, COUNTS)


def test_each_endpoint_gets_its_active_and_its_standby_and_warm_up_partitions() -> None:
    assert CONFIGURED.is_ready
    members = {
        "b": StreamsGroupMember(member_id="b", process_id="p2", user_endpoint=Endpoint("h2", 2),
                                assigned=TasksWithEpochs({("0", 3): 1}, frozenset({("1", 0)}),
                                                         frozenset({("1", 1)}))),
        "a": StreamsGroupMember(member_id="a", process_id="p1", user_endpoint=Endpoint("h1", 1),
                                assigned=TasksWithEpochs({("0", 0): 1, ("0", 1): 1, ("1", 2): 1})),
        "c": StreamsGroupMember(member_id="c", process_id="p3", assigned=TasksWithEpochs({("0", 2): 1})),
    }
    assert partitions_by_user_endpoint(members, CONFIGURED, COUNTS) == [
        EndpointPartitions(Endpoint("h1", 1), (("big", (0, 1)), ("rep", (2,)), ("small", (0, 1))), ()),
        # task 0_3 reads partition 3 of "big" only: "small" has two partitions
        EndpointPartitions(Endpoint("h2", 2), (("big", (3,)),), (("rep", (0, 1)),)),
    ]
