"""One StreamsGroupHeartbeat, start to end, as a pure step (Kafka's ``GroupMetadataManager.
streamsGroupHeartbeat`` and ``streamsGroupLeave``): records to write, the response to send, the
timers to arm, the internal topics to create.

Theory of operation
===================

``heartbeat`` validates everything first and raises ``CoordinatorError`` (nothing written) for a
request Kafka refuses; then it writes records, each replayed into the group as it is written, so
the group it returns is exactly what a replay of those records gives (the caller drops the step's
records and uses a copy of the group if it must undo). In order:

1. The request's checks (``heartbeat_request.check_heartbeat``); a leave (-1) fences the member.
2. Group and member: a join creates them (GROUP_MAX_SIZE_REACHED past ``max_size``); otherwise
   GROUP_ID_NOT_FOUND / UNKNOWN_MEMBER_ID, then the epoch check (a lost response is accepted);
   static members as below.
3. What the member sent on joining (process, endpoint, tags, rack, rebalance timeout, topology
   epoch; client id and host always): a change writes its metadata record and bumps the group.
4. The topology: the first member's is stored (a change under a live group is INVALID_REQUEST);
   then configured against the topics (internal topics to create, statuses); a changed metadata
   hash or a newly validated topology epoch bumps the group. Owned tasks must exist in it.
5. Task offsets (in memory, after validation, as Kafka 4.4 does).
6. A bump writes the group epoch record; a group epoch ahead of the target computes a new target.
7. The warm-up step refines the target (``warmup.refine``), frozen per assignment epoch; when a
   stable group's refined assignment changes (a warm-up caught up, budget freed), that is a step of
   its own: group epoch + 1 and a target epoch record, targets unchanged (Kafka's REFINED bump).
8. The member reconciles toward its slice of the refined assignment; its current-assignment
   record is written when it changed; the rebalance timeout is armed on entering UNREVOKED_TASKS.
9. Response: epochs, intervals, the recovery lag (v1), statuses, the task lists when joining or
   when they changed, endpoint information when the member's endpoint epoch is stale.

Static members (Kafka 4.4): a rejoin under a new member id takes over the old member's tasks and
target once the old one left with epoch -2 (else UNRELEASED_INSTANCE_ID); another member id with
a known instance id is FENCED_INSTANCE_ID; their metadata changes bump the group only when the
assignor sees them (KAFKA-20169).

Not yet (next steps of issue 29): the initial rebalance delay and the assignment interval (targets
are computed at once), assignment configs other than the standby count.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import msgspec

from ..errors import CoordinatorError, ErrorCode
from . import records as rec
from . import stall
from .endpoints import partitions_by_user_endpoint
from .group import StreamsGroupState
from .heartbeat_request import LEAVE_EPOCH, STATIC_LEAVE_EPOCH, StreamsHeartbeat, check_heartbeat
from .member import MemberState, StreamsGroupMember
from .reconciliation import check_member_epoch, ownership, reconcile
from .status import heartbeat_statuses
from .targets import compute_target
from .tasks import EMPTY, TasksTuple, TasksWithEpochs, by_subtopology
from .topology import (
    ConfiguredTopology,
    InternalTopic,
    check_owned_tasks,
    check_topology_update,
    configure,
    required_topics,
)
from .warmup import MemberTaskOffsets, WarmupConfig, WarmupMember, group_end_offsets, lag, refine


class StreamsSettings(msgspec.Struct, frozen=True):
    """The effective settings of one group (Kafka's ``group.streams.*``, group overrides applied)."""

    session_timeout_ms: int = 45000
    heartbeat_interval_ms: int = 5000
    max_size: int = 2**31 - 1
    num_standby_replicas: int = 0
    task_offset_interval_ms: int = 60000
    num_warmup_replicas: int = 2
    acceptable_recovery_lag: int = 10000


class SoftState:
    """What a group keeps in memory only, derived again after a failover (Kafka does the same)."""

    def __init__(self) -> None:
        self.offsets: dict[str, MemberTaskOffsets] = {}
        self.refined: tuple[int, dict[str, TasksTuple]] | None = None
        self.endpoint_epoch = 0
        self.shutdown_requested_by: str | None = None
        self.refine_pending = False
        """The offsets reported changed the refinement while the group was not stable."""
        self.moves: dict[stall.Move, stall.Progress] = {}
        """Pending warm-up moves and how their lags came down (``stall.py``)."""


Timer = tuple[str, str, str]
"""(kind, group id, member id): kinds "session" and "rebalance" (one of each per member; arming
one again replaces it)."""


class Step(msgspec.Struct):
    records: list[rec.StreamsRecord] = msgspec.field(default_factory=list)
    response: dict[str, Any] = msgspec.field(default_factory=dict)
    arm: list[tuple[Timer, int, int]] = msgspec.field(default_factory=list)
    """Timers to (re)arm: (timer, deadline in ms, the member epoch it was armed at)."""
    cancel: list[Timer] = msgspec.field(default_factory=list)
    internal_topics: tuple[InternalTopic, ...] = ()


def _write(group: StreamsGroupState, step: Step, *records: rec.StreamsRecord) -> None:
    for record in records:
        step.records.append(record)
        group.replay(record)


def _task_ids(tasks: Iterable[tuple[str, int]]) -> list[dict[str, Any]]:
    return [{"subtopology_id": s, "partitions": ps} for s, ps in by_subtopology(tasks)]


def fence(group: StreamsGroupState, soft: SoftState, member_id: str) -> Step:
    """A member leaves or is fenced (Kafka's ``streamsGroupFenceMember``): its tombstones, a group
    epoch bump, and for the last member a target epoch record with timestamp 0 (the next group's
    first assignment is not held back)."""
    step = Step()
    _write(group, step, *rec.member_tombstones(group.group_id, member_id))
    _write(group, step, rec.group_epoch_record(group.group_id, group.group_epoch + 1, group.metadata_hash,
                                               group.validated_topology_epoch, group.assignment_configs))
    if not group.members:
        _write(group, step, rec.target_epoch_record(group.group_id, group.group_epoch, 0))
        soft.shutdown_requested_by = None
    soft.offsets.pop(member_id, None)
    step.cancel = [("session", group.group_id, member_id), ("rebalance", group.group_id, member_id)]
    return step


def heartbeat(group: StreamsGroupState | None, soft: SoftState, request: StreamsHeartbeat,
              topic_counts: Mapping[str, int], metadata_hash: Callable[[Iterable[str]], int],
              settings: StreamsSettings, client_id: str, client_host: str,
              now_ms: int) -> tuple[StreamsGroupState, Step]:
    """Serve one heartbeat. Raises CoordinatorError before writing anything."""
    check_heartbeat(request)
    joining = request.member_epoch == 0
    if group is None or group.deleted:
        if not joining:
            raise CoordinatorError(ErrorCode.GROUP_ID_NOT_FOUND, f"Streams group {request.group_id} not found.")
        group = StreamsGroupState(request.group_id)
    if request.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
        return group, _leave(group, soft, request)
    owned = request.owned()
    member, replacing = _member(group, request, settings, owned)

    # Validate everything that can refuse the request before anything is written.
    topology = group.topology
    store_topology = False
    if joining:
        assert request.topology is not None  # check_heartbeat
        store_topology = check_topology_update(topology, request.topology)
        if store_topology:
            topology = request.topology
    configured = configure(topology, topic_counts) if topology is not None else None
    if configured is not None and configured.is_ready and owned is not None:
        check_owned_tasks(configured, owned)
    offsets = soft.offsets.get(request.member_id, MemberTaskOffsets()).update(request.task_offsets,
                                                                              request.task_end_offsets)

    step = Step()
    gid = group.group_id
    bump = False
    if replacing is not None:
        # A static member came back under a new member id: it takes over the old one's tasks and
        # target (Kafka's replaceStreamsMember); the refinement follows it (relabelled).
        _write(group, step, *rec.member_tombstones(gid, replacing.member_id),
               rec.member_metadata_record(gid, member),
               rec.target_member_record(gid, member.member_id, group.targets.get(replacing.member_id, EMPTY)),
               rec.current_assignment_record(gid, member))
        soft.offsets.pop(replacing.member_id, None)
        if soft.refined is not None and replacing.member_id in soft.refined[1]:
            slices = dict(soft.refined[1])
            slices[member.member_id] = slices.pop(replacing.member_id)
            soft.refined = (soft.refined[0], slices)
        step.cancel += [("session", gid, replacing.member_id), ("rebalance", gid, replacing.member_id)]
    updated = msgspec.structs.replace(member, client_id=client_id, client_host=client_host)
    if joining:
        assert request.topology is not None
        updated = msgspec.structs.replace(
            updated, process_id=request.process_id or updated.process_id, rack_id=request.rack_id,
            rebalance_timeout_ms=request.rebalance_timeout_ms, topology_epoch=request.topology.epoch,
            user_endpoint=request.user_endpoint, client_tags=request.client_tags or ())
    new_member = request.member_id not in group.members
    if new_member or _metadata_changed(member, updated):
        _write(group, step, rec.member_metadata_record(gid, updated))
        # A static member's comings and goings bump the group only when what the assignor sees
        # changed (KAFKA-20169); any change of a dynamic member, and any new member, does.
        bump = member.instance_id is None or new_member or _epoch_relevant_changed(member, updated)
    if store_topology and topology is not None:
        _write(group, step, rec.topology_record(gid, topology))
        bump = True
    soft.offsets[request.member_id] = offsets
    new_hash = metadata_hash(required_topics(topology)) if topology is not None else 0
    validated = topology.epoch if topology is not None and configured is not None and configured.is_ready else -1
    configs = {"num.standby.replicas": str(settings.num_standby_replicas)}
    if new_hash != group.metadata_hash or validated != group.validated_topology_epoch \
            or configs != group.assignment_configs:
        bump = True
    if bump:
        _write(group, step, rec.group_epoch_record(gid, group.group_epoch + 1, new_hash, validated, configs))
    if group.group_epoch > group.assignment_epoch:
        if configured is None:
            configured = ConfiguredTopology(-1, None)
        _, target_records = compute_target(group, configured, soft.offsets, settings.num_standby_replicas, now_ms)
        _write(group, step, *target_records)

    # Refined again only for a new target or newly reported offsets: steady heartbeats (v0 ones,
    # and v1 ones between task-offset intervals) cost no pass over the group's tasks.
    reported = request.task_offsets is not None or request.task_end_offsets is not None
    fresh = soft.refined is None or soft.refined[0] != group.assignment_epoch
    bound = stall.stall_bound_ms(settings.task_offset_interval_ms, settings.heartbeat_interval_ms)
    stalled = stall.stalled(soft.moves, now_ms, bound)  # a few moves at most: the warm-up budget
    due = any(not soft.moves[m].stalled for m in stalled)
    refined = _refined(group, soft, settings, configured, stalled) \
        if fresh or reported or soft.refine_pending or due else None
    if configured is None or not configured.is_ready:
        soft.refined = None
    elif refined is None:
        pass  # nothing new to refine with: the epoch's refinement stands
    elif soft.refined is None or soft.refined[0] != group.assignment_epoch:
        soft.refined = (group.assignment_epoch, refined)  # a new target: its first refinement
    elif refined != soft.refined[1] and group.state_name == "Stable":
        # Frozen while members reconcile; once the group is stable, a changed refinement (a warm-up
        # caught up, budget freed) is an epoch of its own: Kafka's REFINED bump, targets unchanged.
        _write(group, step, rec.group_epoch_record(gid, group.group_epoch + 1, group.metadata_hash,
                                                   group.validated_topology_epoch, group.assignment_configs),
               rec.target_epoch_record(gid, group.group_epoch + 1, group.assignment_timestamp))
        soft.refined = (group.assignment_epoch, refined)
    if refined is not None and soft.refined is not None:
        # A change that waits for the group to be stable is looked at again on later heartbeats.
        soft.refine_pending = refined != soft.refined[1]
        soft.moves = _track_moves(group, soft, now_ms, bound)
    slice_ = soft.refined[1].get(request.member_id, EMPTY) if soft.refined is not None else EMPTY

    current = group.members[request.member_id]
    reconciled = current
    if not current.is_reconciled_to(group.assignment_epoch):
        reconciled = reconcile(current, group.assignment_epoch, slice_, ownership(group.members.values()), owned)
        if reconciled != current:
            _write(group, step, rec.current_assignment_record(gid, reconciled))
    timer: Timer = ("rebalance", gid, request.member_id)
    if reconciled.state == MemberState.UNREVOKED_TASKS and current.state != MemberState.UNREVOKED_TASKS:
        step.arm.append((timer, now_ms + max(reconciled.rebalance_timeout_ms, 0), reconciled.member_epoch))
    elif reconciled.state != MemberState.UNREVOKED_TASKS:
        step.cancel.append(timer)
    step.arm.append((("session", gid, request.member_id), now_ms + settings.session_timeout_ms,
                     reconciled.member_epoch))
    if request.shutdown_application:
        soft.shutdown_requested_by = request.member_id

    changed = reconciled.assigned.tasks() != member.assigned.tasks()
    if (joining and request.user_endpoint != member.user_endpoint) or (changed and reconciled.user_endpoint):
        soft.endpoint_epoch += 1
    response: dict[str, Any] = {
        "member_id": request.member_id, "member_epoch": reconciled.member_epoch,
        "heartbeat_interval": settings.heartbeat_interval_ms, "task_offset_interval": settings.task_offset_interval_ms,
        "status": [{"status_code": code, "status_detail": detail} for code, detail in heartbeat_statuses(
            group_topology_epoch=group.topology.epoch if group.topology is not None else None,
            member_topology_epoch=reconciled.topology_epoch, delay=None, configured=configured,
            shutdown_requested_by=soft.shutdown_requested_by, rack_aware_tags=(),
            member_tags=(k for k, _ in reconciled.client_tags), api_version=request.api_version)],
        "endpoint_information_epoch": soft.endpoint_epoch,
    }
    if request.api_version >= 1:
        response["acceptable_recovery_lag"] = settings.acceptable_recovery_lag
    if joining or changed:
        tasks = reconciled.assigned
        response.update(active_tasks=_task_ids(tasks.active), standby_tasks=_task_ids(tasks.standby),
                        warmup_tasks=_task_ids(tasks.warmup))
    if soft.endpoint_epoch != request.endpoint_information_epoch and configured is not None and configured.is_ready:
        response["partitions_by_user_endpoint"] = [
            {"user_endpoint": {"host": e.endpoint.host, "port": e.endpoint.port},
             "active_partitions": [{"topic": t, "partitions": list(ps)} for t, ps in e.active],
             "standby_partitions": [{"topic": t, "partitions": list(ps)} for t, ps in e.standby]}
            for e in partitions_by_user_endpoint(group.members, configured, topic_counts)]
    step.response = response
    if configured is not None:
        step.internal_topics = configured.internal_topics_to_create
    return group, step


def _static_member(group: StreamsGroupState, instance_id: str) -> StreamsGroupMember | None:
    return next((m for m in group.members.values() if m.instance_id == instance_id), None)


def _unknown_instance(instance_id: str) -> CoordinatorError:
    return CoordinatorError(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")


def _fenced_instance(request: StreamsHeartbeat, owner: StreamsGroupMember) -> CoordinatorError:
    return CoordinatorError(ErrorCode.FENCED_INSTANCE_ID, f"Static member {request.member_id} with instance id "
                            f"{request.instance_id} was fenced by member {owner.member_id}.")


def _member(group: StreamsGroupState, request: StreamsHeartbeat, settings: StreamsSettings,
            owned: TasksTuple | None) -> tuple[StreamsGroupMember, StreamsGroupMember | None]:
    """The member the heartbeat is about and, for a static member rejoining under a new member id,
    the member it replaces. Raises before anything is written."""
    joining = request.member_epoch == 0
    instance_id = request.instance_id
    member = group.members.get(request.member_id)
    if instance_id is None:
        if member is None:
            if not joining:
                raise CoordinatorError(ErrorCode.UNKNOWN_MEMBER_ID,
                                       f"Member {request.member_id} is not a member of group {group.group_id}.")
            _check_size(group, settings)
            member = StreamsGroupMember(member_id=request.member_id, process_id=request.process_id or "")
        check_member_epoch(member, request.member_epoch, owned)
        return member, None
    static = _static_member(group, instance_id)
    if not joining:
        if static is None:
            raise _unknown_instance(instance_id)
        if static.member_id != request.member_id:
            raise _fenced_instance(request, static)
        check_member_epoch(static, request.member_epoch, owned)
        return static, None
    if static is None:
        if member is None:
            _check_size(group, settings)
            member = StreamsGroupMember(member_id=request.member_id, process_id=request.process_id or "",
                                        instance_id=instance_id)
        return member, None
    if static.member_epoch != STATIC_LEAVE_EPOCH:
        raise CoordinatorError(ErrorCode.UNRELEASED_INSTANCE_ID, f"Static member {request.member_id} with instance "
                               f"id {instance_id} cannot join the group because the instance id is owned by "
                               f"{static.member_id} member.")
    return msgspec.structs.replace(static, member_id=request.member_id, member_epoch=0, previous_member_epoch=0), static


def _check_size(group: StreamsGroupState, settings: StreamsSettings) -> None:
    if len(group.members) >= settings.max_size:
        raise CoordinatorError(ErrorCode.GROUP_MAX_SIZE_REACHED, "The streams group has reached its maximum "
                               f"capacity of {settings.max_size} members.")


def _leave(group: StreamsGroupState, soft: SoftState, request: StreamsHeartbeat) -> Step:
    """Epoch -1 (leave) or -2 (a static member leaving for a while: it keeps its tasks, pending
    revocation dropped and active tasks' epochs reset to 0, until it comes back or its session
    times out; the group is not bumped)."""
    if request.instance_id is None:
        member = group.members.get(request.member_id)
        if member is None:
            raise CoordinatorError(ErrorCode.UNKNOWN_MEMBER_ID,
                                   f"Member {request.member_id} is not a member of group {group.group_id}.")
    else:
        member = _static_member(group, request.instance_id)
        if member is None:
            raise _unknown_instance(request.instance_id)
        if member.member_id != request.member_id:
            raise _fenced_instance(request, member)
    if request.shutdown_application:
        soft.shutdown_requested_by = request.member_id
    if request.member_epoch == STATIC_LEAVE_EPOCH:
        step = Step()
        leaving = msgspec.structs.replace(
            member, member_epoch=STATIC_LEAVE_EPOCH, pending_revocation=TasksWithEpochs(),
            assigned=TasksWithEpochs(dict.fromkeys(member.assigned.active, 0), member.assigned.standby,
                                     member.assigned.warmup))
        _write(group, step, rec.current_assignment_record(group.group_id, leaving))
    else:
        step = fence(group, soft, member.member_id)
    step.response = {"member_id": request.member_id, "member_epoch": request.member_epoch, "status": []}
    return step


def _epoch_relevant_changed(old: StreamsGroupMember, new: StreamsGroupMember) -> bool:
    return (old.topology_epoch, old.rack_id, old.client_tags, old.process_id) != (
        new.topology_epoch, new.rack_id, new.client_tags, new.process_id)


def _metadata_changed(old: StreamsGroupMember, new: StreamsGroupMember) -> bool:
    return (old.process_id, old.rack_id, old.client_id, old.client_host, old.rebalance_timeout_ms,
            old.topology_epoch, old.user_endpoint, old.client_tags) != (
        new.process_id, new.rack_id, new.client_id, new.client_host, new.rebalance_timeout_ms,
        new.topology_epoch, new.user_endpoint, new.client_tags)


def _track_moves(group: StreamsGroupState, soft: SoftState, now_ms: int, bound_ms: int) -> dict[stall.Move, stall.Progress]:
    """The pending moves' progress after a refinement: the refined warm-ups, with the lags the
    newcomers last reported; a move ends when its newcomer runs the task or no longer gets it."""
    assert soft.refined is not None
    warmups = [(m, task) for m, t in soft.refined[1].items() for task in t.warmup]
    if not warmups and not soft.moves:
        return {}
    ends = group_end_offsets(WarmupMember("", offsets=o) for o in soft.offsets.values())

    def lag_of(move: stall.Move) -> int | None:
        return lag(WarmupMember("", offsets=soft.offsets.get(move[0], MemberTaskOffsets())), move[1], ends)

    def pending(move: stall.Move) -> bool:
        member, target = group.members.get(move[0]), group.targets.get(move[0])
        return member is not None and target is not None and move[1] in target.active \
            and move[1] not in member.assigned.active

    return stall.track(soft.moves, warmups, lag_of, pending, now_ms, bound_ms)


def _refined(group: StreamsGroupState, soft: SoftState, settings: StreamsSettings,
             configured: ConfiguredTopology | None,
             stalled: frozenset[stall.Move] = frozenset()) -> dict[str, TasksTuple] | None:
    if configured is None or not configured.is_ready:
        return None
    members = {m: WarmupMember(x.process_id, x.assigned.tasks(), soft.offsets.get(m, MemberTaskOffsets()))
               for m, x in group.members.items()}
    target = {m: group.targets.get(m, EMPTY) for m in group.members}
    stateful = [s.subtopology_id for s in (configured.subtopologies or {}).values() if s.stateful]
    return refine(members, target, stateful,
                  WarmupConfig(settings.num_warmup_replicas, settings.acceptable_recovery_lag), stalled)
