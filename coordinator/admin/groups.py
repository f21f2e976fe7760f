"""The admin operations on groups and their offsets, as plain data.

- `list_groups`: ListGroups on every broker of the cluster (each lists the groups it coordinates),
  v5 for type and state, lower versions where the broker has no v5 (no type before v5: such brokers
  only have classic groups; no state before v4).
- `describe_group`: the group from its coordinator. ConsumerGroupDescribe (API 69) when the broker
  serves it and the group is a consumer (KIP-848) group: group and assignment epochs, member epochs,
  current and target assignments. StreamsGroupDescribe (API 89) for a streams (KIP-1071) group: each
  member's active, standby and warm-up tasks (subtopology: partitions) and, for members that report
  task offsets, the lag of each standby and warm-up task (end minus offset). Otherwise DescribeGroups; for protocol type "consumer" each
  member's ConsumerProtocolAssignment is decoded, and each member's generation is the one this
  coordinator's private DescribeGroupGenerations answers (`generations.py`), or where the broker
  does not serve it (Apache Kafka) the one the member's subscription names. Then committed offsets
  (OffsetFetch, every partition of the group) and end offsets (ListOffsets latest, sent to each
  partition's leader from Metadata), and lag where both are known. Lag is end minus committed, never clamped: a committed
  offset above the log end (data lost, a topic re-created, an offset committed by hand) shows as a
  negative lag, as Kafka's kafka-consumer-groups shows it, instead of hiding behind 0.
- `delete_group`: DeleteGroups at the coordinator.
- `group_state`: the group's state alone (what `reset` checks before planning).

Offsets resets live in `reset`; ListOffsets routing in `log_offsets`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from protocol.errors import ErrorCode

from .assignment import Partitions, decode_assignment, decode_subscription
from .client import (
    CONSUMER_GROUP_DESCRIBE,
    DELETE_GROUPS,
    DESCRIBE_GROUPS,
    LIST_GROUPS,
    OFFSET_FETCH,
    STREAMS_GROUP_DESCRIBE,
    AdminClient,
    AdminError,
    Connection,
    error_name,
)
from .generations import Generations, group_generations, held_throughout
from .log_offsets import LATEST, list_log_offsets


@dataclass(frozen=True, slots=True)
class GroupListing:
    group_id: str
    group_type: str
    state: str
    protocol_type: str


@dataclass(slots=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    assignment: Partitions | None
    """Topic → partitions; None when the assignment bytes could not be decoded."""
    member_epoch: int | None = None
    """Consumer groups: the member's epoch."""
    generation_id: int | None = None
    """Classic groups: the generation the member holds (this coordinator answers it); from other
    brokers, the one in the member's subscription (v2+, a rebalance behind); None when unknown."""
    target_assignment: Partitions | None = None
    """Consumer groups: the assignment the member is reconciling towards."""
    subscribed_topics: list[str] = field(default_factory=list)
    standby_tasks: Partitions | None = None
    """Streams groups: standby tasks, subtopology → partitions (``assignment`` holds the active ones)."""
    warmup_tasks: Partitions | None = None
    """Streams groups: warm-up tasks (restoring before they take over an active task)."""
    task_lags: dict[str, int] = field(default_factory=dict)
    """Streams groups, members reporting task offsets (v1): "subtopology_partition" → lag."""


@dataclass(slots=True)
class PartitionOffsets:
    topic: str
    partition: int
    committed_offset: int | None
    end_offset: int | None
    lag: int | None
    """End offset minus committed offset; negative when the committed offset is above the log end."""
    member_id: str | None
    metadata: str | None = None


@dataclass(slots=True)
class SharePartitionOffsets:
    """A share group's partition (``admin/share.py``): where the group starts reading it, its log
    end, what is left to finish (Kafka's lag), and what is in flight by state."""

    topic: str
    partition: int
    start_offset: int | None
    end_offset: int | None
    lag: int | None
    members: list[str]
    """The members it is assigned to (a share partition may have several)."""
    in_flight: dict[str, int] | None = None
    """State (available, acquired, acknowledged, archived) -> offsets between the start offset and
    the first offset never acquired; None where the broker cannot say (Apache Kafka)."""


@dataclass(slots=True)
class GroupDescription:
    group_id: str
    group_type: str
    state: str
    protocol_type: str
    protocol: str
    """Classic: the chosen protocol (assignor); consumer: the server-side assignor."""
    coordinator: str
    members: list[MemberDescription]
    offsets: list[PartitionOffsets]
    group_epoch: int | None = None
    assignment_epoch: int | None = None
    generation_id: int | None = None
    """Classic groups: the group's generation, where the broker says (this coordinator does)."""
    share_offsets: list[SharePartitionOffsets] = field(default_factory=list)
    """Share groups: their partitions' start offsets and in-flight records (``offsets`` stays empty)."""


# -- list -------------------------------------------------------------------------------------------
async def list_groups(client: AdminClient) -> list[GroupListing]:
    metadata = await client.metadata([])
    brokers = list(metadata.brokers.values())
    if not brokers:
        raise AdminError("Metadata returned no brokers")
    found: dict[str, GroupListing] = {}
    for broker in brokers:
        connection = await client.broker(broker)
        version = connection.version(LIST_GROUPS)
        response = await connection.request(LIST_GROUPS, {"states_filter": [], "types_filter": []}, version)
        if int(response.error_code):
            raise AdminError(f"ListGroups at {connection.label} failed: {error_name(int(response.error_code))}")
        for group in response.groups:
            group_type = getattr(group, "group_type", "") or ("classic" if version < 5 else "")
            found[group.group_id] = GroupListing(
                group.group_id, group_type, getattr(group, "group_state", ""), group.protocol_type
            )
    return [found[g] for g in sorted(found)]


# -- describe ---------------------------------------------------------------------------------------
async def _describe_consumer_group(connection: Connection, group_id: str) -> GroupDescription | None:
    """ConsumerGroupDescribe; None when the group is not a consumer group (or unknown)."""
    response = await connection.request(CONSUMER_GROUP_DESCRIBE, {"group_ids": [group_id]})
    group = response.groups[0]
    code = int(group.error_code)
    if code == ErrorCode.GROUP_ID_NOT_FOUND:
        return None
    if code:
        raise AdminError(f"ConsumerGroupDescribe of {group_id!r} failed: {error_name(code)}"
                         + (f" ({group.error_message})" if group.error_message else ""))

    def partitions(assignment: Any) -> Partitions:
        return {tp.topic_name: sorted(int(p) for p in tp.partitions)
                for tp in sorted(assignment.topic_partitions, key=lambda tp: tp.topic_name)}

    members = [
        MemberDescription(
            member_id=m.member_id, group_instance_id=m.instance_id, client_id=m.client_id,
            client_host=m.client_host, assignment=partitions(m.assignment), member_epoch=int(m.member_epoch),
            target_assignment=partitions(m.target_assignment), subscribed_topics=sorted(m.subscribed_topic_names),
        )
        for m in group.members
    ]
    return GroupDescription(
        group_id=group_id, group_type="consumer", state=group.group_state, protocol_type="consumer",
        protocol=group.assignor_name, coordinator=connection.label, members=members, offsets=[],
        group_epoch=int(group.group_epoch), assignment_epoch=int(group.assignment_epoch),
    )


async def _describe_streams_group(connection: Connection, group_id: str) -> GroupDescription | None:
    """StreamsGroupDescribe; None when the group is not a streams group (or unknown)."""
    response = await connection.request(STREAMS_GROUP_DESCRIBE, {"group_ids": [group_id],
                                                                 "include_authorized_operations": False})
    group = response.groups[0]
    code = int(group.error_code)
    if code == ErrorCode.GROUP_ID_NOT_FOUND:
        return None
    if code:
        raise AdminError(f"StreamsGroupDescribe of {group_id!r} failed: {error_name(code)}"
                         + (f" ({group.error_message})" if group.error_message else ""))

    def tasks(items: Any) -> Partitions:
        return {t.subtopology_id: sorted(int(p) for p in t.partitions)
                for t in sorted(items, key=lambda t: t.subtopology_id)}

    def lags(m: Any) -> dict[str, int]:
        ends = {(o.subtopology_id, int(o.partition)): int(o.offset) for o in m.task_end_offsets}
        return {f"{o.subtopology_id}_{o.partition}": ends[key] - int(o.offset)
                for o in m.task_offsets if (key := (o.subtopology_id, int(o.partition))) in ends}

    members = [
        MemberDescription(
            member_id=m.member_id, group_instance_id=m.instance_id, client_id=m.client_id,
            client_host=m.client_host, assignment=tasks(m.assignment.active_tasks), member_epoch=int(m.member_epoch),
            target_assignment=tasks(m.target_assignment.active_tasks),
            standby_tasks=tasks(m.assignment.standby_tasks), warmup_tasks=tasks(m.assignment.warmup_tasks),
            task_lags=lags(m),
        )
        for m in group.members
    ]
    return GroupDescription(
        group_id=group_id, group_type="streams", state=group.group_state, protocol_type="streams", protocol="",
        coordinator=connection.label, members=members, offsets=[], group_epoch=int(group.group_epoch),
        assignment_epoch=int(group.assignment_epoch),
    )


async def _describe_classic_group(connection: Connection, group_id: str) -> GroupDescription:
    response = await connection.request(DESCRIBE_GROUPS, {"groups": [group_id]})
    group = response.groups[0]
    code = int(group.error_code)
    if code == ErrorCode.GROUP_ID_NOT_FOUND:  # v6 (KIP-1043); v0–5 say Dead with no error
        return GroupDescription(group_id, "", "Dead", "", "", connection.label, [], [])
    if code:
        message = getattr(group, "error_message", None)
        raise AdminError(f"DescribeGroups of {group_id!r} failed: {error_name(code)}"
                         + (f" ({message})" if message else ""))
    members = []
    for m in group.members:
        member = MemberDescription(m.member_id, getattr(m, "group_instance_id", None), m.client_id,
                                   m.client_host, {})
        if group.protocol_type == "consumer":
            try:
                member.assignment = decode_assignment(m.member_assignment)
            except ValueError:
                member.assignment = None
            try:
                subscription = decode_subscription(m.member_metadata)
                member.generation_id = subscription.generation_id
                member.subscribed_topics = sorted(subscription.topics)
            except ValueError:
                pass
        members.append(member)
    state = group.group_state
    return GroupDescription(group_id, "classic" if state != "Dead" else "", state, group.protocol_type,
                            group.protocol_data, connection.label, members, [])


def _show_generations(description: GroupDescription, generations: Generations | None) -> None:
    """The generations the server says each member holds, in place of their subscriptions' (which
    lag by a rebalance); none at all when the server's are not those of these members (None)."""
    description.generation_id = None if generations is None else generations.generation_id
    for member in description.members:
        held = -1 if generations is None else generations.members.get(member.member_id, -1)
        member.generation_id = held if held >= 0 else None


async def committed_offsets(connection: Connection, group_id: str) -> dict[tuple[str, int], tuple[int, str | None]]:
    """(topic, partition) → (committed offset, metadata) for every partition the group committed."""
    version = connection.version(OFFSET_FETCH)
    if version >= 8:
        response = await connection.request(
            OFFSET_FETCH, {"groups": [{"group_id": group_id, "topics": None}], "require_stable": False}, version)
        group = response.groups[0]
        code, topics = int(group.error_code), group.topics
    else:
        response = await connection.request(OFFSET_FETCH, {"group_id": group_id, "topics": None}, version)
        code, topics = int(response.error_code), response.topics
    if code and code != ErrorCode.GROUP_ID_NOT_FOUND:
        raise AdminError(f"OffsetFetch of {group_id!r} failed: {error_name(code)}")
    offsets: dict[tuple[str, int], tuple[int, str | None]] = {}
    for topic in topics:
        for p in topic.partitions:
            if int(p.error_code):
                raise AdminError(f"OffsetFetch of {group_id!r} {topic.name}-{p.partition_index} failed: "
                                 f"{error_name(int(p.error_code))}")
            if int(p.committed_offset) >= 0:
                offsets[(topic.name, int(p.partition_index))] = (int(p.committed_offset), p.metadata)
    return offsets


async def list_offsets(client: AdminClient, partitions: Iterable[tuple[str, int]],
                       timestamp: int) -> dict[tuple[str, int], int]:
    """(topic, partition) → offset at `timestamp` (LATEST, EARLIEST), asked of each partition's leader.

    Partitions without a known leader, or answered with an error, are left out."""
    found = await list_log_offsets(client, partitions, timestamp)
    return {key: o.offset for key, o in found.items() if o.error is None and o.offset >= 0}


async def describe_group(client: AdminClient, group_id: str) -> GroupDescription:
    connection = await client.coordinator(group_id)
    description = None
    if connection.supports(CONSUMER_GROUP_DESCRIBE):
        description = await _describe_consumer_group(connection, group_id)
    if description is None and connection.supports(STREAMS_GROUP_DESCRIBE):
        description = await _describe_streams_group(connection, group_id)
    if description is None:
        before, connection = await group_generations(client, connection, group_id)
        description = await _describe_classic_group(connection, group_id)
        if before is not None:  # served here: asked again, to know DescribeGroups saw that generation
            after, connection = await group_generations(client, connection, group_id)
            _show_generations(description, held_throughout(before, after, description.state))
    committed = await committed_offsets(connection, group_id)
    owners: dict[tuple[str, int], str] = {}
    for member in description.members if description.group_type != "streams" else ():  # tasks, not partitions
        for topic, parts in (member.assignment or {}).items():
            for partition in parts:
                owners[(topic, partition)] = member.member_id
    keys = sorted(set(committed) | set(owners))
    ends = await list_offsets(client, keys, LATEST)
    for key in keys:
        offset, metadata = committed.get(key, (None, None))
        end = ends.get(key)
        lag = end - offset if end is not None and offset is not None else None
        description.offsets.append(PartitionOffsets(key[0], key[1], offset, end, lag, owners.get(key), metadata))
    return description


# -- delete -----------------------------------------------------------------------------------------
async def delete_group(client: AdminClient, group_id: str) -> None:
    connection = await client.coordinator(group_id)
    response = await connection.request(DELETE_GROUPS, {"groups_names": [group_id]})
    for result in response.results:
        code = int(result.error_code)
        if result.group_id == group_id and code:
            raise AdminError(f"cannot delete group {group_id!r}: {error_name(code)}")


# -- state ------------------------------------------------------------------------------------------
async def group_state(client: AdminClient, group_id: str) -> str:
    connection = await client.coordinator(group_id)
    description = None
    if connection.supports(CONSUMER_GROUP_DESCRIBE):
        description = await _describe_consumer_group(connection, group_id)
    if description is None and connection.supports(STREAMS_GROUP_DESCRIBE):
        description = await _describe_streams_group(connection, group_id)
    if description is None:
        description = await _describe_classic_group(connection, group_id)
    return description.state
