"""What ShareGroupDescribe v1 and DescribeShareGroupOffsets v0-v1 say about a share group, as the
version-free descriptions ``protocol.build`` turns into any version's response entity.

An unknown group, or an id that names a group of another type, is GROUP_ID_NOT_FOUND for both
(Kafka's ``shareGroupDescribe`` and ``describeShareGroupOffsets``). A partition without share state
has start offset -1 and lag -1, as Kafka answers a partition its persister has no summary for.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any
from uuid import UUID

from coordinator.core.errors import ErrorCode

from .assignor import NAME as ASSIGNOR_NAME
from .membership import ShareGroup
from .state import SharePartitions

UNKNOWN_AUTHORIZED_OPERATIONS = -(2**31)


def describe_group(group_id: str, group: ShareGroup | None, topic_names: Mapping[UUID, str]) -> dict[str, Any]:
    """One ``Groups`` entry of a ShareGroupDescribe answer."""
    if group is None:
        return {"group_id": group_id, "error_code": ErrorCode.GROUP_ID_NOT_FOUND,
                "error_message": f"Group {group_id} not found.", "group_state": "Dead",
                "authorized_operations": UNKNOWN_AUTHORIZED_OPERATIONS}
    members = []
    for member in sorted(group.members.values(), key=lambda m: m.member_id):
        members.append({
            "member_id": member.member_id, "rack_id": member.rack_id, "member_epoch": member.member_epoch,
            "client_id": member.client_id, "client_host": member.client_host,
            "subscribed_topic_names": sorted(member.subscribed_topic_names),
            "assignment": {"topic_partitions": [
                {"topic_id": tid, "topic_name": topic_names.get(tid, ""), "partitions": sorted(ps)}
                for tid, ps in sorted(member.assigned.items(), key=lambda kv: str(kv[0]))
            ]},
        })
    return {"group_id": group_id, "error_code": ErrorCode.NONE, "group_state": group.state_name,
            "group_epoch": group.epoch, "assignment_epoch": group.assignment_epoch, "assignor_name": ASSIGNOR_NAME,
            "members": members, "authorized_operations": UNKNOWN_AUTHORIZED_OPERATIONS}


def describe_offsets(
    group_id: str,
    group: ShareGroup | None,
    partitions: SharePartitions,
    topics: Sequence[tuple[str, UUID | None, Sequence[int]]],
    log_end_offset: Callable[[UUID, int], int | None],
) -> dict[str, Any]:
    """One ``Groups`` entry of a DescribeShareGroupOffsets answer: per requested topic (name, id or
    None when the metadata has no such topic, partitions) each partition's start offset and lag
    (v1; ``log_end_offset`` None: unknown, lag -1)."""
    if group is None:
        return {"group_id": group_id, "error_code": ErrorCode.GROUP_ID_NOT_FOUND,
                "error_message": f"Group {group_id} not found.", "topics": []}
    answer_topics = []
    for name, topic_id, indexes in topics:
        rows = []
        for index in indexes:
            p = partitions.get(group_id, topic_id, index) if topic_id is not None else None
            start, lag = -1, -1
            if p is not None and p.initialized:
                start = p.start_offset
                end = log_end_offset(p.key.topic_id, index)
                lag = p.lag(end) if end is not None else -1
            rows.append({"partition_index": index, "start_offset": start, "leader_epoch": 0, "lag": lag})
        answer_topics.append({"topic_name": name, "topic_id": topic_id or UUID(int=0), "partitions": rows})
    return {"group_id": group_id, "error_code": ErrorCode.NONE, "topics": answer_topics}
