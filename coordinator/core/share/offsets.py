"""AlterShareGroupOffsets and DeleteShareGroupOffsets (Kafka's ``alterShareGroupOffsets`` and
``initiateDeleteShareGroupOffsets``): where a share group starts reading, set or forgotten.

Both need the group to be empty (NON_EMPTY_GROUP): a member could hold records of the state being
replaced. Alter creates the group when it does not exist (KAFKA-19662: an operator may set start
offsets before the first consumer), and starts each named partition afresh at the given offset (a
new state epoch: everything in flight is forgotten, :func:`.state.reset`). Delete forgets whole
topics; the next heartbeat initializes them again, so ``share.auto.offset.reset`` applies anew.
An id naming a group of another type is GROUP_ID_NOT_FOUND, as an unknown group is for Delete.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from uuid import UUID

from coordinator.core.errors import ErrorCode

from .membership import ShareGroups
from .records import ShareGroupMetadataKey, ShareGroupMetadataValue, ShareGroupRecord, ShareRecord
from .state import SharePartitions, delete, reset

TopicImage = Mapping[str, tuple[UUID, int]]  # topic name -> (topic id, partition count)


@dataclass(slots=True)
class OffsetsResult:
    error: ErrorCode = ErrorCode.NONE
    message: str | None = None
    # topic name -> (topic id or None, partition index or None for a whole topic -> error code)
    errors: dict[str, tuple[UUID | None, dict[int | None, ErrorCode]]] = field(default_factory=dict)
    group_records: list[ShareGroupRecord] = field(default_factory=list)
    records: list[ShareRecord] = field(default_factory=list)


def _refusal(groups: ShareGroups, group_id: str, id_taken: bool, must_exist: bool) -> OffsetsResult | None:
    if not group_id:
        return OffsetsResult(ErrorCode.INVALID_GROUP_ID, "The group id must not be empty.")
    if id_taken:
        return OffsetsResult(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")
    group = groups.get(group_id)
    if group is None and must_exist:
        return OffsetsResult(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
    if group is not None and group.members:
        return OffsetsResult(ErrorCode.NON_EMPTY_GROUP, f"Group {group_id} is not empty.")
    return None


def alter_offsets(
    groups: ShareGroups,
    partitions: SharePartitions,
    group_id: str,
    requested: Sequence[tuple[str, Sequence[tuple[int, int]]]],
    topics: TopicImage,
    id_taken_by_another_type: bool = False,
) -> OffsetsResult:
    """``requested``: per topic name, (partition index, start offset) pairs."""
    refused = _refusal(groups, group_id, id_taken_by_another_type, must_exist=False)
    if refused is not None:
        return refused
    result = OffsetsResult()
    if groups.get(group_id) is None:
        result.group_records = groups.apply(
            [ShareGroupRecord(ShareGroupMetadataKey(group_id), ShareGroupMetadataValue(0, 0))])
    for name, wanted in requested:
        topic_id, count = topics.get(name, (None, 0))
        codes: dict[int | None, ErrorCode] = {}
        for index, start in wanted:
            if topic_id is None or not 0 <= index < count:
                codes[index] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif start < 0:
                codes[index] = ErrorCode.INVALID_REQUEST
            else:
                result.records += reset(partitions, group_id, topic_id, index, start)
                codes[index] = ErrorCode.NONE
        result.errors[name] = (topic_id, codes)
    return result


def delete_offsets(
    groups: ShareGroups,
    partitions: SharePartitions,
    group_id: str,
    topic_names: Sequence[str],
    topics: TopicImage,
    id_taken_by_another_type: bool = False,
) -> OffsetsResult:
    refused = _refusal(groups, group_id, id_taken_by_another_type, must_exist=True)
    if refused is not None:
        return refused
    result = OffsetsResult()
    for name in topic_names:
        topic_id = topics[name][0] if name in topics else None
        held = [p for p in partitions.of_group(group_id) if p.key.topic_id == topic_id] if topic_id else []
        if not held:
            result.errors[name] = (topic_id, {None: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION})
            continue
        for p in held:
            result.records += delete(partitions, group_id, p.key.topic_id, p.key.partition)
        result.errors[name] = (topic_id, {None: ErrorCode.NONE})
    return result
