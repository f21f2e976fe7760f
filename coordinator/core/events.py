"""Domain events: pure-data facts the core reports alongside a Result.

The runtime turns them into Prometheus metrics and the rebalance history stream. They are never
persisted by the core and never read back; adding a field is always safe.

Every event about a group carries its ``group_type`` (the defaults name the type that has produced
it so far), so the observers label it without knowing which type emits which event: a new group
type reuses these events with its own name (its history rows and metric labels follow).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class GroupStateChanged:
    group_id: str
    group_type: str  # "classic" | "consumer"
    old: str  # Kafka state string, "" when the group was just created
    new: str


@dataclass(frozen=True, slots=True)
class RebalanceStarted:
    group_id: str
    group_type: str
    generation_id: int  # the generation being left behind
    reason: str


@dataclass(frozen=True, slots=True)
class RebalanceCompleted:
    group_id: str
    generation_id: int  # the new generation
    duration_ms: int  # from entering PreparingRebalance to Stable (or Empty)
    member_count: int
    group_type: str = "classic"


@dataclass(frozen=True, slots=True)
class MemberJoined:
    group_id: str
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    group_type: str = "classic"


@dataclass(frozen=True, slots=True)
class MemberLeft:
    group_id: str
    member_id: str
    # "leave-group", "did-not-rejoin", "did-not-sync", "session-timeout", "group-max-size",
    # "rebalance-timeout" (consumer groups: did not revoke within the rebalance timeout)
    reason: str
    group_type: str = "classic"


@dataclass(frozen=True, slots=True)
class SessionExpired:
    group_id: str
    member_id: str
    group_type: str = "classic"


@dataclass(frozen=True, slots=True)
class StaticMemberReplaced:
    group_id: str
    group_instance_id: str
    old_member_id: str
    new_member_id: str


@dataclass(frozen=True, slots=True)
class OffsetsCommitted:
    group_id: str
    count: int


@dataclass(frozen=True, slots=True)
class OffsetsDeleted:
    group_id: str
    count: int
    reason: str  # "offset-delete" | "expired" | "group-deleted"


@dataclass(frozen=True, slots=True)
class GroupDeleted:
    group_id: str
    group_type: str
    reason: str  # "delete-groups" | "expired"


# ---- KIP-848 consumer groups ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TargetAssignmentComputed:
    """The assignor ran for a consumer group (inside a heartbeat)."""

    group_id: str
    group_epoch: int  # the new assignment epoch
    assignor: str
    member_count: int
    partition_count: int  # partitions of the subscribed topics
    duration_ns: int  # 0 when the shard has no stopwatch (tests)
    group_type: str = "consumer"


@dataclass(frozen=True, slots=True)
class MemberAssignmentChanged:
    """A consumer-group member's assigned partitions (what its responses carry) changed."""

    group_id: str
    member_id: str
    member_epoch: int
    assigned: int  # partitions it may now use that it could not before
    revoked: int  # partitions it may no longer use (pending revocation or dropped)
    group_type: str = "consumer"


@dataclass(frozen=True, slots=True)
class MemberFenced:
    """A consumer-group member was removed by the coordinator, not by its own leave."""

    group_id: str
    member_id: str
    reason: str  # "session-timeout" | "rebalance-timeout"
    partitions: int  # partitions it held
    group_type: str = "consumer"


@dataclass(frozen=True, slots=True)
class WarmupTasksChanged:
    """A streams-group member's warm-up tasks changed in a heartbeat: ``started`` warm-ups it was
    given, ``promoted`` warm-ups that became its active tasks (it caught up), ``dropped`` warm-ups
    it lost otherwise (the target moved on)."""

    group_id: str
    member_id: str
    member_epoch: int
    started: int
    promoted: int
    dropped: int
    group_type: str = "streams"


@dataclass(frozen=True, slots=True)
class ShareRecordsChanged:
    """Records of a share group's partitions entered a state in one step (each counted once, when
    the step's records were applied; a replay reports nothing): ``acquired`` (delivered),
    ``acknowledged``, ``released`` (back to available by a consumer's release or its session or
    connection ending), ``archived`` (rejected, past the delivery limit, or an aborted
    transaction's), and ``lock_expired`` (acquired records whose lock ran out: available again,
    or archived at the delivery limit and then counted in ``archived`` too)."""

    group_id: str
    acquired: int
    acknowledged: int
    released: int
    archived: int
    lock_expired: int
    group_type: str = "share"
