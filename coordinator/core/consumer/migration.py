"""The consumer type's half of the online migration (``coordinator/core/migration.py`` has the
theory of operation): converting a live classic group into a consumer group on the first
ConsumerGroupHeartbeat (Kafka's ``validateOnlineUpgrade``, ``convertToConsumerGroup``,
``ConsumerGroup.fromClassicGroup``), and a consumer group back into a classic group when only
classic members would be left (``validateOnlineDowngrade*``, ``convertToClassicGroup``,
``ClassicGroup.fromConsumerGroup``).

Both directions only compute and write records (and, through the bridges, what the classic type
does to its own groups); the consumer group itself changes by replay, as always.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from types import MappingProxyType
from uuid import UUID

from coordinator.core.consumer.schema import ClassicMemberMetadata
from coordinator.core.consumer_protocol import (
    read_assignment,
    read_subscription,
    read_version,
    write_assignment,
)
from coordinator.core.effects import Effects
from coordinator.core.errors import CoordinatorError, ErrorCode
from coordinator.core.events import MemberLeft
from coordinator.core.groups import Group
from coordinator.core.migration import (
    CONSUMER_PROTOCOL_TYPE,
    ClassicGroupView,
    ClassicMemberView,
    select_protocol,
)
from coordinator.core.record_codec import Record

from .assignment import NO_PARTITIONS, Assignment, at_one_epoch, normalized
from .context import ConsumerContext, member_timer_keys, session_timer_key
from .group import ConsumerGroup
from .member import ConsumerGroupMember, MemberState
from .records import (
    current_assignment_record,
    group_epoch_record,
    member_metadata_record,
    target_epoch_record,
    target_member_record,
)
from .replay import apply_to

BUILT_IN_ASSIGNORS = frozenset({"range", "roundrobin", "sticky", "cooperative-sticky"})
"""The classic protocol names of the clients' own assignors (Java's and librdkafka's)."""

Commit = Callable[[Effects], None]
"""What an accepted conversion does besides its records, once the request cannot fail any more."""


def held(member: ConsumerGroupMember) -> Assignment:
    """Everything the member may still own: its assigned and pending-revocation partitions."""
    if not member.partitions_pending_revocation:
        return member.assigned_partitions
    union = {t: set(ps) for t, ps in member.assigned_partitions.items()}
    for topic_id, partitions in member.partitions_pending_revocation.items():
        union.setdefault(topic_id, set()).update(partitions)
    return normalized(union)


def _not_found(message: str) -> CoordinatorError:
    return CoordinatorError(ErrorCode.GROUP_ID_NOT_FOUND, message)


class Migration:
    def __init__(self, ctx: ConsumerContext) -> None:
        self.ctx = ctx

    # ---- upgrade: classic -> consumer ------------------------------------------------------------

    def upgrade(self, existing: Group, records: list[Record]) -> tuple[ConsumerGroup, Commit]:
        """Convert the live classic group ``existing`` for a joining ConsumerGroupHeartbeat.

        Appends the conversion's records to ``records`` and returns the converted group as its
        replay will build it (detached: the shard's namespace changes when the records are
        replayed) and what to do once the heartbeat is accepted (release the classic group, arm
        the converted members' sessions). Raises GROUP_ID_NOT_FOUND with Kafka's message when the
        group cannot be converted; then nothing happened."""
        gid = existing.group_id
        bridges = self.ctx.bridges
        view = bridges.classic_view(existing) if bridges.classic_view is not None else None
        if view is None:
            raise _not_found(f"Group {gid} is not a consumer group.")
        config = self.ctx.config
        if not config.consumer_group_migration_policy.upgrade_enabled:
            raise _not_found(f"Cannot upgrade classic group {gid} to consumer group because online upgrade is disabled.")
        if view.protocol_type != CONSUMER_PROTOCOL_TYPE:
            raise _not_found(
                f"Cannot upgrade classic group {gid} to consumer group because the group does not use the "
                "consumer embedded protocol."
            )
        if len(view.members) > config.consumer_group_max_size:
            raise _not_found(
                f"Cannot upgrade classic group {gid} to consumer group because the group size exceeds the "
                "consumer group maximum size."
            )
        if view.protocol_name is None:
            # Kafka reads ``protocolName().get()`` here and fails with an internal error: a group that
            # never completed a rebalance has no protocol (and no assignment) to convert yet.
            raise _not_found(
                f"Cannot upgrade classic group {gid} to consumer group because it has not completed its "
                "first rebalance."
            )
        group = self.ctx.new_group(gid)
        conversion = self._conversion_records(view, view.protocol_name)
        for record in conversion:
            apply_to(group, record)  # replay's own code builds the group the heartbeat reads
        records += existing.tombstones()
        records += conversion

        def commit(fx: Effects) -> None:
            assert bridges.release_classic is not None
            bridges.release_classic(existing, fx)
            for member in group.members.values():
                fx.schedule(session_timer_key(gid, member.member_id), self.ctx.member_session_timeout_ms(gid, member))

        return group, commit

    def _conversion_records(self, view: ClassicGroupView, protocol: str) -> list[Record]:
        """Kafka's ``createConsumerGroupRecords`` for the group ``fromClassicGroup`` builds: every
        member STABLE at the classic generation, holding its last classic assignment, which is its
        target too.

        One difference: a member also holds the partitions its subscription says it owned when it
        last joined (``OwnedPartitions``) that nobody's assignment names. Between a cooperative
        rebalance's SyncGroup and a follower hearing its answer, the follower still owns what the
        new assignment took away (and nobody else was given it in that generation); Kafka's
        conversion would take it as free and could hand it to the joining member at once. Held by
        its owner, it moves only once the member's next JoinGroup says it is gone."""
        gid = view.group_id
        generation = view.generation
        subscriptions = {}
        for m in view.members:
            metadata = dict(m.protocols).get(protocol)
            try:
                if metadata is None:
                    raise ValueError(f"member {m.member_id} has no metadata for protocol {protocol}")
                subscriptions[m.member_id] = read_subscription(metadata)
            except ValueError:
                raise self._malformed(gid) from None
        owners: dict[tuple[UUID, int], str] = {}
        for m in view.members:
            for topic_id, partitions in self._classic_assignment(gid, m, protocol).items():
                for p in partitions:
                    other = owners.setdefault((topic_id, p), m.member_id)
                    if other != m.member_id:
                        raise _not_found(
                            f"Cannot upgrade classic group {gid} to consumer group because members {other} and "
                            f"{m.member_id} are both assigned partition {p} of topic {topic_id}."
                        )
        for m in view.members:
            for name, partitions in subscriptions[m.member_id].owned_partitions.items():
                info = self.ctx.topics.by_name(name)
                if info is not None:
                    for p in partitions:
                        if p < info.num_partitions:
                            owners.setdefault((info.topic_id, p), m.member_id)
        holds: dict[str, dict[UUID, set[int]]] = {m.member_id: {} for m in view.members}
        for (topic_id, p), member_id in owners.items():
            holds[member_id].setdefault(topic_id, set()).add(p)
        members: list[ConsumerGroupMember] = []
        for m in view.members:
            subscription = subscriptions[m.member_id]
            assigned = normalized(holds[m.member_id])
            members.append(
                ConsumerGroupMember(
                    m.member_id,
                    instance_id=m.instance_id,
                    rack_id=subscription.rack_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    subscribed_topic_names=tuple(sorted(set(subscription.topics))),
                    rebalance_timeout_ms=m.rebalance_timeout_ms,
                    classic=ClassicMemberMetadata(m.session_timeout_ms, m.protocols),
                    member_epoch=generation,
                    previous_member_epoch=generation,
                    state=MemberState.STABLE,
                    assigned_partitions=assigned,
                    assignment_epochs=at_one_epoch(assigned, generation),
                )
            )
        names = {name for member in members for name in member.subscribed_topic_names}
        records = [member_metadata_record(gid, member) for member in members]
        records.append(group_epoch_record(gid, generation, self.ctx.topics.metadata_hash(names)))
        records += [target_member_record(gid, member.member_id, member.assigned_partitions) for member in members]
        records.append(target_epoch_record(gid, generation))
        records += [current_assignment_record(gid, member) for member in members]
        return records

    def _classic_assignment(self, gid: str, member: ClassicMemberView, protocol: str) -> Assignment:
        """A classic member's last assignment by topic id (topics no longer known are dropped, as
        Kafka's ``toTopicPartitionMap``). Empty bytes are no assignment yet (KAFKA-17733).

        UserData refuses the upgrade (KAFKA-18134: a custom assignor's state would be lost), except
        with the clients' own assignors: librdkafka's leader copies each member's subscription
        UserData (its sticky assignor's previous assignment and generation) into the member's
        assignment, so Kafka refuses to upgrade any group a librdkafka cooperative-sticky consumer
        leads. That state only makes the leader's next assignment sticky; the consumer protocol
        assigns on the server, and a classic group formed again reads ownership from the
        subscriptions (OwnedPartitions). It is dropped for those assignors."""
        if not member.assignment:
            return NO_PARTITIONS
        try:
            assignment = read_assignment(member.assignment)
        except ValueError:
            raise self._malformed(gid) from None
        if assignment.user_data and protocol not in BUILT_IN_ASSIGNORS:
            raise _not_found(
                f"Cannot upgrade classic group {gid} to consumer group because an unsupported custom assignor is "
                "in use. Please refer to the documentation or switch to a default assignor before re-attempting "
                "the upgrade."
            )
        by_id: dict[UUID, frozenset[int]] = {}
        for name, partitions in assignment.partitions.items():
            info = self.ctx.topics.by_name(name)
            if info is not None and partitions:
                by_id[info.topic_id] = partitions
        return normalized(by_id)

    @staticmethod
    def _malformed(gid: str) -> CoordinatorError:
        return _not_found(
            f"Cannot upgrade classic group {gid} to consumer group because the embedded consumer protocol is malformed."
        )

    # ---- downgrade: consumer -> classic ----------------------------------------------------------

    def can_downgrade(self, group: ConsumerGroup, leaving: Collection[ConsumerGroupMember]) -> bool:
        """Kafka's ``validateOnlineDowngradeWithFencedMembers``: the members that stay all speak the
        classic protocol, there is one at least, the policy allows it and they fit a classic group."""
        leaving_ids = {m.member_id for m in leaving}
        staying = [m for m in group.members.values() if m.member_id not in leaving_ids]
        if not staying or any(m.classic is None for m in staying):
            return False
        config = self.ctx.config
        return config.consumer_group_migration_policy.downgrade_enabled and len(staying) <= config.group_max_size

    def can_downgrade_replacing(self, group: ConsumerGroup, replaced: ConsumerGroupMember) -> bool:
        """Kafka's ``validateOnlineDowngradeWithReplacedMember``: a classic static member takes the
        place of the last consumer-protocol member."""
        if replaced.classic is not None:
            return False
        if any(m.classic is None for m in group.members.values() if m.member_id != replaced.member_id):
            return False
        config = self.ctx.config
        return config.consumer_group_migration_policy.downgrade_enabled and len(group.members) <= config.group_max_size

    def downgrade(
        self,
        group: ConsumerGroup,
        leaving: Collection[ConsumerGroupMember],
        fx: Effects,
        *,
        joining: ConsumerGroupMember | None = None,
        rebalance: str | None = None,
    ) -> None:
        """Write the consumer group's tombstones and hand the classic type the group it becomes
        (Kafka's ``convertToClassicGroup``). ``joining``: a classic static member taking the place
        of the member with its instance id. Kafka first writes the records of that replacement and
        then tombstones naming the new member id; here the replacement is not written at all (the
        tombstones remove the group either way: the same log, replayed, builds the same state)."""
        gid = group.group_id
        leaving_ids = {m.member_id for m in leaving}
        replaced = None if joining is None else group.static_member(joining.instance_id or "")
        for record in group.tombstones():
            fx.record(record)

        # Each classic member's assignment is what it HOLDS (assigned or pending revocation), where
        # Kafka's ``fromConsumerGroup`` writes its target: a target may name partitions another member
        # has not released yet and leave out partitions this one has not revoked yet, and the classic
        # group's record is what a SyncGroup in Stable hands out and what an upgrade takes as owned.
        # What a member holds never overlaps another's; the rebalance that follows moves partitions.
        staying: list[tuple[ConsumerGroupMember, Assignment]] = []
        for member in group.members.values():
            if member.member_id in leaving_ids or (replaced is not None and member.member_id == replaced.member_id):
                continue
            staying.append((member, held(member)))
        if joining is not None:
            assert replaced is not None, "a joining member replaces a static member"
            staying.append((joining, held(replaced)))
        protocols = []
        for member, _ in staying:
            assert member.classic is not None, f"{member.member_id} does not speak the classic protocol"
            protocols.append(member.classic.supported_protocols)
        protocol = select_protocol(protocols)
        view = ClassicGroupView(
            group_id=gid,
            generation=group.group_epoch,
            protocol_type=CONSUMER_PROTOCOL_TYPE,
            protocol_name=protocol,
            members=tuple(self._classic_member(member, target, protocol) for member, target in staying),
        )
        for member_id in group.members:
            for key in member_timer_keys(gid, member_id):
                fx.cancel(key)
        for member in leaving:
            fx.event(MemberLeft(gid, member.member_id, "downgrade", group_type="consumer"))
        assert self.ctx.bridges.adopt_classic is not None, "no group type adopts classic groups"
        self.ctx.bridges.adopt_classic(view, rebalance, fx)

    def _classic_member(self, member: ConsumerGroupMember, target: Assignment, protocol: str) -> ClassicMemberView:
        assert member.classic is not None
        metadata = dict(member.classic.supported_protocols)[protocol]
        try:
            version = read_version(metadata)
        except ValueError:
            version = 0
        return ClassicMemberView(
            member_id=member.member_id,
            instance_id=member.instance_id,
            client_id=member.client_id,
            client_host=member.client_host,
            rebalance_timeout_ms=member.rebalance_timeout_ms,
            session_timeout_ms=member.classic.session_timeout_ms,
            protocols=member.classic.supported_protocols,
            assignment=write_assignment(self.named(target), version),
        )

    def named(self, assignment: Mapping[UUID, frozenset[int]]) -> Mapping[str, frozenset[int]]:
        """Partitions by topic name for the classic protocol (topics no longer known are left out)."""
        out: dict[str, frozenset[int]] = {}
        for topic_id, partitions in assignment.items():
            info = self.ctx.topics.by_id(topic_id)
            if info is not None:
                out[info.name] = partitions
        return MappingProxyType(out)
