"""Share group membership: ShareGroupHeartbeat as Kafka 4.3's ``GroupMetadataManager.shareGroupHeartbeat``.

Theory of operation
-------------------
A share group is members with subscriptions, a group epoch, and a target assignment computed by
the simple assignor (:mod:`.assignor`) at an assignment epoch. Unlike a consumer group there is no
revocation: share partitions may be consumed by several members at once, so a member whose epoch
is behind the target jumps straight to the target epoch with its full target assignment (filtered
by its subscription), and the group is ``Empty`` or ``Stable`` and nothing in between.

A heartbeat (:func:`heartbeat`), after Kafka's request checks:

1. epoch -1 leaves: the member's records are tombstoned and the group epoch moves on;
2. epoch 0 joins (or rejoins with the same member id), creating the group; any other epoch must
   be the member's current one or the previous one (its answer may have been lost), else
   FENCED_MEMBER_EPOCH; an unknown member with an epoch other than 0 is UNKNOWN_MEMBER_ID; a new
   member beyond ``group.share.max.size`` is GROUP_MAX_SIZE_REACHED;
3. the member's rack, client and subscription are recorded when they changed; the group epoch is
   bumped when a subscription changed, when the subscribed topics' metadata changed (the hash),
   or when a subscribed partition became assignable (initialized) that the target lacks;
4. a target behind the group epoch is recomputed over the *initialized* partitions only;
5. the member is reconciled and answered: the assignment is sent when the member joined, sent its
   subscription (a full request) or its assignment changed.

Share partitions a subscription names that are not initialized yet are returned to the caller
(``HeartbeatResult.to_initialize``), which initializes them (:func:`.state.initialize` with
``share.auto.offset.reset``); the next heartbeat then assigns them, as in Kafka, whose first
answer to a new group is an empty assignment.

The ONLY code that changes group state is :meth:`ShareGroups.replay`: :func:`heartbeat` and
:func:`fence_member` compute records and replay them. Membership and share-partition state do not
talk (as in Kafka): fencing a member does not release its records, its session or lock does.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from uuid import UUID

from coordinator.core.errors import ErrorCode

from .assignor import AssignorError, assign
from .records import (
    ShareGroupCurrentMemberAssignmentKey,
    ShareGroupCurrentMemberAssignmentValue,
    ShareGroupMemberMetadataKey,
    ShareGroupMemberMetadataValue,
    ShareGroupMetadataKey,
    ShareGroupMetadataValue,
    ShareGroupRecord,
    ShareGroupTargetAssignmentMemberKey,
    ShareGroupTargetAssignmentMemberValue,
    ShareGroupTargetAssignmentMetadataKey,
    ShareGroupTargetAssignmentMetadataValue,
    TopicPartitions,
)

MAX_MEMBER_ID_LENGTH = 36
DEFAULT_MAX_SIZE = 200  # group.share.max.size
DEFAULT_HEARTBEAT_INTERVAL_MS = 5_000  # group.share.heartbeat.interval.ms
DEFAULT_SESSION_TIMEOUT_MS = 45_000  # group.share.session.timeout.ms

Assignment = dict[UUID, frozenset[int]]
TopicImage = Mapping[str, tuple[UUID, int]]  # topic name -> (topic id, partition count)


@dataclass(slots=True)
class ShareMember:
    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = 0
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    assigned: Assignment = field(default_factory=dict)


@dataclass(slots=True)
class ShareGroup:
    group_id: str
    epoch: int = 0
    metadata_hash: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    targets: dict[str, Assignment] = field(default_factory=dict)

    @property
    def state_name(self) -> str:
        return "Empty" if not self.members else "Stable"


class ShareGroups:
    """The shard's share groups; mutated only by :meth:`replay`."""

    def __init__(self) -> None:
        self.groups: dict[str, ShareGroup] = {}

    def get(self, group_id: str) -> ShareGroup | None:
        return self.groups.get(group_id)

    def apply(self, records: list[ShareGroupRecord]) -> list[ShareGroupRecord]:
        for record in records:
            self.replay(record)
        return records

    def replay(self, record: ShareGroupRecord) -> None:
        key, value = record.key, record.value
        group = self.groups.get(key.group_id)
        if group is None:
            if value is None:
                return
            group = self.groups[key.group_id] = ShareGroup(key.group_id)
        if isinstance(key, ShareGroupMetadataKey):
            if value is None:
                del self.groups[key.group_id]
            else:
                assert isinstance(value, ShareGroupMetadataValue)
                group.epoch, group.metadata_hash = value.epoch, value.metadata_hash
        elif isinstance(key, ShareGroupTargetAssignmentMetadataKey):
            group.assignment_epoch = value.assignment_epoch if isinstance(value, ShareGroupTargetAssignmentMetadataValue) else 0
        elif isinstance(key, ShareGroupTargetAssignmentMemberKey):
            if isinstance(value, ShareGroupTargetAssignmentMemberValue):
                group.targets[key.member_id] = _from_record(value.topic_partitions)
            else:
                group.targets.pop(key.member_id, None)
        elif isinstance(key, ShareGroupMemberMetadataKey):
            if isinstance(value, ShareGroupMemberMetadataValue):
                member = group.members.setdefault(key.member_id, ShareMember(key.member_id))
                member.rack_id, member.client_id, member.client_host = value.rack_id, value.client_id, value.client_host
                member.subscribed_topic_names = tuple(value.subscribed_topic_names)
            else:
                group.members.pop(key.member_id, None)
        elif isinstance(key, ShareGroupCurrentMemberAssignmentKey) and isinstance(
            value, ShareGroupCurrentMemberAssignmentValue
        ):
            member = group.members.setdefault(key.member_id, ShareMember(key.member_id))
            member.member_epoch, member.previous_member_epoch = value.member_epoch, value.previous_member_epoch
            member.assigned = _from_record(value.assigned_partitions)

    def view(self) -> dict[str, ShareGroup]:
        return {gid: _copy(g) for gid, g in self.groups.items()}


@dataclass(frozen=True, slots=True)
class HeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    rack_id: str | None = None
    subscribed_topic_names: Sequence[str] | None = None
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True, slots=True)
class HeartbeatConfig:
    max_size: int = DEFAULT_MAX_SIZE
    heartbeat_interval_ms: int = DEFAULT_HEARTBEAT_INTERVAL_MS
    session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    error: ErrorCode = ErrorCode.NONE
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None  # None: unchanged, not sent
    records: list[ShareGroupRecord] = field(default_factory=list)
    to_initialize: frozenset[tuple[UUID, int]] = frozenset()
    session_deadline: int | None = None  # when the member's session timer fires


def validate(request: HeartbeatRequest) -> str | None:
    """Kafka's ``throwIfShareGroupHeartbeatRequestIsInvalid``: why the request is INVALID_REQUEST, or None."""
    if not request.member_id or len(request.member_id) > MAX_MEMBER_ID_LENGTH:
        return f"MemberId must be non-empty and at most {MAX_MEMBER_ID_LENGTH} characters"
    if not request.group_id:
        return "GroupId can't be empty"
    if request.rack_id == "":
        return "RackId can't be empty"
    if request.member_epoch == 0 and not request.subscribed_topic_names:
        return "SubscribedTopicNames must be set in first request"
    if request.member_epoch < -1:
        return f"MemberEpoch is {request.member_epoch}, but must be greater than or equal to -1"
    return None


def heartbeat(
    groups: ShareGroups,
    request: HeartbeatRequest,
    topics: TopicImage,
    initialized: Callable[[UUID], Sequence[int]],
    now_ms: int,
    config: HeartbeatConfig | None = None,
    id_taken_by_another_type: bool = False,
) -> HeartbeatResult:
    """Serve one ShareGroupHeartbeat; the records it returns are replayed into ``groups`` already.

    ``topics``: the topic metadata; ``initialized(topic_id)``: that topic's initialized share
    partitions (assignable); ``id_taken_by_another_type``: the group id names a classic, consumer
    or streams group (GROUP_ID_NOT_FOUND: a share group never converts)."""
    config = config or HeartbeatConfig()
    invalid = validate(request)
    if invalid is not None:
        return HeartbeatResult(ErrorCode.INVALID_REQUEST, invalid)
    if id_taken_by_another_type:
        return HeartbeatResult(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {request.group_id} is not a share group.")
    group = groups.get(request.group_id)
    if request.member_epoch == -1:
        if group is None:
            return HeartbeatResult(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {request.group_id} not found.")
        if request.member_id not in group.members:
            return HeartbeatResult(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {request.member_id} is not in the group.")
        left = groups.apply(_fence_records(group, request.member_id, topics))
        return HeartbeatResult(member_id=request.member_id, member_epoch=-1, records=left)
    if group is None and request.member_epoch != 0:
        return HeartbeatResult(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {request.group_id} not found.")
    group = group or ShareGroup(request.group_id)
    current = group.members.get(request.member_id)
    if current is None and len(group.members) >= config.max_size:
        return HeartbeatResult(ErrorCode.GROUP_MAX_SIZE_REACHED,
                               f"The share group has reached its maximum capacity of {config.max_size} members.")
    fenced = _epoch_error(current, request)
    if fenced is not None:
        return fenced

    member = _copy_member(current) if current is not None else ShareMember(request.member_id)
    records: list[ShareGroupRecord] = []
    subscription_changed = False
    updated = ShareMember(
        member.member_id, member.member_epoch, member.previous_member_epoch,
        request.rack_id if request.rack_id is not None else member.rack_id,
        request.client_id, request.client_host,
        tuple(request.subscribed_topic_names) if request.subscribed_topic_names is not None
        else member.subscribed_topic_names,
        member.assigned,
    )
    if current is None or _metadata(updated) != _metadata(member):
        records.append(_member_metadata_record(group.group_id, updated))
        subscription_changed = current is None or updated.subscribed_topic_names != member.subscribed_topic_names

    members_after = {**group.members, updated.member_id: updated}
    subscribed = _subscribed_topic_ids(members_after, topics)
    assignable = {tid: list(initialized(tid)) for tid in subscribed.values()}
    epoch = group.epoch
    bump = subscription_changed
    if not bump and group.assignment_epoch >= group.epoch:
        target_union = {(t, p) for a in group.targets.values() for t, ps in a.items() for p in ps}
        bump = any((t, p) not in target_union for t, ps in assignable.items() for p in ps)
    metadata_hash = _metadata_hash(subscribed, topics)
    if bump or metadata_hash != group.metadata_hash:
        epoch += 1
        records.append(ShareGroupRecord(ShareGroupMetadataKey(group.group_id),
                                        ShareGroupMetadataValue(epoch, metadata_hash)))

    targets = group.targets
    assignment_epoch = group.assignment_epoch
    if assignment_epoch < epoch:
        subscriptions = {m.member_id: frozenset(subscribed[n] for n in m.subscribed_topic_names if n in subscribed)
                         for m in members_after.values()}
        previous = {m: {t: set(ps) for t, ps in a.items()} for m, a in group.targets.items()}
        try:
            computed = assign(subscriptions, previous, assignable)
        except AssignorError as exc:
            return HeartbeatResult(ErrorCode.UNKNOWN_SERVER_ERROR, str(exc))
        targets = {m: {t: frozenset(ps) for t, ps in a.items() if ps} for m, a in computed.items()}
        for member_id, target in targets.items():
            if group.targets.get(member_id) != target:
                records.append(ShareGroupRecord(ShareGroupTargetAssignmentMemberKey(group.group_id, member_id),
                                                ShareGroupTargetAssignmentMemberValue(_to_record(target))))
        assignment_epoch = epoch
        records.append(ShareGroupRecord(ShareGroupTargetAssignmentMetadataKey(group.group_id),
                                        ShareGroupTargetAssignmentMetadataValue(assignment_epoch)))

    reconciled = _reconcile(updated, assignment_epoch, targets.get(updated.member_id, {}), subscribed,
                            subscription_changed)
    if (current is None or reconciled.member_epoch != member.member_epoch
            or reconciled.previous_member_epoch != member.previous_member_epoch
            or reconciled.assigned != member.assigned):
        records.append(_current_assignment_record(group.group_id, reconciled))
    groups.apply(records)

    send = (request.member_epoch == 0 or request.subscribed_topic_names is not None
            or reconciled.assigned != member.assigned)
    pending = frozenset((tid, p) for tid in subscribed.values() for p in range(topics_count(topics, tid))
                        if p not in set(assignable.get(tid, ())))
    return HeartbeatResult(
        member_id=reconciled.member_id, member_epoch=reconciled.member_epoch,
        heartbeat_interval_ms=config.heartbeat_interval_ms, assignment=reconciled.assigned if send else None,
        records=records, to_initialize=pending, session_deadline=now_ms + config.session_timeout_ms,
    )


def fence_member(groups: ShareGroups, group_id: str, member_id: str, topics: TopicImage) -> list[ShareGroupRecord]:
    """A member's session timed out (Kafka's ``shareGroupFenceMemberOperation``): as a leave."""
    group = groups.get(group_id)
    if group is None or member_id not in group.members:
        return []
    return groups.apply(_fence_records(group, member_id, topics))


def delete_group(groups: ShareGroups, group_id: str) -> list[ShareGroupRecord]:
    """Tombstones for the whole group (Kafka's ``createGroupTombstoneRecords`` order)."""
    group = groups.get(group_id)
    if group is None:
        return []
    records = [ShareGroupRecord(ShareGroupCurrentMemberAssignmentKey(group_id, m), None) for m in group.members]
    records += [ShareGroupRecord(ShareGroupTargetAssignmentMemberKey(group_id, m), None) for m in group.targets]
    records.append(ShareGroupRecord(ShareGroupTargetAssignmentMetadataKey(group_id), None))
    records += [ShareGroupRecord(ShareGroupMemberMetadataKey(group_id, m), None) for m in group.members]
    records.append(ShareGroupRecord(ShareGroupMetadataKey(group_id), None))
    return groups.apply(records)


def topics_count(topics: TopicImage, topic_id: UUID) -> int:
    return next((count for tid, count in topics.values() if tid == topic_id), 0)


# ---- helpers ----

def _epoch_error(current: ShareMember | None, request: HeartbeatRequest) -> HeartbeatResult | None:
    epoch = request.member_epoch
    if epoch == 0:
        return None
    if current is None:
        return HeartbeatResult(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {request.member_id} is not in the group.")
    if epoch > current.member_epoch or (epoch < current.member_epoch and epoch != current.previous_member_epoch):
        return HeartbeatResult(ErrorCode.FENCED_MEMBER_EPOCH,
                               f"The share group member has a smaller member epoch ({epoch}) than the one known by "
                               f"the group coordinator ({current.member_epoch})." if epoch < current.member_epoch
                               else f"The share group member has a greater member epoch ({epoch}) than the one known "
                                    f"by the group coordinator ({current.member_epoch}).")
    return None


def _reconcile(member: ShareMember, target_epoch: int, target: Assignment, subscribed: Mapping[str, UUID],
               subscription_changed: bool) -> ShareMember:
    """Kafka's ``ShareGroupAssignmentBuilder``: jump to the target epoch with the whole target, or
    refilter by a changed subscription; nothing to revoke first."""
    topic_ids = {subscribed[n] for n in member.subscribed_topic_names if n in subscribed}
    if member.member_epoch != target_epoch:
        assigned = {t: ps for t, ps in target.items() if t in topic_ids}
        return ShareMember(member.member_id, target_epoch, member.member_epoch, member.rack_id, member.client_id,
                           member.client_host, member.subscribed_topic_names, assigned)
    if subscription_changed:
        assigned = {t: ps for t, ps in member.assigned.items() if t in topic_ids}
        return ShareMember(member.member_id, member.member_epoch, member.previous_member_epoch, member.rack_id,
                           member.client_id, member.client_host, member.subscribed_topic_names, assigned)
    return member


def _fence_records(group: ShareGroup, member_id: str, topics: TopicImage) -> list[ShareGroupRecord]:
    gid = group.group_id
    records = [
        ShareGroupRecord(ShareGroupCurrentMemberAssignmentKey(gid, member_id), None),
        ShareGroupRecord(ShareGroupTargetAssignmentMemberKey(gid, member_id), None),
        ShareGroupRecord(ShareGroupMemberMetadataKey(gid, member_id), None),
    ]
    rest = {m: v for m, v in group.members.items() if m != member_id}
    metadata_hash = _metadata_hash(_subscribed_topic_ids(rest, topics), topics)
    records.append(ShareGroupRecord(ShareGroupMetadataKey(gid), ShareGroupMetadataValue(group.epoch + 1, metadata_hash)))
    return records


def _subscribed_topic_ids(members: Mapping[str, ShareMember], topics: TopicImage) -> dict[str, UUID]:
    names = {n for m in members.values() for n in m.subscribed_topic_names}
    return {n: topics[n][0] for n in sorted(names) if n in topics}


def _metadata_hash(subscribed: Mapping[str, UUID], topics: TopicImage) -> int:
    """A deterministic hash of the subscribed topics' names, ids and partition counts (Kafka's
    metadata hash plays this part; any stable function does, since only changes matter)."""
    text = ";".join(f"{n}:{topics[n][0]}:{topics[n][1]}" for n in sorted(subscribed))
    return zlib.crc32(text.encode()) if text else 0


def _metadata(m: ShareMember) -> tuple[object, ...]:
    return m.rack_id, m.client_id, m.client_host, m.subscribed_topic_names


def _member_metadata_record(group_id: str, m: ShareMember) -> ShareGroupRecord:
    return ShareGroupRecord(ShareGroupMemberMetadataKey(group_id, m.member_id),
                            ShareGroupMemberMetadataValue(m.rack_id, m.client_id, m.client_host,
                                                          list(m.subscribed_topic_names)))


def _current_assignment_record(group_id: str, m: ShareMember) -> ShareGroupRecord:
    return ShareGroupRecord(ShareGroupCurrentMemberAssignmentKey(group_id, m.member_id),
                            ShareGroupCurrentMemberAssignmentValue(m.member_epoch, m.previous_member_epoch,
                                                                   _to_record(m.assigned)))


def _to_record(assignment: Mapping[UUID, frozenset[int]]) -> list[TopicPartitions]:
    return [TopicPartitions(t, sorted(ps)) for t, ps in sorted(assignment.items(), key=lambda kv: str(kv[0])) if ps]


def _from_record(topic_partitions: list[TopicPartitions]) -> Assignment:
    return {tp.topic_id: frozenset(tp.partitions) for tp in topic_partitions}


def _copy_member(m: ShareMember) -> ShareMember:
    return ShareMember(m.member_id, m.member_epoch, m.previous_member_epoch, m.rack_id, m.client_id, m.client_host,
                       m.subscribed_topic_names, dict(m.assigned))


def _copy(g: ShareGroup) -> ShareGroup:
    return ShareGroup(g.group_id, g.epoch, g.metadata_hash, g.assignment_epoch,
                      {k: _copy_member(m) for k, m in g.members.items()}, dict(g.targets))
