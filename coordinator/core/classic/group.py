"""Classic group and member data (Kafka's ``ClassicGroup`` / ``ClassicGroupMember``).

Which fields are durable (rebuilt by replaying the group's last ``GroupMetadataValue``) and which are
soft (live in memory only, lost on restart exactly as in Kafka):

=========================  ================================================================
durable                    generation_id, protocol_type, protocol_name, leader_id,
                           state_timestamp_ms, members (id, instance id, client id/host,
                           timeouts, selected-protocol metadata, assignment)
soft                       state beyond Stable/Empty, previous_state, every member's full
                           protocol list while rebalancing, pending_join_members,
                           pending_sync_members, parked refs (join_ref, sync_ref), is_new,
                           new_member_added, initial-delay bookkeeping, rebalance start time
derived                    static_members, supported_protocols, subscribed_topics
bookkeeping                persisted: the last GroupMetadataValue written or replayed
=========================  ================================================================

This module holds data and small local operations; it emits nothing, with one exception: it
implements the :class:`~coordinator.core.groups.Group` contract, whose ``validate_offset_commit``
re-arms the committing member's session timer (a classic member's commits keep its session alive,
Kafka's ``rescheduleClassicGroupMemberHeartbeat``). Every other reply, timer, record and event is
the handlers' business (``rebalance.py`` and the modules built on it).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from coordinator.core.classic.schema import (
    GroupMetadataKey,
    GroupMetadataMember,
    GroupMetadataValue,
)
from coordinator.core.consumer_protocol import decode_assignment, parse_subscription_topics
from coordinator.core.effects import Effects, classic_heartbeat_key
from coordinator.core.errors import CoordinatorError, ErrorCode
from coordinator.core.groups import (
    CommitValidator,
    ExpirationBase,
    OwnedPartitions,
    commit_timestamp,
)
from coordinator.core.record_codec import Record
from coordinator.core.requests import OffsetCommit
from coordinator.core.responses import (
    DescribedGroup,
    DescribedGroupMember,
    JoinGroupResponseMember,
    ListedGroup,
)

from .state import EMPTY, PREPARING_REBALANCE, STABLE, Api, Check, ClassicGroupState, state_error

CONSUMER_PROTOCOL_TYPE = "consumer"

Protocols = tuple[tuple[str, bytes], ...]


@dataclass(slots=True)
class ClassicGroupMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: Protocols  # (name, metadata) in preference order
    assignment: bytes = b""
    join_ref: int | None = None  # parked JoinGroup
    sync_ref: int | None = None  # parked SyncGroup
    # A member added in this rebalance that has not received a JoinGroup response yet. Its parked
    # join does not protect it from expiry (see has_satisfied_heartbeat).
    is_new: bool = False

    @property
    def is_awaiting_join(self) -> bool:
        return self.join_ref is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.sync_ref is not None

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    def metadata(self, protocol_name: str | None) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol_name:
                return metadata
        raise KeyError(f"member {self.member_id} does not support protocol {protocol_name!r}")

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among ``candidates``."""
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")

    def matches(self, protocols: Protocols) -> bool:
        """Same names, metadata and order: a rejoin that changes nothing."""
        return self.protocols == protocols

    def has_satisfied_heartbeat(self) -> bool:
        # New members may be expired while parked (their parked join is the 5-minute new-member
        # timeout); existing members parked in join or sync are alive by definition.
        if self.is_new:
            return False
        return self.is_awaiting_join or self.is_awaiting_sync


@dataclass(slots=True)
class ClassicGroup:
    group_id: str
    state: ClassicGroupState = EMPTY
    previous_state: ClassicGroupState | None = None
    state_timestamp_ms: int | None = None
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, ClassicGroupMember] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    # KIP-394 ids handed out with MEMBER_ID_REQUIRED and not yet used (dict for stable order).
    pending_join_members: dict[str, None] = field(default_factory=dict)
    pending_sync_members: dict[str, None] = field(default_factory=dict)
    supported_protocols: Counter[str] = field(default_factory=Counter)
    subscribed_topics: frozenset[str] | None = None
    new_member_added: bool = False
    # (delay_ms, remaining_ms) of the armed initial-rebalance timer, or None when the join timer
    # (if armed) is the plain rebalance timeout.
    initial_delay: tuple[int, int] | None = None
    sync_generation: int = -1  # generation the sync timer was armed for
    rebalance_started_ms: int | None = None
    persisted: GroupMetadataValue | None = None
    # The reason of the rebalance the downgrade that wrote the group's record prepared, which the
    # log cannot hold (soft state, as in Kafka): set by replay, started once by ``on_loaded``.
    owed_rebalance: str | None = None

    group_type = "classic"

    # ---- queries ----------------------------------------------------------------------------

    @property
    def state_name(self) -> str:
        return self.state.value

    @property
    def is_simple(self) -> bool:
        return self.protocol_type is None

    @property
    def uses_consumer_protocol(self) -> bool:
        return self.protocol_type == CONSUMER_PROTOCOL_TYPE

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def is_pending_member(self, member_id: str) -> bool:
        return member_id in self.pending_join_members

    @property
    def num_awaiting_join(self) -> int:
        return sum(1 for m in self.members.values() if m.is_awaiting_join)

    def has_all_members_joined(self) -> bool:
        return self.num_awaiting_join == len(self.members) and not self.pending_join_members

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def validate_member(self, member_id: str, group_instance_id: str | None) -> ClassicGroupMember:
        """Identity check shared by every API (``ClassicGroup.validateMember``)."""
        if group_instance_id is not None:
            existing = self.static_members.get(group_instance_id)
            if existing is None:
                raise CoordinatorError(ErrorCode.UNKNOWN_MEMBER_ID)
            if existing != member_id:
                # Only when the instance id belongs to ANOTHER member id: FENCED is fatal to clients.
                raise CoordinatorError(ErrorCode.FENCED_INSTANCE_ID)
        member = self.members.get(member_id)
        if member is None:
            raise CoordinatorError(ErrorCode.UNKNOWN_MEMBER_ID)
        return member

    def supports_protocols(self, protocol_type: str, protocols: Protocols) -> bool:
        names = {name for name, _ in protocols}
        if self.state is EMPTY:
            return protocol_type != "" and bool(names)
        return self.protocol_type == protocol_type and any(
            self.supported_protocols[name] == len(self.members) for name in names
        )

    def candidate_protocols(self) -> set[str]:
        return {name for name, n in self.supported_protocols.items() if n == len(self.members)}

    def select_protocol(self) -> str:
        """Each member votes for its most preferred candidate; most votes wins.

        Kafka breaks ties by hash-map iteration order (unspecified); we break them by the order in
        which protocols first received a vote while iterating members in join order, so the choice
        is deterministic and replays identically.
        """
        if not self.members:
            raise ValueError("cannot select a protocol for a group without members")
        candidates = self.candidate_protocols()
        votes: Counter[str] = Counter(m.vote(candidates) for m in self.members.values())
        return max(votes, key=lambda name: votes[name])

    def compute_subscribed_topics(self) -> frozenset[str] | None:
        """Topics of all members (consumer protocol only); None = unknown (``computeSubscribedTopics``)."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return frozenset()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        try:
            for member in self.members.values():
                topics |= parse_subscription_topics(member.metadata(self.protocol_name))
        except (ValueError, KeyError):
            return None
        return frozenset(topics)

    def member_topics(self, member: ClassicGroupMember) -> frozenset[str] | None:
        """The topics ``member`` subscribes to under the selected protocol; None when unknown (not the
        consumer protocol, or metadata that does not read as a ConsumerProtocolSubscription)."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE or self.protocol_name is None:
            return None
        try:
            return parse_subscription_topics(member.metadata(self.protocol_name))
        except (ValueError, KeyError):
            return None

    def current_members_for_join(self) -> tuple[JoinGroupResponseMember, ...]:
        """The member list the leader receives in its JoinGroup response."""
        return tuple(
            JoinGroupResponseMember(m.member_id, m.group_instance_id, m.metadata(self.protocol_name))
            for m in self.members.values()
        )

    def group_assignment(self) -> dict[str, bytes]:
        return {member_id: m.assignment for member_id, m in self.members.items()}

    # ---- the Group contract (coordinator.core.groups) ----------------------------------------

    @property
    def is_empty(self) -> bool:
        return self.state is EMPTY

    def list_row(self) -> ListedGroup:
        return ListedGroup(self.group_id, self.protocol_type or "", self.state_name, self.group_type)

    def describe_row(self) -> DescribedGroup:
        stable = self.state is STABLE
        protocol = self.protocol_name if stable else None
        assert protocol is not None or not stable, "a Stable group has a protocol"
        # Other states: no metadata, but (like Kafka 4's coordinator) the last assignment. Every
        # member holds the group's generation except one that joined during the rebalance under
        # way (`is_new`: it gets its first generation when the join completes).
        members = tuple(
            DescribedGroupMember(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                 m.metadata(protocol) if protocol is not None else b"", m.assignment,
                                 -1 if m.is_new else self.generation_id)
            for m in self.members.values()
        )
        return DescribedGroup(self.group_id, ErrorCode.NONE, self.state_name, self.protocol_type or "",
                              protocol or "", members, generation_id=self.generation_id)

    def validate_offset_commit(self, req: OffsetCommit, fx: Effects) -> CommitValidator | None:
        """Kafka's ``ClassicGroup.validateOffsetCommit``; an accepted member commit keeps its session.
        The generation decides for the whole commit (no per-partition check)."""
        _raise(state_error(Api.OFFSET_COMMIT, self.state, Check.BEFORE_MEMBER))
        generation = req.generation_id_or_member_epoch
        if generation < 0 and self.state is EMPTY:
            return None  # admin client or manual assignment: allowed while nobody is a member
        if generation >= 0 or req.member_id or req.group_instance_id is not None:
            member = self.validate_member(req.member_id, req.group_instance_id)
            if generation != self.generation_id:
                raise CoordinatorError(ErrorCode.ILLEGAL_GENERATION)
        else:
            raise CoordinatorError(ErrorCode.UNKNOWN_MEMBER_ID)
        _raise(state_error(Api.OFFSET_COMMIT, self.state, Check.AFTER_MEMBER))
        if self.state in (STABLE, PREPARING_REBALANCE):
            fx.schedule(classic_heartbeat_key(self.group_id, member.member_id), member.session_timeout_ms)
        return None

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> None:
        """Classic groups do not validate the fetcher."""

    def validate_offset_delete(self) -> None:
        error = state_error(Api.OFFSET_DELETE, self.state, Check.BEFORE_MEMBER)
        if error is not None and not (error is ErrorCode.NON_EMPTY_GROUP and self.uses_consumer_protocol):
            raise CoordinatorError(error)

    def validate_delete_group(self) -> None:
        _raise(state_error(Api.DELETE_GROUP, self.state, Check.BEFORE_MEMBER))

    def is_subscribed_to_topic(self, topic: str) -> bool:
        if self.subscribed_topics is None:
            # Unknown subscription of a consumer group: assume subscribed (safe for deletes/expiry).
            return self.uses_consumer_protocol
        return topic in self.subscribed_topics

    def offset_expiration_base(self) -> ExpirationBase | None:
        """Kafka's ``ClassicGroup.offsetExpirationCondition``."""
        if self.protocol_type is None:
            return commit_timestamp  # a simple group
        if self.state is EMPTY:
            # Retention counts from when the group became Empty (commit time for old records).
            became_empty = self.state_timestamp_ms
            if became_empty is None:
                return commit_timestamp
            return lambda offset: became_empty
        if self.uses_consumer_protocol and self.subscribed_topics is not None and self.state is STABLE:
            return commit_timestamp
        return None  # rebalancing, or a non-consumer protocol with members: nothing expires

    def tombstones(self) -> list[Record]:
        return [Record(GroupMetadataKey(self.group_id), None)]

    @property
    def revokes_all_on_rebalance(self) -> bool:
        """An eager group: every member gives up everything when a rebalance starts."""
        return "cooperative" not in (self.protocol_name or "")

    def owned_partitions(self) -> dict[str, OwnedPartitions]:
        """The decoded assignment of each member (protocol type "consumer" only: others own none)."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return {}
        return {member_id: self._decoded(member) for member_id, member in self.members.items()}

    def member_partitions(self, member_id: str) -> OwnedPartitions | None:
        member = self.members.get(member_id)
        if member is None:
            return None
        return self._decoded(member) if self.protocol_type == CONSUMER_PROTOCOL_TYPE else (member.group_instance_id, {})

    @staticmethod
    def _decoded(member: ClassicGroupMember) -> OwnedPartitions:
        try:
            partitions = decode_assignment(member.assignment)
        except ValueError:
            partitions = {}
        return member.group_instance_id, partitions

    # ---- membership mutations ---------------------------------------------------------------

    def add(self, member: ClassicGroupMember) -> None:
        if member.group_instance_id is not None:
            assert member.group_instance_id not in self.static_members, "static member added twice"
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            # The first member of an empty member map decides the group's protocol type.
            self.protocol_type = member.protocol_type
        assert self.protocol_type == member.protocol_type, "protocol type mismatch"
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self.supported_protocols.update(_names(member.protocols))
        self.pending_join_members.pop(member.member_id, None)

    def remove(self, member_id: str) -> ClassicGroupMember | None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self.supported_protocols.subtract(_names(member.protocols))
            if member.group_instance_id is not None:
                self.static_members.pop(member.group_instance_id, None)
        if self.leader_id == member_id:
            # Any remaining member (Kafka: hash-map order; here: join order).
            self.leader_id = next(iter(self.members), None)
        self.pending_join_members.pop(member_id, None)
        self.pending_sync_members.pop(member_id, None)
        return member

    def update_member(
        self,
        member: ClassicGroupMember,
        protocols: Protocols,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        join_ref: int | None,
    ) -> None:
        self.supported_protocols.subtract(_names(member.protocols))
        member.protocols = protocols
        self.supported_protocols.update(_names(protocols))
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        member.join_ref = join_ref

    def replace_static_member(
        self, group_instance_id: str, old_member_id: str, new_member_id: str
    ) -> tuple[ClassicGroupMember, ClassicGroupMember]:
        """Move the static member's slot to a new member id; returns (old, new).

        The new member inherits everything (client, timeouts, protocols, assignment, leadership);
        the caller fences the old member's parked requests.
        """
        old = self.members.pop(old_member_id)
        new = ClassicGroupMember(
            member_id=new_member_id,
            group_instance_id=old.group_instance_id,
            client_id=old.client_id,
            client_host=old.client_host,
            rebalance_timeout_ms=old.rebalance_timeout_ms,
            session_timeout_ms=old.session_timeout_ms,
            protocol_type=old.protocol_type,
            protocols=old.protocols,
            assignment=old.assignment,
        )
        self.members[new_member_id] = new
        if self.leader_id == old_member_id:
            self.leader_id = new_member_id
        self.static_members[group_instance_id] = new_member_id
        return old, new

    # ---- durable form -----------------------------------------------------------------------

    def to_metadata_value(self, assignment: dict[str, bytes]) -> GroupMetadataValue:
        """The GroupMetadataValue Kafka writes for this group (``newGroupMetadataRecord``)."""
        members = []
        for m in self.members.values():
            # Kafka's writer guarantee: a non-empty record has a protocol and every assignment.
            assert self.protocol_name is not None, "non-empty group metadata without a protocol"
            members.append(
                GroupMetadataMember(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    rebalance_timeout=m.rebalance_timeout_ms,
                    session_timeout=m.session_timeout_ms,
                    subscription=m.metadata(self.protocol_name),
                    assignment=assignment[m.member_id],
                )
            )
        return GroupMetadataValue(
            protocol_type=self.protocol_type or "",
            generation=self.generation_id,
            protocol=self.protocol_name,
            leader=self.leader_id,
            current_state_timestamp=-1 if self.state_timestamp_ms is None else self.state_timestamp_ms,
            members=tuple(members),
        )

    def fields_view(self) -> GroupMetadataValue:
        """This group's durable fields in record form, timestamp blanked (for invariant checks)."""
        value = self.to_metadata_value(self.group_assignment())
        return _without_timestamp(value)

    @classmethod
    def from_metadata_value(cls, group_id: str, value: GroupMetadataValue) -> ClassicGroup:
        """Rebuild a group from its record (``GroupMetadataManager.replay(GroupMetadataKey, ...)``)."""
        group = cls(
            group_id=group_id,
            state=ClassicGroupState.STABLE if value.members else EMPTY,
            state_timestamp_ms=None if value.current_state_timestamp == -1 else value.current_state_timestamp,
            generation_id=value.generation,
            protocol_type=value.protocol_type or None,
            protocol_name=value.protocol,
            persisted=value,
        )
        for m in value.members:
            group.add(
                ClassicGroupMember(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    rebalance_timeout_ms=m.session_timeout if m.rebalance_timeout == -1 else m.rebalance_timeout,
                    session_timeout_ms=m.session_timeout,
                    protocol_type=value.protocol_type,
                    # Only the selected protocol survives a restart.
                    protocols=((value.protocol or "", m.subscription),),
                    assignment=m.assignment,
                )
            )
        group.leader_id = value.leader
        group.subscribed_topics = group.compute_subscribed_topics()
        return group


def _raise(error: ErrorCode | None) -> None:
    if error is not None:
        raise CoordinatorError(error)


def _without_timestamp(value: GroupMetadataValue) -> GroupMetadataValue:
    return GroupMetadataValue(
        protocol_type=value.protocol_type,
        generation=value.generation,
        protocol=value.protocol,
        leader=value.leader,
        current_state_timestamp=-1,
        members=value.members,
    )


EMPTY_PERSISTED_VIEW = GroupMetadataValue(protocol_type="", generation=0, protocol=None, leader=None)


def persisted_view(value: GroupMetadataValue | None) -> GroupMetadataValue:
    """A persisted record with the timestamp blanked; no record reads as a fresh simple group."""
    return EMPTY_PERSISTED_VIEW if value is None else _without_timestamp(value)


def _names(protocols: Protocols) -> list[str]:
    """Each protocol name once: a member naming one twice (a hostile JoinGroup) must not count as
    two members supporting it, which left no candidate protocol and wedged the group's rebalance."""
    return list(dict.fromkeys(name for name, _ in protocols))
