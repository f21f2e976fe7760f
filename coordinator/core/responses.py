"""Version-free responses: the most detailed form of each Kafka response.

The adapter picks per-version fields and applies version rules, e.g.:

* JoinGroup: below v7 a ``None`` protocol name is written as ""; from v7 "" as null.
* LeaveGroup v0-2: top-level error = ``error_code`` if not NONE, else the first member's error.
* OffsetCommit: errors are per partition only; the core already copies a group-level error into
  every partition. ``GROUP_ID_NOT_FOUND`` must be written as ``ILLEGAL_GENERATION`` below v9.
* OffsetFetch v0-1: a group error goes into every partition; v2-7: top-level; v8+: per group.
* DescribeGroups: an unknown group is ``group_state="Dead"`` with ``error_code=NONE`` and
  ``exists=False``; v6+ (KIP-1043) answers ``GROUP_ID_NOT_FOUND`` with ``not_found_message``.
"""

from __future__ import annotations

from uuid import UUID

import msgspec

from coordinator.core.errors import ErrorCode

NO_ERROR = ErrorCode.NONE


class JoinGroupResponseMember(msgspec.Struct, frozen=True, gc=False):
    member_id: str
    group_instance_id: str | None
    metadata: bytes


class JoinGroupResponse(msgspec.Struct, frozen=True, gc=False):
    error_code: ErrorCode
    member_id: str = ""
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    skip_assignment: bool = False
    members: tuple[JoinGroupResponseMember, ...] = ()


class SyncGroupResponse(msgspec.Struct, frozen=True, gc=False):
    error_code: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


class HeartbeatResponse(msgspec.Struct, frozen=True, gc=False):
    error_code: ErrorCode


class LeaveGroupMemberResponse(msgspec.Struct, frozen=True, gc=False):
    member_id: str
    group_instance_id: str | None
    error_code: ErrorCode


class LeaveGroupResponse(msgspec.Struct, frozen=True, gc=False):
    error_code: ErrorCode
    members: tuple[LeaveGroupMemberResponse, ...] = ()


class PartitionError(msgspec.Struct, frozen=True, gc=False):
    partition_index: int
    error_code: ErrorCode


class TopicPartitionErrors(msgspec.Struct, frozen=True, gc=False):
    name: str
    partitions: tuple[PartitionError, ...]
    topic_id: UUID | None = None  # OffsetCommit v10 answers by topic id


class OffsetCommitResponse(msgspec.Struct, frozen=True, gc=False):
    topics: tuple[TopicPartitionErrors, ...]


class OffsetFetchResponsePartition(msgspec.Struct, frozen=True, gc=False):
    partition_index: int
    committed_offset: int = -1
    committed_leader_epoch: int = -1
    metadata: str = ""
    error_code: ErrorCode = NO_ERROR


class OffsetFetchResponseTopic(msgspec.Struct, frozen=True, gc=False):
    name: str
    partitions: tuple[OffsetFetchResponsePartition, ...]
    topic_id: UUID | None = None  # OffsetFetch v10 answers by topic id


class OffsetFetchResponseGroup(msgspec.Struct, frozen=True, gc=False):
    group_id: str
    error_code: ErrorCode
    topics: tuple[OffsetFetchResponseTopic, ...] = ()


class OffsetFetchResponse(msgspec.Struct, frozen=True, gc=False):
    groups: tuple[OffsetFetchResponseGroup, ...]


class OffsetDeleteResponse(msgspec.Struct, frozen=True, gc=False):
    error_code: ErrorCode
    topics: tuple[TopicPartitionErrors, ...] = ()


class ListedGroup(msgspec.Struct, frozen=True, gc=False):
    group_id: str
    protocol_type: str  # "" for simple (offset-only) groups
    group_state: str
    group_type: str  # "classic" | "consumer"


class ListGroupsResponse(msgspec.Struct, frozen=True, gc=False):
    error_code: ErrorCode
    groups: tuple[ListedGroup, ...] = ()


class DescribedGroupMember(msgspec.Struct, frozen=True, gc=False):
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    member_metadata: bytes
    member_assignment: bytes
    generation_id: int = -1
    """The generation the member holds (Kafka's DescribeGroups does not carry it; this project's
    DescribeGroupGenerations does): -1 when it holds none."""


class DescribedGroup(msgspec.Struct, frozen=True, gc=False):
    group_id: str
    error_code: ErrorCode
    group_state: str
    protocol_type: str = ""
    protocol_data: str = ""  # the selected protocol when Stable, else ""
    members: tuple[DescribedGroupMember, ...] = ()
    exists: bool = True
    generation_id: int = -1
    """Classic groups: the group's generation; -1 for other types (not on Kafka's wire)."""

    @property
    def not_found_message(self) -> str:
        """Kafka 4.0's DescribeGroups v6 error message for an unknown group."""
        return f"Group {self.group_id} not found."


class DescribeGroupsResponse(msgspec.Struct, frozen=True, gc=False):
    groups: tuple[DescribedGroup, ...]


class DeletableGroupResult(msgspec.Struct, frozen=True, gc=False):
    group_id: str
    error_code: ErrorCode


class DeleteGroupsResponse(msgspec.Struct, frozen=True, gc=False):
    results: tuple[DeletableGroupResult, ...]


# ---- KIP-848 consumer groups ---------------------------------------------------------------------


class ConsumerGroupHeartbeatResponse(msgspec.Struct, frozen=True, gc=False):
    error_code: ErrorCode
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0  # 0 on errors (clients ignore values <= 0)
    # None = unchanged; else the COMPLETE set of (topic id, sorted partitions) the member may own now.
    assignment: tuple[tuple[UUID, tuple[int, ...]], ...] | None = None


class DescribedTopicPartitions(msgspec.Struct, frozen=True, gc=False):
    topic_id: UUID
    topic_name: str
    partitions: tuple[int, ...]


class DescribedConsumerGroupMember(msgspec.Struct, frozen=True, gc=False):
    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None  # Kafka returns the stored value: "" when none
    assignment: tuple[DescribedTopicPartitions, ...]
    target_assignment: tuple[DescribedTopicPartitions, ...]
    member_type: int = 1  # v1+ (KIP-1099): 0 classic-protocol member, 1 consumer-protocol member


class DescribedConsumerGroup(msgspec.Struct, frozen=True, gc=False):
    group_id: str
    error_code: ErrorCode
    error_message: str | None = None
    group_state: str = ""
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor_name: str = ""
    members: tuple[DescribedConsumerGroupMember, ...] = ()


class ConsumerGroupDescribeResponse(msgspec.Struct, frozen=True, gc=False):
    groups: tuple[DescribedConsumerGroup, ...]


# Sidecar mode's transactional offset commits (`core/txn_offsets.py`).
class TxnOffsetCommitChecked(msgspec.Struct, frozen=True, gc=False):
    error_code: int
    upstream: bool = False
    """The group's offsets live upstream (marked before, or by this check)."""


class OffsetsUpstreamGroups(msgspec.Struct, frozen=True, gc=False):
    groups: frozenset[str]
    error_code: int = 0
