"""A new target assignment for a streams group and its records (Kafka's streams
``TargetAssignmentBuilder`` and ``maybeUpdateStreamsTargetAssignment``, from the assignor run on).

The assignor sees each member's process, the tasks it is assigned now (Kafka 4.4+: current, not
the previous target) and the task offsets it reported. A topology that is not ready gives every
member an empty target. Records: one ``StreamsGroupTargetAssignmentMember`` per member whose target
changed (always for a member without one), then ``StreamsGroupTargetAssignmentMetadata`` with the
group epoch and the time it was computed.
"""

from __future__ import annotations

from collections.abc import Mapping

from .assignor import AssignorMember, SubtopologySpec, assign
from .group import StreamsGroupState
from .records import StreamsRecord, target_epoch_record, target_member_record
from .tasks import EMPTY, TasksTuple
from .topology import ConfiguredTopology
from .warmup import MemberTaskOffsets


def assignor_input(configured: ConfiguredTopology) -> dict[str, SubtopologySpec]:
    return {s.subtopology_id: SubtopologySpec(s.number_of_tasks, s.stateful)
            for s in (configured.subtopologies or {}).values()}


def compute_target(group: StreamsGroupState, configured: ConfiguredTopology,
                   offsets: Mapping[str, MemberTaskOffsets], num_standby_replicas: int,
                   now_ms: int) -> tuple[dict[str, TasksTuple], list[StreamsRecord]]:
    """The target for the group's epoch, and the records that persist it."""
    if configured.is_ready:
        members = {
            m: AssignorMember(x.process_id, frozenset(x.assigned.active), x.assigned.standby,
                              dict(offsets[m].offsets) if m in offsets else {})
            for m, x in group.members.items()}
        target = assign(members, assignor_input(configured), num_standby_replicas)
    else:
        target = {m: EMPTY for m in group.members}
    records = [target_member_record(group.group_id, m, t) for m, t in sorted(target.items())
               if group.targets.get(m) != t]
    records.append(target_epoch_record(group.group_id, group.group_epoch, now_ms))
    return target, records
