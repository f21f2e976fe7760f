"""Checks a ConsumerGroupHeartbeat passes before anything is written (Kafka's
``throwIfConsumerGroupHeartbeatRequestIsInvalid``, ``throwIfConsumerGroupMemberEpochIsInvalid``,
the static-member rules), and the pure helpers that read a request.

Everything here raises :class:`~coordinator.core.errors.CoordinatorError` or returns values; nothing
writes records or mutates a group.
"""

from __future__ import annotations

from collections.abc import Collection
from uuid import UUID

from msgspec.structs import replace

from coordinator.core.errors import CoordinatorError, ErrorCode
from coordinator.core.requests import ConsumerGroupHeartbeat

from .assignment import Assignment
from .group import ConsumerGroup
from .member import LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH, ConsumerGroupMember
from .reconciliation import Owned


def _blank(value: str | None) -> bool:
    return value is not None and not value.strip()


def _invalid(message: str) -> CoordinatorError:
    return CoordinatorError(ErrorCode.INVALID_REQUEST, message)


def validate_heartbeat(req: ConsumerGroupHeartbeat, assignors: Collection[str]) -> None:
    """Kafka's ``throwIfConsumerGroupHeartbeatRequestIsInvalid``: INVALID_REQUEST with Kafka's messages,
    UNSUPPORTED_ASSIGNOR."""
    if not req.group_id.strip():
        raise _invalid("GroupId can't be empty.")
    # Tested here before calling: a steady heartbeat sends neither (no call per heartbeat).
    if req.instance_id is not None and _blank(req.instance_id):
        raise _invalid("InstanceId can't be empty.")
    if req.rack_id is not None and _blank(req.rack_id):
        raise _invalid("RackId can't be empty.")
    epoch = req.member_epoch
    if (req.member_id_required or epoch > 0 or epoch == LEAVE_GROUP_MEMBER_EPOCH) and not req.member_id.strip():
        raise _invalid("MemberId can't be empty.")
    if epoch == 0:
        if req.rebalance_timeout_ms == -1:
            raise _invalid("RebalanceTimeoutMs must be provided in first request.")
        if req.topic_partitions is None or req.topic_partitions:
            raise _invalid("TopicPartitions must be empty when (re-)joining.")
        if req.subscribed_topic_names is None and req.subscribed_topic_regex is None:
            raise _invalid("SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
    elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        if req.instance_id is None:
            raise _invalid("InstanceId can't be null.")
    elif epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        raise _invalid("MemberEpoch is invalid.")
    if req.server_assignor is not None and req.server_assignor not in assignors:
        raise CoordinatorError(
            ErrorCode.UNSUPPORTED_ASSIGNOR,
            f"ServerAssignor {req.server_assignor} is not supported. "
            f"Supported assignors: {', '.join(assignors)}.",
        )


def check_group_size(group: ConsumerGroup, member_id: str, max_size: int) -> None:
    if len(group.members) >= max_size and (not member_id or member_id not in group.members):
        raise CoordinatorError(
            ErrorCode.GROUP_MAX_SIZE_REACHED,
            f"The consumer group has reached its maximum capacity of {max_size} members.",
        )


def find_member(
    group: ConsumerGroup, member_id: str, req: ConsumerGroupHeartbeat, owned: Owned | None
) -> tuple[ConsumerGroupMember, str | None]:
    """(the member as it stands, the member id it replaces if it is a static replacement)."""
    joining = req.member_epoch == 0
    instance_id = req.instance_id
    if instance_id is None:
        member = group.members.get(member_id)
        if member is None:
            if not joining:
                raise CoordinatorError(
                    ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group.group_id}."
                )
            return ConsumerGroupMember(member_id), None
        if req.member_epoch != member.member_epoch:  # the steady heartbeat names its recorded epoch
            check_epoch(member, req.member_epoch, owned, group.latest_told_epoch(member))
        return member, None
    holder = group.static_member(instance_id)
    if joining:
        if holder is None:
            existing = group.members.get(member_id)
            if existing is not None:  # a dynamic member turning static
                check_epoch(existing, 0, owned)
                return existing, None
            return ConsumerGroupMember(member_id), None
        if holder.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH and holder.classic is None:
            # A classic member's slot is taken over at once (it cannot leave with epoch -2): Kafka
            # checks the release only when both speak the consumer protocol.
            raise CoordinatorError(
                ErrorCode.UNRELEASED_INSTANCE_ID,
                f"Static member {member_id} with instance id {instance_id} cannot join the group because "
                f"the instance id is owned by {holder.member_id} member.",
            )
        # The restarted instance takes over the old member's subscription and assignment.
        copy = replace(holder, member_id=member_id, member_epoch=0, previous_member_epoch=0)
        return copy, holder.member_id
    if holder is None:
        raise CoordinatorError(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
    if holder.member_id != member_id:
        raise CoordinatorError(
            ErrorCode.FENCED_INSTANCE_ID,
            f"Static member {member_id} with instance id {instance_id} was fenced by member {holder.member_id}.",
        )
    if req.member_epoch != holder.member_epoch:
        check_epoch(holder, req.member_epoch, owned, group.latest_told_epoch(holder))
    return holder, None


def updated_member(member: ConsumerGroupMember, req: ConsumerGroupHeartbeat) -> ConsumerGroupMember:
    """The member with the request's non-null fields (and the connection's client id and host)."""
    if (
        req.instance_id is None
        and req.rack_id is None
        and req.rebalance_timeout_ms == -1
        and req.server_assignor is None
        and req.subscribed_topic_names is None
        and req.subscribed_topic_regex is None
        and req.client_id == member.client_id
        and req.client_host == member.client_host
        and member.classic is None
    ):
        return member  # the steady-state heartbeat: nothing to update
    return replace(
        member,
        instance_id=req.instance_id if req.instance_id is not None else member.instance_id,
        rack_id=req.rack_id if req.rack_id is not None else member.rack_id,
        rebalance_timeout_ms=(
            req.rebalance_timeout_ms if req.rebalance_timeout_ms != -1 else member.rebalance_timeout_ms
        ),
        server_assignor=req.server_assignor if req.server_assignor is not None else member.server_assignor,
        subscribed_topic_names=(
            tuple(sorted(set(req.subscribed_topic_names)))
            if req.subscribed_topic_names is not None
            else member.subscribed_topic_names
        ),
        subscribed_topic_regex=(
            req.subscribed_topic_regex if req.subscribed_topic_regex is not None else member.subscribed_topic_regex
        ),
        client_id=req.client_id,
        client_host=req.client_host,
        classic=None,  # it speaks the consumer protocol now
    )


def owned_partitions(req: ConsumerGroupHeartbeat) -> Owned | None:
    if req.topic_partitions is None:
        return None
    owned: dict[UUID, frozenset[int]] = {}
    for tp in req.topic_partitions:
        owned[tp.topic_id] = owned.get(tp.topic_id, frozenset()) | frozenset(tp.partitions)
    return owned


def is_subset(owned: Owned | None, assigned: Assignment) -> bool:
    if owned is None:
        return False
    for topic_id, partitions in owned.items():
        if not partitions:
            continue
        mine = assigned.get(topic_id)
        if mine is None or not partitions <= mine:
            return False
    return True


def check_epoch(member: ConsumerGroupMember, received: int, owned: Owned | None, told: int | None = None) -> None:
    """Kafka's ``throwIfConsumerGroupMemberEpochIsInvalid`` with the 4.2 rejoin rule.

    ``told``: the highest epoch the member may have been told (``ConsumerGroup.latest_told_epoch``;
    its recorded one by default). Every epoch from the recorded one up to it stands for the
    partitions the member holds (told without a record), so any of them is its current epoch."""
    recorded = member.member_epoch
    current = recorded if told is None else told
    if received == 0 or recorded <= received <= current:
        return
    if received > current:
        raise CoordinatorError(
            ErrorCode.FENCED_MEMBER_EPOCH,
            f"The consumer group member has a greater member epoch ({received}) than the one known by the "
            f"group coordinator ({current}). The member must abandon all its partitions and rejoin.",
        )
    if received != member.previous_member_epoch or not is_subset(owned, member.assigned_partitions):
        raise CoordinatorError(
            ErrorCode.FENCED_MEMBER_EPOCH,
            f"The consumer group member has a smaller member epoch ({received}) than the one known by the "
            f"group coordinator ({current}). The member must abandon all its partitions and rejoin.",
        )
