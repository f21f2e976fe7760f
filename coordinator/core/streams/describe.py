"""StreamsGroupDescribe's description of one group (Kafka's ``StreamsGroup.asDescribedGroup``), as
a version-free mapping for ``protocol.build``, and the timers' expiry (session and rebalance
timeouts fence the member, as Kafka's ``streamsGroupFenceMember``).

Describe: the configured topology when it is ready (decided partition counts), else the stored one
(changelogs at 0), subtopologies by id, topics by name; each member with its current tasks
(``Assignment``, pending revocation left out), its persisted target (``TargetAssignment``, never
warm-ups) and the task offsets it reported; ``IsClassic`` is always false.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .group import StreamsGroupState
from .heartbeat import SoftState, Step, fence
from .member import MemberState
from .records import StreamsGroupTopologyValue, TopicInfo
from .tasks import EMPTY, Task, TasksTuple, by_subtopology
from .topology import ConfiguredTopology


def _task_ids(tasks: Iterable[Task]) -> list[dict[str, Any]]:
    return [{"subtopology_id": s, "partitions": ps} for s, ps in by_subtopology(tasks)]


def _assignment(tasks: TasksTuple) -> dict[str, Any]:
    return {"active_tasks": _task_ids(tasks.active), "standby_tasks": _task_ids(tasks.standby),
            "warmup_tasks": _task_ids(tasks.warmup)}


def _topic_info(info: TopicInfo, decided: Mapping[str, int]) -> dict[str, Any]:
    return {"name": info.name, "partitions": decided.get(info.name, info.partitions),
            "replication_factor": info.replication_factor,
            "topic_configs": [{"key": c.key, "value": c.value} for c in info.topic_configs]}


def _offsets(offsets: Mapping[Task, int]) -> list[dict[str, Any]]:
    return [{"subtopology_id": s, "partition": p, "offset": offsets[(s, p)]} for s, p in sorted(offsets)]


def describe_topology(topology: StreamsGroupTopologyValue, configured: ConfiguredTopology | None,
                      partition_counts: Mapping[str, int]) -> dict[str, Any]:
    decided: Mapping[str, int] = {}
    if configured is not None and configured.is_ready:
        decided = partition_counts
    return {"epoch": topology.epoch, "subtopologies": [
        {"subtopology_id": s.subtopology_id, "source_topics": sorted(s.source_topics),
         "repartition_sink_topics": sorted(s.repartition_sink_topics),
         "state_changelog_topics": [_topic_info(t, decided) for t in sorted(s.state_changelog_topics,
                                                                            key=lambda t: t.name)],
         "repartition_source_topics": [_topic_info(t, decided) for t in sorted(s.repartition_source_topics,
                                                                               key=lambda t: t.name)]}
        for s in sorted(topology.subtopologies, key=lambda s: s.subtopology_id)]}


def describe(group: StreamsGroupState, soft: SoftState, configured: ConfiguredTopology | None,
             partition_counts: Mapping[str, int]) -> dict[str, Any]:
    members = []
    for member_id in sorted(group.members):
        m = group.members[member_id]
        offsets = soft.offsets.get(member_id)
        members.append({
            "member_id": m.member_id, "member_epoch": m.member_epoch, "instance_id": m.instance_id,
            "rack_id": m.rack_id, "client_id": m.client_id, "client_host": m.client_host,
            "topology_epoch": m.topology_epoch, "process_id": m.process_id,
            "user_endpoint": {"host": m.user_endpoint.host, "port": m.user_endpoint.port} if m.user_endpoint else None,
            "client_tags": [{"key": k, "value": v} for k, v in m.client_tags],
            "task_offsets": _offsets(offsets.offsets) if offsets else [],
            "task_end_offsets": _offsets(offsets.end_offsets) if offsets else [],
            "assignment": _assignment(m.assigned.tasks()),
            "target_assignment": _assignment(group.targets.get(member_id, EMPTY)),
            "is_classic": False,
        })
    return {
        "group_id": group.group_id, "group_state": group.state_name, "group_epoch": group.group_epoch,
        "assignment_epoch": group.assignment_epoch,
        "topology": describe_topology(group.topology, configured, partition_counts) if group.topology else None,
        "members": members,
    }


def session_expired(group: StreamsGroupState, soft: SoftState, member_id: str) -> Step | None:
    """The session timeout fired: fence the member (None when it is already gone)."""
    if member_id not in group.members:
        return None
    return fence(group, soft, member_id)


def rebalance_expired(group: StreamsGroupState, soft: SoftState, member_id: str, epoch: int) -> Step | None:
    """The rebalance timeout armed when the member had to revoke at ``epoch`` (the epoch ``Step.arm``
    gave with it) fired: fenced if it is still there, at that epoch, and has not revoked."""
    member = group.members.get(member_id)
    if member is None or member.member_epoch != epoch or member.state != MemberState.UNREVOKED_TASKS:
        return None
    return fence(group, soft, member_id)
