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

from dataclasses import dataclass
from uuid import UUID

from coordinator.core.errors import ErrorCode

NO_ERROR = ErrorCode.NONE


@dataclass(frozen=True, slots=True)
class JoinGroupResponseMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinGroupResponse:
    error_code: ErrorCode
    member_id: str = ""
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    skip_assignment: bool = False
    members: tuple[JoinGroupResponseMember, ...] = ()


@dataclass(frozen=True, slots=True)
class SyncGroupResponse:
    error_code: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(frozen=True, slots=True)
class HeartbeatResponse:
    error_code: ErrorCode


@dataclass(frozen=True, slots=True)
class LeaveGroupMemberResponse:
    member_id: str
    group_instance_id: str | None
    error_code: ErrorCode


@dataclass(frozen=True, slots=True)
class LeaveGroupResponse:
    error_code: ErrorCode
    members: tuple[LeaveGroupMemberResponse, ...] = ()


@dataclass(frozen=True, slots=True)
class PartitionError:
    partition_index: int
    error_code: ErrorCode


@dataclass(frozen=True, slots=True)
class TopicPartitionErrors:
    name: str
    partitions: tuple[PartitionError, ...]


@dataclass(frozen=True, slots=True)
class OffsetCommitResponse:
    topics: tuple[TopicPartitionErrors, ...]


@dataclass(frozen=True, slots=True)
class OffsetFetchResponsePartition:
    partition_index: int
    committed_offset: int = -1
    committed_leader_epoch: int = -1
    metadata: str = ""
    error_code: ErrorCode = NO_ERROR


@dataclass(frozen=True, slots=True)
class OffsetFetchResponseTopic:
    name: str
    partitions: tuple[OffsetFetchResponsePartition, ...]


@dataclass(frozen=True, slots=True)
class OffsetFetchResponseGroup:
    group_id: str
    error_code: ErrorCode
    topics: tuple[OffsetFetchResponseTopic, ...] = ()


@dataclass(frozen=True, slots=True)
class OffsetFetchResponse:
    groups: tuple[OffsetFetchResponseGroup, ...]


@dataclass(frozen=True, slots=True)
class OffsetDeleteResponse:
    error_code: ErrorCode
    topics: tuple[TopicPartitionErrors, ...] = ()


@dataclass(frozen=True, slots=True)
class ListedGroup:
    group_id: str
    protocol_type: str  # "" for simple (offset-only) groups
    group_state: str
    group_type: str  # "classic" | "consumer"


@dataclass(frozen=True, slots=True)
class ListGroupsResponse:
    error_code: ErrorCode
    groups: tuple[ListedGroup, ...] = ()


@dataclass(frozen=True, slots=True)
class DescribedGroupMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    member_metadata: bytes
    member_assignment: bytes


@dataclass(frozen=True, slots=True)
class DescribedGroup:
    group_id: str
    error_code: ErrorCode
    group_state: str
    protocol_type: str = ""
    protocol_data: str = ""  # the selected protocol when Stable, else ""
    members: tuple[DescribedGroupMember, ...] = ()
    exists: bool = True

    @property
    def not_found_message(self) -> str:
        """Kafka 4.0's DescribeGroups v6 error message for an unknown group."""
        return f"Group {self.group_id} not found."


@dataclass(frozen=True, slots=True)
class DescribeGroupsResponse:
    groups: tuple[DescribedGroup, ...]


@dataclass(frozen=True, slots=True)
class DeletableGroupResult:
    group_id: str
    error_code: ErrorCode


@dataclass(frozen=True, slots=True)
class DeleteGroupsResponse:
    results: tuple[DeletableGroupResult, ...]


# ---- KIP-848 consumer groups ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConsumerGroupHeartbeatResponse:
    error_code: ErrorCode
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0  # 0 on errors (clients ignore values <= 0)
    # None = unchanged; else the COMPLETE set of (topic id, sorted partitions) the member may own now.
    assignment: tuple[tuple[UUID, tuple[int, ...]], ...] | None = None


@dataclass(frozen=True, slots=True)
class DescribedTopicPartitions:
    topic_id: UUID
    topic_name: str
    partitions: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class DescribedConsumerGroupMember:
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


@dataclass(frozen=True, slots=True)
class DescribedConsumerGroup:
    group_id: str
    error_code: ErrorCode
    error_message: str | None = None
    group_state: str = ""
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor_name: str = ""
    members: tuple[DescribedConsumerGroupMember, ...] = ()


@dataclass(frozen=True, slots=True)
class ConsumerGroupDescribeResponse:
    groups: tuple[DescribedConsumerGroup, ...]
