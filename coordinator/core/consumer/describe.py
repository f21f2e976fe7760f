"""ConsumerGroupDescribe (Kafka's ``consumerGroupDescribe``): groups, members, current and target
assignments by topic id and name."""

from __future__ import annotations

from coordinator.core.effects import Effects
from coordinator.core.errors import CoordinatorError, ErrorCode
from coordinator.core.requests import ConsumerGroupDescribe
from coordinator.core.responses import (
    ConsumerGroupDescribeResponse,
    DescribedConsumerGroup,
    DescribedConsumerGroupMember,
    DescribedTopicPartitions,
)

from .assignment import Assignment
from .context import ConsumerContext
from .targets import TargetAssigner

NONE = ErrorCode.NONE


class Describer:
    def __init__(self, ctx: ConsumerContext, targets: TargetAssigner) -> None:
        self.ctx = ctx
        self.targets = targets

    def describe(self, req: ConsumerGroupDescribe, fx: Effects) -> None:
        fx.reply(req.ref, ConsumerGroupDescribeResponse(tuple(self._describe(gid) for gid in req.group_ids)))

    def _describe(self, group_id: str) -> DescribedConsumerGroup:
        if not group_id:
            return DescribedConsumerGroup(group_id, ErrorCode.INVALID_GROUP_ID)
        try:
            group = self.ctx.existing_group(group_id)
        except CoordinatorError as exc:
            message = f"Group {group_id} not found." if group_id not in self.ctx.groups else exc.message
            return DescribedConsumerGroup(group_id, exc.code, message)
        members = tuple(
            DescribedConsumerGroupMember(
                member_id=m.member_id,
                instance_id=m.instance_id,
                rack_id=m.rack_id,
                member_epoch=group.effective_epoch(m),
                client_id=m.client_id,
                client_host=m.client_host,
                subscribed_topic_names=m.subscribed_topic_names,
                subscribed_topic_regex=m.subscribed_topic_regex,
                assignment=self._described(m.assigned_partitions),
                target_assignment=self._described(group.target(m.member_id)),
                member_type=0 if m.uses_classic_protocol else 1,
            )
            for m in group.members.values()
        )
        return DescribedConsumerGroup(
            group_id,
            NONE,
            group_state=group.state_name,
            group_epoch=group.group_epoch,
            assignment_epoch=group.assignment_epoch,
            assignor_name=self.targets.preferred_assignor(group.members.values()),
            members=members,
        )

    def _described(self, assignment: Assignment) -> tuple[DescribedTopicPartitions, ...]:
        result = []
        for topic_id, partitions in sorted(assignment.items()):
            topic = self.ctx.topics.by_id(topic_id)
            if topic is not None:  # topics no longer in metadata are omitted, as Kafka does
                result.append(DescribedTopicPartitions(topic_id, topic.name, tuple(sorted(partitions))))
        return tuple(result)
