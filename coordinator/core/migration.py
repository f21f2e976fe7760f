"""Online migration between the classic and the consumer (KIP-848) protocol: the neutral
description of a classic-protocol group that the two group types hand each other, and the bridges
through which one type reaches the other's capabilities without importing it.

Theory of operation (Kafka 4.x, ``GroupMetadataManager``; ``group.consumer.migration.policy``)
=============================================================================================

Upgrade (classic -> consumer). The first ConsumerGroupHeartbeat (epoch 0) for the id of a NON-empty
classic group converts it, if the policy allows upgrades, its protocol type is "consumer", it is not
larger than ``group.consumer.max.size``, and every member's embedded protocol can be read (an
assignment carrying a custom assignor's UserData cannot survive: refused). A refusal is
GROUP_ID_NOT_FOUND with Kafka's message. The classic type *releases* the group
(:attr:`Bridges.release_classic`: its parked JoinGroup/SyncGroup requests are answered
REBALANCE_IN_PROGRESS, its timers cancelled) and describes it (:class:`ClassicGroupView`); the
consumer type writes the classic tombstone, then a consumer group with group epoch = assignment
epoch = the classic generation, every classic member STABLE at that epoch holding its last classic
assignment (as target too), with its classic metadata (session timeout, supported protocols). Then
the heartbeat goes on as any join: the new member's subscription bumps the group epoch and a new
target is computed. An EMPTY classic group is always replaced (offline), whatever the policy.

Mixed group. Classic members of a consumer group are served by the consumer type
(:attr:`Bridges.hosted`, ``consumer/classic_members.py``): JoinGroup reconciles them towards the
target like a heartbeat (their subscription's owned partitions say what they still own),
SyncGroup hands them their assigned partitions, Heartbeat answers REBALANCE_IN_PROGRESS when they
must rejoin (to give partitions up or to take new ones), LeaveGroup fences them.

Downgrade (consumer -> classic). When the members leaving (LeaveGroup, a -1 heartbeat, an expired
session, join, sync or rebalance timer) would leave only classic members, at least one, and the
policy allows downgrades and the group fits ``group.max.size``, the consumer type writes the
consumer group's tombstones and asks the classic type to adopt a :class:`ClassicGroupView`
(:attr:`Bridges.adopt_classic`): a Stable classic group at generation = group epoch, each member
with what it holds (Kafka: its target; see ``consumer/migration.py`` for why), which then
rebalances. Also when a classic static member replaces the
last consumer-protocol one. An EMPTY consumer group is always replaced by a JoinGroup (offline).

The rebalance after a downgrade is soft state, as in Kafka; the log holds only the Stable classic
group. A restart before it completes would load that group with nobody told to rejoin, and the
partitions of the members that left would stay unassigned. So replay recognises a downgrade's
GroupMetadata (it follows, in the same entry, the tombstones of a consumer group removed with
members, at the generation of that group's epoch) and what its rebalance was owed for (a member
left; a static member replaced one while the target was stale or with another subscription):
:attr:`Bridges.replayed_downgrade`; the classic type's ``on_loaded`` starts the rebalance again. No
record says so: once compaction has dropped the tombstones (``delete.retention.ms`` after the
downgrade), a group whose rebalance has still not completed loads without it.

Every step is records in one log entry (tombstones of the old type, records of the new one), so a
replay rebuilds exactly what the clients were told, and a standby that takes over mid-migration
has every member.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from coordinator.core.effects import Effects
from coordinator.core.groups import Group

CONSUMER_PROTOCOL_TYPE = "consumer"

Protocols = tuple[tuple[str, bytes], ...]
"""(protocol name, ConsumerProtocolSubscription bytes) in the member's preference order."""


@dataclass(frozen=True, slots=True)
class ClassicMemberView:
    """A member speaking the classic protocol, as either group type holds it."""

    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocols: Protocols
    assignment: bytes  # its ConsumerProtocolAssignment ("" = none yet)


@dataclass(frozen=True, slots=True)
class ClassicGroupView:
    """A classic-protocol group: what the upgrade reads and what the downgrade builds."""

    group_id: str
    generation: int
    protocol_type: str | None
    protocol_name: str | None  # None before the group's first rebalance completed
    members: tuple[ClassicMemberView, ...]


HostedHandler = Callable[[Group, Any, Effects], None]
"""(the group of the hosting type, a request of another protocol, effects)."""


@dataclass(slots=True)
class Bridges:
    """How one group type reaches another's capabilities (filled by the shard from the types'
    registrations once all of them are built; ``registry.Registration`` declares them)."""

    hosted: dict[tuple[str, type], HostedHandler] = field(default_factory=dict)
    """(group type, request type) -> the handler of that type for requests of ANOTHER protocol
    addressed to one of its groups (a JoinGroup for a consumer group)."""
    classic_view: Callable[[Group], ClassicGroupView | None] | None = None
    """The classic type's description of one of its groups (pure read); None for a group that is
    not one of its own."""
    release_classic: Callable[[Group, Effects], None] | None = None
    """The classic type gives a group up for an upgrade: parked requests answered, timers cancelled.
    Its records (the group's tombstone) are the caller's."""
    adopt_classic: Callable[[ClassicGroupView, str | None, Effects], None] | None = None
    """The classic type takes a downgraded group in: writes its GroupMetadata, installs it, arms its
    members' sessions, and prepares a rebalance for the reason given (None: none)."""
    replayed_downgrade: Callable[[Group], str | None] | None = None
    """Replay only (the consumer type): for a classic group just rebuilt from a GroupMetadata record,
    the rebalance the downgrade that wrote it prepared (its reason), if the record is a downgrade's
    that prepared one; else None. The rebalance lives in memory only (as in
    Kafka), so a restart before it completes would lose it; the classic type starts it again once
    the log is loaded. See ``consumer/replay.py`` for how a downgrade is recognised."""

    def handler(self, group: Group, request: object) -> HostedHandler | None:
        return self.hosted.get((group.group_type, type(request)))


def downgrade_reason(group_id: str) -> str:
    """The reason of the rebalance a downgrade prepares because members left (Kafka's wording)."""
    return f"Downgrade group {group_id} from consumer to classic for member leaving."


def stale_downgrade_reason(group_id: str) -> str:
    """The reason of the rebalance a downgrade by a static member's replacement prepares."""
    return f"Downgrade group {group_id} from consumer to classic with stale assignment."


def select_protocol(members: Iterable[Protocols]) -> str:
    """The protocol a classic group of these members uses (Kafka's ``ClassicGroup.selectProtocol``):
    among the names every member supports, each member votes for the one it prefers most; most
    votes wins, ties to the name voted for first (members in order). Raises ValueError when the
    members share no protocol."""
    lists = [tuple(name for name, _ in protocols) for protocols in members]
    if not lists:
        raise ValueError("no members")
    candidates = set(lists[0]).intersection(*lists[1:])
    if not candidates:
        raise ValueError("the members support no common protocol")
    votes: Counter[str] = Counter(next(name for name in names if name in candidates) for names in lists)
    return max(votes, key=lambda name: votes[name])


__all__ = [
    "CONSUMER_PROTOCOL_TYPE",
    "Bridges",
    "ClassicGroupView",
    "ClassicMemberView",
    "HostedHandler",
    "Protocols",
    "downgrade_reason",
    "select_protocol",
    "stale_downgrade_reason",
]
