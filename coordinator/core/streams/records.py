"""The records of streams groups (KIP-1071) and their factories: the only place they are built.

Kafka's ``StreamsGroup*Key/Value.json`` (record types 17, 19-23; the int stored next to each
record is Kafka's ``apiKey``) as msgspec structs, field names in snake_case, encoded like every
record of this coordinator (``core/records.py``: key = msgpack array, value = 2-byte version +
msgpack array; fields only ever appended, each with a default). Kafka's tagged fields become
trailing fields with Kafka's defaults.

====  =============================================  =============================================
type  key                                            value
====  =============================================  =============================================
17    StreamsGroupMetadataKey(group_id)               epoch, metadata hash, validated topology epoch,
                                                     last assignment configs, KIP-1331 epochs
19    StreamsGroupMemberMetadataKey(group_id,         instance, rack, client, rebalance timeout,
      member_id)                                     topology epoch, process, endpoint, client tags
20    StreamsGroupTargetAssignmentMetadataKey         assignment epoch, assignment timestamp
21    StreamsGroupTargetAssignmentMemberKey           active, standby, warm-up tasks
22    StreamsGroupCurrentMemberAssignmentKey          epochs, state, tasks, pending revocation (with
                                                     each active task's assignment epoch)
23    StreamsGroupTopologyKey(group_id)               topology epoch and subtopologies
====  =============================================  =============================================

Type 18 (``StreamsGroupPartitionMetadata``) is not in Apache trunk: the metadata hash in record 17
replaced it (KIP-1101), so it is not declared. Task offsets, the refined (warm-up) assignment and
the endpoint epoch are not persisted, as in Kafka.

The shard declares them from ``schema.py`` (``RecordTypeDecl`` each); ``encode_record`` /
``decode_record`` here are the same format, for the package's own pure tests.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import msgspec

from ..record_codec import RecordStruct
from .member import Endpoint, MemberState, StreamsGroupMember
from .tasks import Task, TasksTuple, TasksWithEpochs, by_subtopology


class _Struct(RecordStruct, frozen=True):
    """Base of the streams record structs: the shard's record struct (immutable, hashable, encoded
    as msgpack arrays), so the shard's codec encodes them as it encodes every declared type."""


class KeyValue(_Struct, frozen=True):
    key: str
    value: str


# ---- 17: group metadata ---------------------------------------------------------------------------
class StreamsGroupMetadataKey(_Struct, frozen=True):
    group_id: str


class StreamsGroupMetadataValue(_Struct, frozen=True):
    epoch: int
    metadata_hash: int
    validated_topology_epoch: int = -1
    last_assignment_configs: tuple[KeyValue, ...] | None = None
    stored_description_topology_epoch: int = -1
    failed_description_topology_epoch: int = -1


# ---- 19: member metadata --------------------------------------------------------------------------
class StreamsGroupMemberMetadataKey(_Struct, frozen=True):
    group_id: str
    member_id: str


class StreamsGroupMemberMetadataValue(_Struct, frozen=True):
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    topology_epoch: int
    process_id: str
    user_endpoint: Endpoint | None
    client_tags: tuple[KeyValue, ...] = ()


# ---- 20, 21: target assignment --------------------------------------------------------------------
class TaskIds(_Struct, frozen=True):
    subtopology_id: str
    partitions: tuple[int, ...]


class StreamsGroupTargetAssignmentMetadataKey(_Struct, frozen=True):
    group_id: str


class StreamsGroupTargetAssignmentMetadataValue(_Struct, frozen=True):
    assignment_epoch: int
    assignment_timestamp: int = 0


class StreamsGroupTargetAssignmentMemberKey(_Struct, frozen=True):
    group_id: str
    member_id: str


class StreamsGroupTargetAssignmentMemberValue(_Struct, frozen=True):
    active_tasks: tuple[TaskIds, ...] = ()
    standby_tasks: tuple[TaskIds, ...] = ()
    warmup_tasks: tuple[TaskIds, ...] = ()


# ---- 22: current member assignment ----------------------------------------------------------------
class AssignedTaskIds(TaskIds, frozen=True):
    """Record 22's ``TaskIds``, with the tagged ``AssignmentEpochs`` (aligned with ``partitions``;
    active tasks only)."""

    assignment_epochs: tuple[int, ...] | None = None


class StreamsGroupCurrentMemberAssignmentKey(_Struct, frozen=True):
    group_id: str
    member_id: str


class StreamsGroupCurrentMemberAssignmentValue(_Struct, frozen=True):
    member_epoch: int
    previous_member_epoch: int
    state: int
    active_tasks: tuple[AssignedTaskIds, ...] = ()
    standby_tasks: tuple[AssignedTaskIds, ...] = ()
    warmup_tasks: tuple[AssignedTaskIds, ...] = ()
    active_tasks_pending_revocation: tuple[AssignedTaskIds, ...] = ()
    standby_tasks_pending_revocation: tuple[AssignedTaskIds, ...] = ()
    warmup_tasks_pending_revocation: tuple[AssignedTaskIds, ...] = ()


# ---- 23: topology ---------------------------------------------------------------------------------
class TopicConfig(_Struct, frozen=True):
    key: str
    value: str


class TopicInfo(_Struct, frozen=True):
    name: str
    partitions: int = 0
    """0: no fixed count (always 0 for changelog topics)."""
    replication_factor: int = 0
    """0: the broker's default."""
    topic_configs: tuple[TopicConfig, ...] = ()


class CopartitionGroup(_Struct, frozen=True):
    """Indexes into the subtopology's own topic lists."""

    source_topics: tuple[int, ...] = ()
    source_topic_regex: tuple[int, ...] = ()
    repartition_source_topics: tuple[int, ...] = ()


class Subtopology(_Struct, frozen=True):
    subtopology_id: str
    source_topics: tuple[str, ...] = ()
    source_topic_regex: tuple[str, ...] = ()
    state_changelog_topics: tuple[TopicInfo, ...] = ()
    repartition_sink_topics: tuple[str, ...] = ()
    repartition_source_topics: tuple[TopicInfo, ...] = ()
    copartition_groups: tuple[CopartitionGroup, ...] = ()


class StreamsGroupTopologyKey(_Struct, frozen=True):
    group_id: str


class StreamsGroupTopologyValue(_Struct, frozen=True):
    epoch: int
    subtopologies: tuple[Subtopology, ...] = ()


StreamsRecordKey = (StreamsGroupMetadataKey | StreamsGroupMemberMetadataKey | StreamsGroupTargetAssignmentMetadataKey
                    | StreamsGroupTargetAssignmentMemberKey | StreamsGroupCurrentMemberAssignmentKey
                    | StreamsGroupTopologyKey)
StreamsRecordValue = (StreamsGroupMetadataValue | StreamsGroupMemberMetadataValue
                      | StreamsGroupTargetAssignmentMetadataValue | StreamsGroupTargetAssignmentMemberValue
                      | StreamsGroupCurrentMemberAssignmentValue | StreamsGroupTopologyValue)


class StreamsRecord(msgspec.Struct, frozen=True, gc=False):
    """One streams group record; ``value is None`` is a tombstone (delete the key)."""

    key: StreamsRecordKey
    value: StreamsRecordValue | None


@dataclass(frozen=True)
class RecordTypeSpec:
    """One record type as the group type declares it: Kafka's id, the key struct, the value struct
    of each version ever written and the version written today."""

    type_id: int
    name: str
    key: type[StreamsRecordKey]
    values: Mapping[int, type[StreamsRecordValue]]
    write_version: int = 0


RECORD_TYPES: tuple[RecordTypeSpec, ...] = (
    RecordTypeSpec(17, "StreamsGroupMetadata", StreamsGroupMetadataKey, {0: StreamsGroupMetadataValue}),
    RecordTypeSpec(19, "StreamsGroupMemberMetadata", StreamsGroupMemberMetadataKey,
                   {0: StreamsGroupMemberMetadataValue}),
    RecordTypeSpec(20, "StreamsGroupTargetAssignmentMetadata", StreamsGroupTargetAssignmentMetadataKey,
                   {0: StreamsGroupTargetAssignmentMetadataValue}),
    RecordTypeSpec(21, "StreamsGroupTargetAssignmentMember", StreamsGroupTargetAssignmentMemberKey,
                   {0: StreamsGroupTargetAssignmentMemberValue}),
    RecordTypeSpec(22, "StreamsGroupCurrentMemberAssignment", StreamsGroupCurrentMemberAssignmentKey,
                   {0: StreamsGroupCurrentMemberAssignmentValue}),
    RecordTypeSpec(23, "StreamsGroupTopology", StreamsGroupTopologyKey, {0: StreamsGroupTopologyValue}),
)
_BY_ID = {spec.type_id: spec for spec in RECORD_TYPES}
_BY_KEY = {spec.key: spec for spec in RECORD_TYPES}
_VERSION = struct.Struct(">H")
_encoder = msgspec.msgpack.Encoder()


class UnknownStreamsRecord(ValueError):
    """A record type or value version these declarations do not know."""


def encode_record(record: StreamsRecord) -> tuple[int, bytes, bytes | None]:
    """(type id, key bytes, value bytes or None for a tombstone), as the record log stores them."""
    spec = _BY_KEY[type(record.key)]
    key = _encoder.encode(record.key)
    if record.value is None:
        return spec.type_id, key, None
    return spec.type_id, key, _VERSION.pack(spec.write_version) + _encoder.encode(record.value)


def decode_record(type_id: int, key: bytes, value: bytes | None) -> StreamsRecord:
    spec = _BY_ID.get(type_id)
    if spec is None:
        raise UnknownStreamsRecord(f"unknown record type {type_id}")
    decoded_key = msgspec.msgpack.decode(key, type=spec.key)
    if value is None:
        return StreamsRecord(decoded_key, None)
    (version,) = _VERSION.unpack_from(value)
    value_type = spec.values.get(version)
    if value_type is None:
        raise UnknownStreamsRecord(f"record type {type_id}: unknown value version {version}")
    return StreamsRecord(decoded_key, msgspec.msgpack.decode(value[_VERSION.size:], type=value_type))


# ---- factories (Kafka's StreamsCoordinatorRecordHelpers) -------------------------------------------
def _task_ids(tasks: Iterable[Task]) -> tuple[TaskIds, ...]:
    return tuple(TaskIds(s, tuple(ps)) for s, ps in by_subtopology(tasks))


def _assigned_task_ids(tasks: Iterable[Task], epochs: Mapping[Task, int] | None = None) -> tuple[AssignedTaskIds, ...]:
    if epochs is None:
        return tuple(AssignedTaskIds(s, tuple(ps)) for s, ps in by_subtopology(tasks))
    return tuple(AssignedTaskIds(s, tuple(ps), tuple(epochs[(s, p)] for p in ps)) for s, ps in by_subtopology(tasks))


def group_epoch_record(group_id: str, epoch: int, metadata_hash: int, validated_topology_epoch: int,
                       assignment_configs: Mapping[str, str]) -> StreamsRecord:
    """Record 17: the group epoch, the required topics' metadata hash, the topology epoch validated
    against it and the assignment configs the target was computed with."""
    configs = tuple(KeyValue(k, assignment_configs[k]) for k in sorted(assignment_configs))
    return StreamsRecord(StreamsGroupMetadataKey(group_id),
                         StreamsGroupMetadataValue(epoch, metadata_hash, validated_topology_epoch, configs))


def member_metadata_record(group_id: str, member: StreamsGroupMember) -> StreamsRecord:
    """Record 19: what the member sent when it joined."""
    return StreamsRecord(
        StreamsGroupMemberMetadataKey(group_id, member.member_id),
        StreamsGroupMemberMetadataValue(
            member.instance_id, member.rack_id, member.client_id, member.client_host, member.rebalance_timeout_ms,
            member.topology_epoch, member.process_id, member.user_endpoint,
            tuple(KeyValue(k, v) for k, v in member.client_tags)))


def topology_record(group_id: str, topology: StreamsGroupTopologyValue) -> StreamsRecord:
    """Record 23: the topology as the first member sent it (order kept, as Kafka keeps it)."""
    return StreamsRecord(StreamsGroupTopologyKey(group_id), topology)


def target_epoch_record(group_id: str, assignment_epoch: int, timestamp_ms: int) -> StreamsRecord:
    """Record 20: the epoch (and time) the target assignment was computed for."""
    return StreamsRecord(StreamsGroupTargetAssignmentMetadataKey(group_id),
                         StreamsGroupTargetAssignmentMetadataValue(assignment_epoch, timestamp_ms))


def target_member_record(group_id: str, member_id: str, target: TasksTuple) -> StreamsRecord:
    """Record 21: one member's target (the assignor's: never warm-ups, which are not persisted)."""
    return StreamsRecord(
        StreamsGroupTargetAssignmentMemberKey(group_id, member_id),
        StreamsGroupTargetAssignmentMemberValue(_task_ids(target.active), _task_ids(target.standby),
                                                _task_ids(target.warmup)))


def current_assignment_record(group_id: str, member: StreamsGroupMember) -> StreamsRecord:
    """Record 22: the member's epochs, state, tasks and tasks pending revocation."""
    assigned, pending = member.assigned, member.pending_revocation
    return StreamsRecord(
        StreamsGroupCurrentMemberAssignmentKey(group_id, member.member_id),
        StreamsGroupCurrentMemberAssignmentValue(
            member.member_epoch, member.previous_member_epoch, int(member.state),
            _assigned_task_ids(assigned.active, assigned.active), _assigned_task_ids(assigned.standby),
            _assigned_task_ids(assigned.warmup),
            _assigned_task_ids(pending.active, pending.active), _assigned_task_ids(pending.standby),
            _assigned_task_ids(pending.warmup)))


def member_tombstones(group_id: str, member_id: str) -> list[StreamsRecord]:
    """A fenced member's tombstones in Kafka's order: current assignment, target, metadata."""
    return [StreamsRecord(StreamsGroupCurrentMemberAssignmentKey(group_id, member_id), None),
            StreamsRecord(StreamsGroupTargetAssignmentMemberKey(group_id, member_id), None),
            StreamsRecord(StreamsGroupMemberMetadataKey(group_id, member_id), None)]


def group_tombstones(group_id: str, member_ids: Iterable[str]) -> list[StreamsRecord]:
    """The records that delete a whole group, in Kafka's order (``createGroupTombstoneRecords``)."""
    ids = sorted(member_ids)
    records = [StreamsRecord(StreamsGroupCurrentMemberAssignmentKey(group_id, m), None) for m in ids]
    records += [StreamsRecord(StreamsGroupTargetAssignmentMemberKey(group_id, m), None) for m in ids]
    records.append(StreamsRecord(StreamsGroupTargetAssignmentMetadataKey(group_id), None))
    records += [StreamsRecord(StreamsGroupMemberMetadataKey(group_id, m), None) for m in ids]
    records.append(StreamsRecord(StreamsGroupMetadataKey(group_id), None))
    records.append(StreamsRecord(StreamsGroupTopologyKey(group_id), None))
    return records


# ---- replay helpers: records back into the package's own state -------------------------------------
def _tasks_of(task_ids: Iterable[TaskIds]) -> frozenset[Task]:
    return frozenset((t.subtopology_id, p) for t in task_ids for p in t.partitions)


def _epochs_of(task_ids: Iterable[AssignedTaskIds], member_epoch: int) -> dict[Task, int]:
    """Active tasks with their assignment epochs; a record without them reads as the member's epoch."""
    epochs: dict[Task, int] = {}
    for t in task_ids:
        aligned = t.assignment_epochs if t.assignment_epochs and len(t.assignment_epochs) == len(t.partitions) else None
        for i, p in enumerate(t.partitions):
            epochs[(t.subtopology_id, p)] = aligned[i] if aligned is not None else member_epoch
    return epochs


def target_from_record(value: StreamsGroupTargetAssignmentMemberValue) -> TasksTuple:
    return TasksTuple(_tasks_of(value.active_tasks), _tasks_of(value.standby_tasks), _tasks_of(value.warmup_tasks))


def member_from_records(member_id: str, metadata: StreamsGroupMemberMetadataValue,
                        assignment: StreamsGroupCurrentMemberAssignmentValue | None) -> StreamsGroupMember:
    """A member rebuilt from its records 19 and 22 (22 absent: a member that never reconciled)."""
    member = StreamsGroupMember(
        member_id=member_id, process_id=metadata.process_id, instance_id=metadata.instance_id,
        rack_id=metadata.rack_id, client_id=metadata.client_id, client_host=metadata.client_host,
        rebalance_timeout_ms=metadata.rebalance_timeout_ms, topology_epoch=metadata.topology_epoch,
        user_endpoint=metadata.user_endpoint, client_tags=tuple((kv.key, kv.value) for kv in metadata.client_tags))
    if assignment is None:
        return member
    epoch = assignment.member_epoch
    try:
        state = MemberState(assignment.state)
    except ValueError:
        state = MemberState.UNKNOWN
    return msgspec.structs.replace(
        member, member_epoch=epoch, previous_member_epoch=assignment.previous_member_epoch, state=state,
        assigned=TasksWithEpochs(_epochs_of(assignment.active_tasks, epoch), _tasks_of(assignment.standby_tasks),
                                 _tasks_of(assignment.warmup_tasks)),
        pending_revocation=TasksWithEpochs(_epochs_of(assignment.active_tasks_pending_revocation, epoch),
                                           _tasks_of(assignment.standby_tasks_pending_revocation),
                                           _tasks_of(assignment.warmup_tasks_pending_revocation)))
