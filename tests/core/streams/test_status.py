"""Heartbeat statuses in Kafka's order; MISSING_CLIENT_TAGS only for request v1."""

from __future__ import annotations

from coordinator.core.streams.records import StreamsGroupTopologyValue, Subtopology
from coordinator.core.streams.status import Delay, heartbeat_statuses
from coordinator.core.streams.topology import configure

MISSING = configure(StreamsGroupTopologyValue(1, (Subtopology("0", source_topics=("in",)),)), {})


def test_every_status_in_kafkas_order() -> None:
    statuses = heartbeat_statuses(group_topology_epoch=1, member_topology_epoch=0, delay=Delay.INITIAL_REBALANCE,
                                  configured=MISSING, shutdown_requested_by="m-9", rack_aware_tags=["zone", "rack"],
                                  member_tags=["zone"], api_version=1)
    assert statuses == [
        (0, "The member's topology epoch 0 is behind the group's topology epoch 1."),
        (5, "Assignment delayed due to the configured initial rebalance delay."),
        (1, "Source topics in are missing."),
        (4, "Streams group member m-9 encountered a fatal error and requested a shutdown for the entire application."),
        (6, "Missing required client tags for rack-aware standby assignment: [rack]. Configure them via "
            "'client.tag.<tagKey>' in your Streams config."),
    ]


def test_a_v0_client_never_hears_of_client_tags_and_a_ready_group_says_nothing() -> None:
    ready = configure(StreamsGroupTopologyValue(1, (Subtopology("0", source_topics=("in",)),)), {"in": 1})
    assert heartbeat_statuses(group_topology_epoch=1, member_topology_epoch=1, delay=None, configured=ready,
                              shutdown_requested_by=None, rack_aware_tags=["zone"], member_tags=[],
                              api_version=0) == []
