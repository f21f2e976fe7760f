"""Share groups (KIP-932) for the admin CLI, as Kafka's ``kafka-share-groups.sh`` sees them.

- `describe_share_group`: ShareGroupDescribe (members, their epochs and assigned partitions), then
  DescribeShareGroupOffsets (every partition the group has state for: start offset, and lag from
  v1), the log end offsets (ListOffsets latest), and what is in flight by state from this
  coordinator's private DescribeSharePartitions (a broker that does not know the key, Apache Kafka,
  closes the connection: the counts are then unknown). None when the group is not a share group.
- `start_offsets`: the start offset of each partition the group has state for (`offsets reset`).
- `alter_offsets` / `delete_offsets`: AlterShareGroupOffsets / DeleteShareGroupOffsets; a refusal
  (NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND, per partition or topic) is an `AdminError`.
"""

from __future__ import annotations

from collections.abc import Iterable

from protocol.errors import ErrorCode
from protocol.private import DESCRIBE_SHARE_PARTITIONS

from .client import (
    ALTER_SHARE_GROUP_OFFSETS,
    DELETE_SHARE_GROUP_OFFSETS,
    DESCRIBE_SHARE_GROUP_OFFSETS,
    SHARE_GROUP_DESCRIBE,
    AdminClient,
    AdminError,
    Connection,
    error_name,
)
from .groups import GroupDescription, MemberDescription, SharePartitionOffsets
from .log_offsets import LATEST, list_log_offsets

Key = tuple[str, int]


async def describe_share_group(client: AdminClient, group_id: str) -> GroupDescription | None:
    connection = await client.coordinator(group_id)
    if not connection.supports(SHARE_GROUP_DESCRIBE):
        return None
    response = await connection.request(SHARE_GROUP_DESCRIBE, {"group_ids": [group_id],
                                                               "include_authorized_operations": False})
    group = response.groups[0]
    code = int(group.error_code)
    if code in (ErrorCode.GROUP_ID_NOT_FOUND, ErrorCode.UNSUPPORTED_VERSION):
        return None  # not a share group, or a broker with share groups turned off (share.version 0)
    if code:
        raise AdminError(f"ShareGroupDescribe of {group_id!r} failed: {error_name(code)}"
                         + (f" ({group.error_message})" if group.error_message else ""))
    members = [
        MemberDescription(
            member_id=m.member_id, group_instance_id=None, client_id=m.client_id, client_host=m.client_host,
            assignment={tp.topic_name: sorted(int(p) for p in tp.partitions)
                        for tp in sorted(m.assignment.topic_partitions, key=lambda tp: tp.topic_name)},
            member_epoch=int(m.member_epoch), subscribed_topics=sorted(m.subscribed_topic_names))
        for m in group.members
    ]
    description = GroupDescription(
        group_id=group_id, group_type="share", state=group.group_state, protocol_type="share",
        protocol=group.assignor_name, coordinator=connection.label, members=members, offsets=[],
        group_epoch=int(group.group_epoch), assignment_epoch=int(group.assignment_epoch))
    starts = await _described_offsets(connection, group_id)
    in_flight, connection = await _in_flight(client, connection, group_id)
    owners: dict[Key, list[str]] = {}
    for member in members:
        for topic, parts in (member.assignment or {}).items():
            for partition in parts:
                owners.setdefault((topic, partition), []).append(member.member_id)
    keys = sorted(set(starts) | set(owners))
    found = await list_log_offsets(client, keys, LATEST)
    for key in keys:
        start, lag = starts.get(key, (None, None))
        end = found[key].offset if key in found and found[key].error is None else None
        description.share_offsets.append(SharePartitionOffsets(
            key[0], key[1], start, end, lag, sorted(owners.get(key, [])),
            None if in_flight is None else in_flight.get(key, {})))
    return description


async def start_offsets(client: AdminClient, group_id: str) -> dict[Key, int]:
    """(topic, partition) -> start offset, for every partition the group has state for."""
    connection = await client.coordinator(group_id)
    return {key: start for key, (start, _) in (await _described_offsets(connection, group_id)).items()}


async def _described_offsets(connection: Connection, group_id: str) -> dict[Key, tuple[int, int | None]]:
    response = await connection.request(DESCRIBE_SHARE_GROUP_OFFSETS,
                                        {"groups": [{"group_id": group_id, "topics": None}]})
    group = response.groups[0]
    code = int(group.error_code)
    if code:
        raise AdminError(f"DescribeShareGroupOffsets of {group_id!r} failed: {error_name(code)}")
    out: dict[Key, tuple[int, int | None]] = {}
    for topic in group.topics:
        for p in topic.partitions:
            if int(p.error_code):
                raise AdminError(f"DescribeShareGroupOffsets of {group_id!r} {topic.topic_name}-{p.partition_index} "
                                 f"failed: {error_name(int(p.error_code))}")
            if int(p.start_offset) >= 0:
                lag = int(getattr(p, "lag", -1))
                out[(topic.topic_name, int(p.partition_index))] = (int(p.start_offset), lag if lag >= 0 else None)
    return out


async def _in_flight(client: AdminClient, connection: Connection, group_id: str
                     ) -> tuple[dict[Key, dict[str, int]] | None, Connection]:
    try:
        response = await connection.request(DESCRIBE_SHARE_PARTITIONS, {"groups": [group_id]}, version=0)
    except AdminError:  # the key is unknown there: the connection is closed (or its answer unusable)
        return None, await client.reconnect(connection)
    group = next((g for g in response.groups if g.group_id == group_id), None)
    if group is None or int(group.error_code):
        return None, connection
    return {(p.topic_name, int(p.partition_index)): {
        "available": int(p.available), "acquired": int(p.acquired), "acknowledged": int(p.acknowledged),
        "archived": int(p.archived)} for p in group.partitions}, connection


async def alter_offsets(client: AdminClient, group_id: str, offsets: Iterable[tuple[str, int, int]]) -> None:
    """Set the start offset of each (topic, partition, offset); the group must be empty."""
    by_topic: dict[str, list[tuple[int, int]]] = {}
    for topic, partition, offset in offsets:
        by_topic.setdefault(topic, []).append((partition, offset))
    connection = await client.coordinator(group_id)
    response = await connection.request(ALTER_SHARE_GROUP_OFFSETS, {"group_id": group_id, "topics": [
        {"topic_name": t, "partitions": [{"partition_index": p, "start_offset": o} for p, o in sorted(parts)]}
        for t, parts in sorted(by_topic.items())]})
    code = int(response.error_code)
    if code:
        raise AdminError(f"AlterShareGroupOffsets of {group_id!r} failed: {error_name(code)}"
                         + (f" ({response.error_message})" if response.error_message else ""))
    failed = [f"{t.topic_name}-{p.partition_index} ({error_name(int(p.error_code))})"
              for t in response.responses for p in t.partitions if int(p.error_code)]
    if failed:
        raise AdminError(f"AlterShareGroupOffsets of {group_id!r} failed for {', '.join(failed)}")


async def delete_offsets(client: AdminClient, group_id: str, topics: list[str]) -> dict[str, str | None]:
    """Forget the group's state of whole topics; topic -> None (deleted) or the error's name. A
    refusal of the whole request (not a share group, not empty) is an `AdminError`."""
    connection = await client.coordinator(group_id)
    if not connection.supports(DELETE_SHARE_GROUP_OFFSETS):
        raise AdminError(f"{connection.label} does not serve DeleteShareGroupOffsets: it has no share groups")
    response = await connection.request(DELETE_SHARE_GROUP_OFFSETS, {
        "group_id": group_id, "topics": [{"topic_name": t} for t in topics]})
    code = int(response.error_code)
    if code:
        hint = " (offsets delete is for share groups)" if code == ErrorCode.GROUP_ID_NOT_FOUND else ""
        raise AdminError(f"cannot delete the offsets of group {group_id!r}: {error_name(code)}{hint}")
    return {t.topic_name: error_name(int(t.error_code)) if int(t.error_code) else None for t in response.responses}
