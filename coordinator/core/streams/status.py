"""The statuses a StreamsGroupHeartbeat response carries (``Status[]``), recomputed from scratch on
every heartbeat, in the order Kafka's ``streamsGroupHeartbeat`` adds them:

STALE_TOPOLOGY (the member's topology epoch is behind the group's), ASSIGNMENT_DELAYED (initial
rebalance delay or assignment interval), the topology's one topic status (missing source topics,
incorrectly partitioned, missing internal topics), SHUTDOWN_APPLICATION (some member asked: every
member hears it until the group is empty), MISSING_CLIENT_TAGS (only to request v1 and up: v0
clients throw on an unknown code).
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import Enum

from .topology import ConfiguredTopology, Status


class Delay(Enum):
    INITIAL_REBALANCE = "Assignment delayed due to the configured initial rebalance delay."
    ASSIGNMENT_INTERVAL = "Assignment delayed due to the configured assignment interval."


def heartbeat_statuses(*, group_topology_epoch: int | None, member_topology_epoch: int, delay: Delay | None,
                       configured: ConfiguredTopology | None, shutdown_requested_by: str | None,
                       rack_aware_tags: Iterable[str], member_tags: Iterable[str],
                       api_version: int) -> list[tuple[int, str]]:
    statuses: list[tuple[int, str]] = []
    if group_topology_epoch is not None and member_topology_epoch < group_topology_epoch:
        statuses.append((Status.STALE_TOPOLOGY, f"The member's topology epoch {member_topology_epoch} is behind "
                                                f"the group's topology epoch {group_topology_epoch}."))
    if delay is not None:
        statuses.append((Status.ASSIGNMENT_DELAYED, delay.value))
    if configured is not None and configured.status is not None:
        statuses.append((configured.status, configured.status_detail))
    if shutdown_requested_by is not None:
        statuses.append((Status.SHUTDOWN_APPLICATION, f"Streams group member {shutdown_requested_by} encountered a "
                                                      "fatal error and requested a shutdown for the entire "
                                                      "application."))
    required = [t for t in rack_aware_tags if t]
    if api_version >= 1 and required:
        have = set(member_tags)
        missing = [t for t in required if t not in have]
        if missing:
            statuses.append((Status.MISSING_CLIENT_TAGS, "Missing required client tags for rack-aware standby "
                                                         f"assignment: [{', '.join(missing)}]. Configure them via "
                                                         "'client.tag.<tagKey>' in your Streams config."))
    return statuses
