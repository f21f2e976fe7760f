"""Target assignment of KIP-848 groups (Kafka's ``TargetAssignmentBuilder``): which assignor, its
input built from the group, its output turned into target records.

The assignor runs once per group and runtime batch (``heartbeat.py`` decides when); this module
only computes. When the group is homogeneous (every member has the same subscribed names and
regex), the assignor is ``uniform`` and the previous target is valid for the subscribed topics
(what a join or a leave leaves behind), the new target is derived from the previous one
(:mod:`coordinator.core.assignors.uniform_incremental`: same guarantees, only the moved
partitions are touched); any other change runs the full assignor. ``stopwatch`` times the assignor for the ``TargetAssignmentComputed`` event (metrics);
it never influences state.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from uuid import UUID

from coordinator.core.assignors import (
    GroupSpec,
    MemberSubscriptionSpec,
    PartitionAssignor,
    PartitionAssignorError,
    SubscribedTopicMetadata,
    TopicMetadata,
    UniformAssignor,
    consumer_group_assignors,
)
from coordinator.core.assignors.uniform_incremental import rebalance_homogeneous
from coordinator.core.effects import Effects
from coordinator.core.errors import CoordinatorError, ErrorCode
from coordinator.core.events import TargetAssignmentComputed
from coordinator.core.records import Record

from .assignment import Assignment, normalized
from .context import ConsumerContext
from .group import ConsumerGroup
from .member import ConsumerGroupMember
from .records import target_epoch_record, target_member_record


class TargetAssigner:
    def __init__(self, ctx: ConsumerContext) -> None:
        self.ctx = ctx
        self.assignors: dict[str, PartitionAssignor] = {
            a.name: a for a in consumer_group_assignors(ctx.config.consumer_group_assignors)
        }
        self.default_assignor = next(iter(self.assignors))
        # Derive a join's or leave's target from the previous one when that is valid (see
        # ``incremental``); benches turn it off to compare with the full run.
        self.incremental = True

    def preferred_assignor(self, members: Iterable[ConsumerGroupMember]) -> str:
        """Most requested configured ``ServerAssignor`` (ties: config order), else the default."""
        counts: Counter[str] = Counter()
        for m in members:
            if m.server_assignor is not None and m.server_assignor in self.assignors:
                counts[m.server_assignor] += 1
        if not counts:
            return self.default_assignor
        best = max(counts.values())
        return next(name for name in self.assignors if counts.get(name) == best)

    def compute(
        self,
        group: ConsumerGroup,
        group_epoch: int,
        members: Mapping[str, ConsumerGroupMember],
        fx: Effects,
        previous: Mapping[str, Assignment] | None = None,
    ) -> dict[str, Assignment]:
        """Run the assignor for ``members`` (each member's previous target is its current one, or
        ``previous[member]``: a static member taking over another member id's target).

        Raises UNKNOWN_SERVER_ERROR if the assignor fails, as Kafka does."""
        assignor_name = self.preferred_assignor(members.values())
        assignor = self.assignors[assignor_name]
        topics_image = self.ctx.topics
        if self.incremental and isinstance(assignor, UniformAssignor):
            incremental = self._incremental(group, group_epoch, members, assignor_name, fx)
            if incremental is not None:
                return incremental
        by_subscription: dict[tuple[tuple[str, ...], str, frozenset[str] | None], frozenset[UUID]] = {}
        specs: dict[str, MemberSubscriptionSpec] = {}
        for mid, m in members.items():
            key = (m.subscribed_topic_names, m.subscribed_topic_regex, m.regex_topics)
            ids = by_subscription.get(key)
            if ids is None:
                ids = by_subscription[key] = self.ctx.member_topic_ids(m)
            before = previous.get(mid) if previous is not None else None
            specs[mid] = MemberSubscriptionSpec(
                ids, before if before is not None else group.target(mid), m.rack_id, m.instance_id
            )
        topics: dict[UUID, TopicMetadata] = {}
        for ids in by_subscription.values():
            for topic_id in ids:
                if topic_id not in topics:
                    info = topics_image.by_id(topic_id)
                    assert info is not None
                    topics[topic_id] = TopicMetadata(info.name, info.num_partitions)
        started = self.ctx.stopwatch()
        try:
            result = assignor.assign(GroupSpec(specs), SubscribedTopicMetadata(topics))
        except PartitionAssignorError as exc:
            raise CoordinatorError(
                ErrorCode.UNKNOWN_SERVER_ERROR,
                f"Failed to compute a new target assignment for epoch {group_epoch}: {exc}",
            ) from None
        duration_ns = self.ctx.stopwatch() - started
        fx.event(
            TargetAssignmentComputed(
                group.group_id,
                group_epoch,
                assignor_name,
                len(specs),
                sum(t.num_partitions for t in topics.values()),
                duration_ns,
            )
        )
        # Members whose target did not change keep the very same mapping (the assignors hand back
        # their input's frozensets), so ``records`` skips them by identity.
        targets: dict[str, Assignment] = {}
        for mid, spec in specs.items():
            new = result.get(mid, {})
            before = spec.assigned_partitions
            targets[mid] = before if new == before else normalized(new)
        return targets

    def _incremental(
        self,
        group: ConsumerGroup,
        group_epoch: int,
        members: Mapping[str, ConsumerGroupMember],
        assignor_name: str,
        fx: Effects,
    ) -> dict[str, Assignment] | None:
        """The uniform target derived from the previous one, or None (then the full run decides):
        the group is not homogeneous by subscription, or its previous target is not valid."""
        subscriptions = {(m.subscribed_topic_names, m.subscribed_topic_regex, m.regex_topics) for m in members.values()}
        if len(subscriptions) != 1:
            return None
        started = self.ctx.stopwatch()
        counts: dict[UUID, int] = {}
        for topic_id in self.ctx.member_topic_ids(next(iter(members.values()))):
            info = self.ctx.topics.by_id(topic_id)
            assert info is not None
            counts[topic_id] = info.num_partitions
        current = group.target_assignment
        result = rebalance_homogeneous(members, current, counts)
        if result is None:
            return None
        targets: dict[str, Assignment] = {}
        for mid, new in result.items():
            previous = current.get(mid)
            targets[mid] = new if new is previous else normalized(new)
        fx.event(
            TargetAssignmentComputed(
                group.group_id,
                group_epoch,
                assignor_name,
                len(members),
                sum(counts.values()),
                self.ctx.stopwatch() - started,
            )
        )
        return targets

    @staticmethod
    def records(group: ConsumerGroup, group_epoch: int, new_targets: Mapping[str, Assignment]) -> list[Record]:
        """Target members that changed (7), sorted by member id, then the target epoch (6)."""
        gid = group.group_id
        current = group.target_assignment
        records = []
        for mid in sorted(new_targets):
            new = new_targets[mid]
            old = current.get(mid)
            if old is not new and old != new:
                records.append(target_member_record(gid, mid, new))
        records.append(target_epoch_record(gid, group_epoch))
        return records
