"""The version-free StreamsGroupHeartbeat request (v0 and v1 carry the same fields) and the checks
Kafka's ``GroupCoordinatorService`` makes before the group sees it (``throwIfStreamsGroupHeartbeat
RequestIsInvalid`` and the unsupported-feature checks), with Kafka's messages.

The API adapter (``runtime/apis/streams_groups.py``) builds a ``StreamsHeartbeat`` from the decoded request: task
lists become task sets (None stays None: "unchanged"), the topology becomes the
``StreamsGroupTopology`` record value (its shape, as Kafka's ``convertToStreamsGroupTopologyRecord``
does), offsets become (subtopology, partition, offset) triples.
"""

from __future__ import annotations

import msgspec

from ..errors import CoordinatorError, ErrorCode
from .member import Endpoint
from .records import StreamsGroupTopologyValue
from .tasks import Task, TasksTuple
from .topology import check_topology_names, check_topology_shape

JOIN_EPOCH = 0
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2


class StreamsHeartbeat(msgspec.Struct, frozen=True):
    group_id: str
    member_id: str
    member_epoch: int
    endpoint_information_epoch: int = 0
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    topology: StreamsGroupTopologyValue | None = None
    active_tasks: frozenset[Task] | None = None
    standby_tasks: frozenset[Task] | None = None
    warmup_tasks: frozenset[Task] | None = None
    process_id: str | None = None
    user_endpoint: Endpoint | None = None
    client_tags: tuple[tuple[str, str], ...] | None = None
    task_offsets: tuple[tuple[str, int, int], ...] | None = None
    task_end_offsets: tuple[tuple[str, int, int], ...] | None = None
    shutdown_application: bool = False
    api_version: int = 0

    def owned(self) -> TasksTuple | None:
        """The tasks the member reports it holds, or None when the request carried no lists."""
        if self.active_tasks is None or self.standby_tasks is None or self.warmup_tasks is None:
            return None
        return TasksTuple(self.active_tasks, self.standby_tasks, self.warmup_tasks)


def _invalid(message: str) -> CoordinatorError:
    return CoordinatorError(ErrorCode.INVALID_REQUEST, message)


def check_heartbeat(request: StreamsHeartbeat) -> None:
    """Raise CoordinatorError (INVALID_REQUEST, or STREAMS_INVALID_TOPOLOGY for the topology) for a
    request Kafka refuses before the group sees it, in Kafka's order. Static members and task
    offsets are served (Kafka 4.4+), as is a non-empty WarmupTasks list."""
    if request.topology is not None:
        check_topology_names(request.topology)
    if not request.member_id.strip():
        raise _invalid("MemberId can't be empty.")
    if not request.group_id.strip():
        raise _invalid("GroupId can't be empty.")
    if request.instance_id is not None and not request.instance_id.strip():
        raise _invalid("InstanceId can't be empty.")
    if request.rack_id is not None and not request.rack_id.strip():
        raise _invalid("RackId can't be empty.")
    lists = (request.active_tasks, request.standby_tasks, request.warmup_tasks)
    if request.member_epoch == JOIN_EPOCH:
        if request.rebalance_timeout_ms == -1:
            raise _invalid("RebalanceTimeoutMs must be provided in first request.")
        for name, tasks in zip(("ActiveTasks", "StandbyTasks", "WarmupTasks"), lists, strict=True):
            if tasks:
                raise _invalid(f"{name} must be empty when (re-)joining.")
        if request.topology is None:
            raise _invalid("Topology must be non-null when (re-)joining.")
        check_topology_shape(request.topology)
    elif request.member_epoch == STATIC_LEAVE_EPOCH:
        if request.instance_id is None:
            raise _invalid("InstanceId can't be null.")
    elif request.member_epoch < STATIC_LEAVE_EPOCH:
        raise _invalid(f"MemberEpoch is {request.member_epoch}, but must be greater than or equal to -2.")
    if any(t is None for t in lists) and any(t is not None for t in lists):
        raise _invalid("If one task-type is non-null, all must be non-null.")
    if request.member_epoch != JOIN_EPOCH and request.topology is not None:
        raise _invalid("Topology can only be provided when (re-)joining.")
