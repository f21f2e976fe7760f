"""Interactive Queries: which input partitions each member's endpoint serves (Kafka's
``EndpointToPartitionsManager``), for the heartbeat response's ``PartitionsByUserEndpoint``.

One entry per member with an endpoint (several members of one Streams instance share an endpoint:
clients union the entries). Active partitions are the source and repartition-source partitions of
the member's active tasks; standby partitions those of its standby **and warm-up** tasks (a warm-up
holds a copy of the state too: KAFKA-20868). A task's partition is listed for a topic only when the
topic has that partition (topics of one subtopology may have fewer partitions than it has tasks).
Topics and partitions come sorted.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import msgspec

from .member import Endpoint, StreamsGroupMember
from .tasks import Task
from .topology import ConfiguredTopology

TopicPartitions = tuple[tuple[str, tuple[int, ...]], ...]


class EndpointPartitions(msgspec.Struct, frozen=True):
    endpoint: Endpoint
    active: TopicPartitions
    standby: TopicPartitions


def _topic_partitions(tasks: Iterable[Task], configured: ConfiguredTopology,
                      partition_counts: Mapping[str, int]) -> TopicPartitions:
    subtopologies = configured.subtopologies or {}
    by_topic: dict[str, set[int]] = {}
    for subtopology_id, partition in tasks:
        subtopology = subtopologies.get(subtopology_id)
        if subtopology is None:
            continue
        for topic in subtopology.source_topics:
            if partition < partition_counts.get(topic, 0):
                by_topic.setdefault(topic, set()).add(partition)
    return tuple((topic, tuple(sorted(by_topic[topic]))) for topic in sorted(by_topic))


def endpoint_partitions(member: StreamsGroupMember, configured: ConfiguredTopology,
                        partition_counts: Mapping[str, int]) -> EndpointPartitions | None:
    if member.user_endpoint is None:
        return None
    assigned = member.assigned
    return EndpointPartitions(member.user_endpoint,
                              _topic_partitions(assigned.active, configured, partition_counts),
                              _topic_partitions(assigned.standby | assigned.warmup, configured, partition_counts))


def partitions_by_user_endpoint(members: Mapping[str, StreamsGroupMember], configured: ConfiguredTopology,
                                partition_counts: Mapping[str, int]) -> list[EndpointPartitions]:
    """Every member's entry, by member id."""
    entries = (endpoint_partitions(members[m], configured, partition_counts) for m in sorted(members))
    return [e for e in entries if e is not None]
