"""Group metrics: counters fed by the core's domain events and gauges read from the shard at scrape.

Labels stay bounded (group type and state, reason); per-group labels exist only when
`metrics.group.labels.enable` is set.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import REGISTRY, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from ..core import events
from ..core.registry import Gauge
from ..core.shard import CoordinatorShard

REBALANCES_STARTED = Counter("coordinator_rebalances_started", "Rebalances started, by group type.", ["group_type"])
REBALANCES_COMPLETED = Counter("coordinator_rebalances_completed", "Rebalances completed, by group type.", ["group_type"])
REBALANCE_DURATION = Histogram(
    "coordinator_rebalance_duration_seconds", "From a rebalance's start to the group being stable.", ["group_type"],
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300),
)
MEMBERS_JOINED = Counter("coordinator_members_joined", "Members admitted to a group.", ["group_type"])
MEMBERS_LEFT = Counter("coordinator_members_left", "Members removed from a group, by reason.", ["group_type", "reason"])
SESSION_EXPIRATIONS = Counter("coordinator_session_expirations", "Members removed because their session expired.", ["group_type"])
OFFSETS_COMMITTED = Counter("coordinator_offsets_committed", "Partition offsets committed.")
OFFSETS_DELETED = Counter("coordinator_offsets_deleted", "Partition offsets removed, by reason.", ["reason"])
GROUPS_DELETED = Counter("coordinator_groups_deleted", "Groups removed, by reason.", ["group_type", "reason"])
ASSIGNMENTS_COMPUTED = Counter(
    "coordinator_consumer_target_assignments", "Target assignments computed for consumer groups, by assignor.", ["assignor"])
ASSIGNMENT_DURATION = Histogram(
    "coordinator_consumer_target_assignment_duration_seconds", "Time the server-side assignor took, by assignor.",
    ["assignor"], buckets=(0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5),
)
PARTITIONS_ASSIGNED = Counter(
    "coordinator_consumer_partitions_assigned", "Partitions given to consumer-group members (usable at once).")
PARTITIONS_REVOKED = Counter(
    "coordinator_consumer_partitions_revoked", "Partitions consumer-group members were told to stop using.")
MEMBERS_FENCED = Counter(
    "coordinator_consumer_members_fenced", "Consumer-group members removed by the coordinator, by reason.", ["reason"])
STREAMS_WARMUPS_STARTED = Counter(
    "coordinator_streams_warmups_started", "Warm-up tasks given to streams-group members (restoring while the "
    "active task keeps running elsewhere).")
STREAMS_WARMUPS_PROMOTED = Counter(
    "coordinator_streams_warmups_promoted", "Warm-up tasks that caught up and became the member's active task.")
SHARE_RECORDS_ACQUIRED = Counter(
    "coordinator_share_records_acquired", "Share-group records handed to a consumer under a lock (each delivery).")
SHARE_RECORDS_ACKNOWLEDGED = Counter(
    "coordinator_share_records_acknowledged", "Share-group records acknowledged (accepted) by a consumer.")
SHARE_RECORDS_RELEASED = Counter(
    "coordinator_share_records_released", "Share-group records made available again by a consumer's release or "
    "its share session or connection ending.")
SHARE_RECORDS_ARCHIVED = Counter(
    "coordinator_share_records_archived", "Share-group records set aside for good: rejected, past the delivery "
    "limit, or of an aborted transaction.")
SHARE_RECORDS_LOCK_EXPIRED = Counter(
    "coordinator_share_records_lock_expired", "Share-group records whose acquisition lock ran out before an "
    "acknowledgement.")
GROUP_OFFSETS_COMMITTED = Counter("coordinator_group_offsets_committed", "Offsets committed per group (only with metrics.group.labels.enable).", ["group"])


def observer(per_group_labels: bool) -> Callable[[object], None]:
    def observe(event: object) -> None:
        match event:
            # The most frequent event first (one per accepted commit): a match tries its cases in
            # order, and the event types are disjoint.
            case events.OffsetsCommitted(group_id=group_id, count=count):
                OFFSETS_COMMITTED.inc(count)
                if per_group_labels:
                    GROUP_OFFSETS_COMMITTED.labels(group_id).inc(count)
            case events.RebalanceStarted(group_type=group_type):
                REBALANCES_STARTED.labels(group_type).inc()
            case events.RebalanceCompleted(duration_ms=duration_ms):
                group_type = event.group_type
                REBALANCES_COMPLETED.labels(group_type).inc()
                REBALANCE_DURATION.labels(group_type).observe(duration_ms / 1000)
            case events.MemberJoined():
                MEMBERS_JOINED.labels(event.group_type).inc()
            case events.MemberLeft(reason=reason):
                MEMBERS_LEFT.labels(event.group_type, reason).inc()
            case events.SessionExpired():
                SESSION_EXPIRATIONS.labels(event.group_type).inc()
            case events.OffsetsDeleted(count=count, reason=reason):
                OFFSETS_DELETED.labels(reason).inc(count)
            case events.GroupDeleted(group_type=group_type, reason=reason):
                GROUPS_DELETED.labels(group_type, reason).inc()
            case events.TargetAssignmentComputed(assignor=assignor, duration_ns=duration_ns):
                ASSIGNMENTS_COMPUTED.labels(assignor).inc()
                ASSIGNMENT_DURATION.labels(assignor).observe(duration_ns / 1e9)
            case events.MemberAssignmentChanged(assigned=assigned, revoked=revoked):
                if assigned:
                    PARTITIONS_ASSIGNED.inc(assigned)
                if revoked:
                    PARTITIONS_REVOKED.inc(revoked)
            case events.MemberFenced(reason=reason):
                MEMBERS_FENCED.labels(reason).inc()
            case events.WarmupTasksChanged(started=started, promoted=promoted):
                if started:
                    STREAMS_WARMUPS_STARTED.inc(started)
                if promoted:
                    STREAMS_WARMUPS_PROMOTED.inc(promoted)
            case events.ShareRecordsChanged():
                for counter, count in ((SHARE_RECORDS_ACQUIRED, event.acquired),
                                       (SHARE_RECORDS_ACKNOWLEDGED, event.acknowledged),
                                       (SHARE_RECORDS_RELEASED, event.released),
                                       (SHARE_RECORDS_ARCHIVED, event.archived),
                                       (SHARE_RECORDS_LOCK_EXPIRED, event.lock_expired)):
                    if count:
                        counter.inc(count)
            case _:
                pass

    return observe


@functools.cache
def _idle_gauges() -> tuple[Gauge, ...]:
    return CoordinatorShard().gauges


class ShardCollector(Collector):
    """Reads group and member counts from the live shard at scrape time."""

    def __init__(self, shard: Callable[[], Any]) -> None:
        self._shard = shard

    def collect(self) -> Iterator[GaugeMetricFamily]:
        groups = GaugeMetricFamily("coordinator_groups", "Groups by type and state.", labels=["group_type", "state"])
        members = GaugeMetricFamily("coordinator_members", "Members by group type.", labels=["group_type"])
        runtime = self._shard()
        declared: list[GaugeMetricFamily] = []
        # Each group type's own gauges (core/registry.py, Gauge); with no shard loaded, those of
        # the built-in types, without samples (the families exist before the log is loaded).
        for gauge in runtime.core.gauges if runtime is not None else _idle_gauges():
            family = GaugeMetricFamily(gauge.name, gauge.doc, labels=list(gauge.labels))
            for labels, value in sorted(gauge.samples().items()):
                family.add_metric(list(labels), value)
            declared.append(family)
        if runtime is not None:
            for (state, group_type), count in sorted(runtime.core.groups_by_state_and_type().items()):
                groups.add_metric([group_type, state], count)
            by_type: dict[str, int] = {}
            for group in runtime.core.groups.values():
                by_type[group.group_type] = by_type.get(group.group_type, 0) + len(group.members)
            for group_type, count in sorted(by_type.items()):
                members.add_metric([group_type], count)
        yield groups
        yield members
        yield from declared


_collector: ShardCollector | None = None


def register_shard(shard: Callable[[], Any]) -> None:
    """Point the scrape-time gauges at the current shard (re-pointed, not re-registered, on restart)."""
    global _collector
    if _collector is None:
        _collector = ShardCollector(shard)
        REGISTRY.register(_collector)
    else:
        _collector._shard = shard
