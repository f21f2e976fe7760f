"""The consumer-group (KIP-848) type's registration with the shard: its parts, wired once.

``register(ctx)`` is the one line ``shard.GROUP_TYPES`` lists. The parts, by job:
``heartbeat.Heartbeats`` (ConsumerGroupHeartbeat, the waiting heartbeats of a batch),
``membership.Membership`` (leaving, fencing, timers, load, topic changes), ``targets.TargetAssigner``,
``describe.Describer`` (ConsumerGroupDescribe), ``replay.Replayer`` (records 3, 5, 6, 7, 8),
``migration.Migration`` (online upgrade and downgrade) and ``classic_members.ClassicMembers``
(JoinGroup, SyncGroup, Heartbeat and LeaveGroup of classic members inside a consumer group, which
the classic type hands over through ``ShardContext.bridges``).
"""

from __future__ import annotations

from collections import Counter
from uuid import UUID

from coordinator.core.registry import Gauge, Registration, ShardContext
from coordinator.core.requests import ConsumerGroupDescribe, ConsumerGroupHeartbeat
from coordinator.core.responses import (
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatResponse,
    DescribedConsumerGroup,
)

from .classic_members import ClassicMembers
from .context import JOIN_TIMER, REBALANCE_TIMER, SESSION_TIMER, SYNC_TIMER, ConsumerContext
from .describe import Describer
from .heartbeat import Heartbeats
from .member import ConsumerGroupMember
from .membership import Membership
from .migration import Migration
from .replay import RECORD_KEYS, Replayer
from .schema import RECORD_TYPES
from .targets import TargetAssigner


class ConsumerGroupType:
    """The consumer-group type of one shard: its parts and its registration."""

    def __init__(self, ctx: ShardContext) -> None:
        self.ctx = ConsumerContext(ctx.config, ctx.groups, ctx.topics, ctx.stopwatch, ctx.bridges, ctx.group_configs)
        self.targets = TargetAssigner(self.ctx)
        self.migration = Migration(self.ctx)
        self.membership = Membership(self.ctx, self.migration)
        self.heartbeats = Heartbeats(self.ctx, self.targets, self.membership, self.migration)
        self.classic_members = ClassicMembers(self.ctx, self.targets, self.membership, self.migration)
        self.describer = Describer(self.ctx, self.targets)
        self.replayer = Replayer(self.ctx)
        replay = self.replayer.replay
        self.registration = Registration(
            name="consumer",
            record_types=RECORD_TYPES,
            requests={
                ConsumerGroupHeartbeat: self.heartbeats.heartbeat,
                ConsumerGroupDescribe: self.describer.describe,
            },
            error_responses={
                ConsumerGroupHeartbeat: lambda req, code: ConsumerGroupHeartbeatResponse(code),
                ConsumerGroupDescribe: lambda req, code: ConsumerGroupDescribeResponse(
                    tuple(DescribedConsumerGroup(g, code) for g in req.group_ids)
                ),
            },
            timers={
                SESSION_TIMER: self.membership.on_session_timer,
                REBALANCE_TIMER: self.membership.on_rebalance_timer,
                JOIN_TIMER: self.membership.on_join_timer,
                SYNC_TIMER: self.membership.on_sync_timer,
            },
            replayers=dict.fromkeys(RECORD_KEYS, replay),
            on_loaded=self.membership.on_loaded,
            on_topics_changed=self.membership.on_topics_changed,
            after_apply=self.replayer.report_state_changes,
            waiting=self.heartbeats.has_waiting,
            before_event=self.heartbeats.before_event,
            end_of_batch=self.heartbeats.end_of_batch,
            abandon=self.heartbeats.abandon,
            hosted_requests=self.classic_members.hosted(),
            replayed_downgrade=self.replayer.replayed_downgrade,
            gauges=(Gauge("coordinator_consumer_members", "Consumer-group (KIP-848) members by reconciliation state.",
                          ("state",), lambda: {(state,): n for state, n in self.members_by_state().items()}),),
        )

    # ---- read-only views (metrics, tests) ---------------------------------------------------------

    def members_by_state(self) -> dict[str, int]:
        """Member reconciliation state name -> members, over every consumer group (for gauges).

        Members that left temporarily (static, epoch -2) count as "LEFT_TEMPORARILY"."""
        counts: Counter[str] = Counter()
        for group in self.ctx.consumer_groups():
            for member in group.members.values():
                counts["LEFT_TEMPORARILY" if member.member_epoch == -2 else member.state.name] += 1
        return dict(counts)

    def member_topic_ids(self, member: ConsumerGroupMember) -> frozenset[UUID]:
        return self.ctx.member_topic_ids(member)


def register(ctx: ShardContext) -> ConsumerGroupType:
    return ConsumerGroupType(ctx)


__all__ = ["ConsumerGroupType", "register"]
