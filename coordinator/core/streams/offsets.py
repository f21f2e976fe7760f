"""Offsets committed and fetched by streams members (Kafka's ``StreamsGroup.validateOffsetCommit``,
``validateOffsetFetch``): which commits a streams group accepts.

- A commit with a negative epoch while the group has no members (admin tools), or a transactional
  one without member id, epoch or instance id (Streams' exactly-once commits through its producer),
  is accepted.
- Otherwise the member must exist (UNKNOWN_MEMBER_ID); a non-transactional OffsetCommit below v9
  is UNSUPPORTED_VERSION; the member's epoch passes; a newer epoch is STALE_MEMBER_EPOCH.
- An older epoch is checked per partition: the topic must be a source or repartition-source topic
  of the topology, the task (subtopology, partition) must be one of the member's active tasks,
  assigned or pending revocation, and the epoch must be at least the one the task was granted at.
  So a member can still commit the tasks it is revoking with its old epoch, and a zombie that lost
  a task cannot.
"""

from __future__ import annotations

from collections.abc import Callable

from ..errors import CoordinatorError, ErrorCode
from .member import StreamsGroupMember
from .records import StreamsGroupTopologyValue

PartitionValidator = Callable[[str, int], None]
"""(topic, partition) -> None, or raises STALE_MEMBER_EPOCH."""


def _stale(message: str) -> CoordinatorError:
    return CoordinatorError(ErrorCode.STALE_MEMBER_EPOCH, message)


def source_topic_map(topology: StreamsGroupTopologyValue) -> dict[str, str]:
    """Source and repartition-source topic -> the subtopology reading it."""
    topics: dict[str, str] = {}
    for s in topology.subtopologies:
        for topic in s.source_topics:
            topics[topic] = s.subtopology_id
        for info in s.repartition_source_topics:
            topics[info.name] = s.subtopology_id
    return topics


def validate_offset_commit(group_id: str, members: dict[str, StreamsGroupMember],
                           topology: StreamsGroupTopologyValue | None, member_id: str, instance_id: str | None,
                           member_epoch: int, transactional: bool, api_version: int) -> PartitionValidator | None:
    """None: the whole commit is accepted; a validator: each partition is checked. Raises
    CoordinatorError to refuse the commit."""
    if member_epoch < 0 and not members:
        return None
    if transactional and member_epoch == -1 and member_id == "" and instance_id is None:
        return None
    member = members.get(member_id)
    if member is None:
        raise CoordinatorError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group_id}.")
    if not transactional and api_version < 9:
        raise CoordinatorError(ErrorCode.UNSUPPORTED_VERSION, "OffsetCommit version 9 or above must be used by "
                               "members using the streams group protocol")
    if member_epoch == member.member_epoch:
        return None
    if member_epoch > member.member_epoch:
        raise _stale(f"Received member epoch {member_epoch} is newer than current member epoch "
                     f"{member.member_epoch}.")
    if topology is None:
        raise _stale("Topology is not available for offset commit validation.")
    sources = source_topic_map(topology)
    assigned, pending = member.assigned.active, member.pending_revocation.active

    def validate(topic: str, partition: int) -> None:
        subtopology = sources.get(topic)
        if subtopology is None:
            raise _stale(f"Topic {topic} is not in the topology.")
        task = (subtopology, partition)
        epoch = assigned.get(task, pending.get(task))
        if epoch is None:
            raise _stale(f"Task {subtopology}-{partition} is not assigned or pending revocation for member.")
        if member_epoch < epoch:
            raise _stale(f"Received member epoch {member_epoch} is older than assignment epoch {epoch} for task "
                         f"{subtopology}-{partition}.")

    return validate


def validate_offset_fetch(group_id: str, members: dict[str, StreamsGroupMember], member_id: str | None,
                          member_epoch: int) -> None:
    """Admin fetches (no member id, negative epoch) pass; a member must fetch at its epoch."""
    if member_id is None and member_epoch < 0:
        return
    member = members.get(member_id or "")
    if member is None:
        raise CoordinatorError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group_id}.")
    if member_epoch != member.member_epoch:
        raise _stale(f"The received member epoch {member_epoch} does not match the expected member epoch "
                     f"{member.member_epoch}.")


def validate_delete_group(state_name: str) -> None:
    """DeleteGroups: only an Empty streams group is deleted."""
    if state_name != "Empty":
        raise CoordinatorError(ErrorCode.NON_EMPTY_GROUP)
