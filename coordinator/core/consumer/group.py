"""KIP-848 consumer group state and its replay: theory of operation.

This module owns :class:`ConsumerGroup`: the group's durable state, the indexes derived from it, the
``Group`` contract (listing, deletion; its offset checks are :mod:`.offsets`, a mixin) and the
replay of records 3, 5, 6, 7 and 8, the only code that changes a group or its members. A member's
own data, its reconciliation state and its record values are in :mod:`.member`; the assignments and
partition epochs that members and targets hold are in :mod:`.assignment`.

Theory of operation
===================

A consumer group is driven by three epochs (Kafka's names):

``group_epoch``
    Bumped whenever a new target assignment is needed: a new group, a member's subscription changed
    (names or regex), the metadata of the subscribed topics changed (their hash, KIP-1101), or a
    member left or was fenced.
``assignment_epoch``
    The group epoch the persisted target assignment was computed for. Invariant:
    ``assignment_epoch <= group_epoch``; when they differ the group is ``Assigning`` and the next
    heartbeat of any member runs the assignor synchronously (there is no batching in Kafka 4.0-4.2).
``member_epoch``
    The epoch of the assignment a member currently holds. It jumps to the assignment epoch when the
    member can progress and is frozen while the member revokes (see :mod:`.reconciliation`).
    A STABLE member whose target is exactly what it holds is at the assignment epoch whatever its
    record 8 says (``is_caught_up``, ``effective_epoch``): after a join most members only move to
    the new epoch, and they are told it without a record each (Kafka writes one per member). Its
    record 8 is written when its reconciliation changes something, from the epoch its client names
    (``as_told``); until then every epoch from its recorded one to the assignment epoch stands for
    the partitions it holds (``latest_told_epoch``: its state changes only by record 8), and
    heartbeats, commits and fetches accept any of them, live and after a failover alike (the
    state is the same: nothing about it is soft). ConsumerGroupDescribe shows the effective epoch.

Group states (Kafka's strings, returned by ConsumerGroupDescribe and ListGroups, filtered lower-case):
``Empty`` (no members), else ``Assigning`` (group epoch > assignment epoch), else ``Reconciling`` (a
member is not STABLE at the assignment epoch, recorded or caught up; members at epoch -2 count as not reconciled), else
``Stable``. A consumer group is never put in ``Dead``: a deleted group simply disappears.

Durable state (everything, members included, is rebuilt by replaying the records):

======  =======================================  ============================================
record  key                                      replayed into
======  =======================================  ============================================
3       ConsumerGroupMetadata(group)             group_epoch, metadata_hash; tombstone deletes
5       ConsumerGroupMemberMetadata(group, m)    the member's subscription/client fields;
                                                 tombstone removes the member
6       ConsumerGroupTargetAssignmentMetadata    assignment_epoch; tombstone sets -1
7       ConsumerGroupTargetAssignmentMember      target_assignment[m]; tombstone removes it
8       ConsumerGroupCurrentMemberAssignment     member_epoch, previous_member_epoch, state,
                                                 assigned and pending-revocation partitions;
                                                 tombstone marks the member epoch -1 (removed
                                                 next by the 5 tombstone)
======  =======================================  ============================================

Rules:

1. **Replay is the only mutator.** Handlers (``heartbeat.py``, ``membership.py``) read the state, compute, and write
   records; the shard applies them through :meth:`ConsumerGroup.replay` right after the handler
   returns (``CoordinatorShard._apply``) and the same code runs when the log is loaded. So a
   restarted or standby coordinator holds exactly the state clients were told about: members keep
   their member id, epoch and partitions across a restart.
2. Any non-tombstone record creates the group (replacing a "simple" offsets-only classic group,
   KAFKA-17306) and the member it names, so compaction may reorder non-tombstones freely.
   Tombstones for unknown groups or members are ignored.
3. Derived indexes are maintained on every member change: static members (instance id -> member
   id), subscribed names and regexes with their member counts, requested server assignors, and the
   ownership index ``partition_owners[topic][partition] -> member id`` covering every member's
   assigned AND pending-revocation partitions; how many members are not STABLE at the
   assignment epoch, recorded or caught up (``unreconciled``, what ``state_name`` reads; a record 7
   recounts its member, a record 6 all); and each member's last record 8
   with the partition objects it was replayed into (``held_records``: a member catching up to a new
   epoch with the same partitions reuses both, see ``assignment_value``).

Invariants (asserted in replay, checked by the tests after every step):

* A partition is in at most one member's assigned ∪ pending-revocation set (inserting an owned
  partition is an internal error, as in Kafka), and ``partition_owners`` is exactly the union.
* ``static_members`` maps each instance id to the one member carrying it.
* ``assignment_epoch <= group_epoch``; every member epoch <= assignment epoch (or -2 / -1).

Soft state (not durable, rebuilt or recomputed): ``metadata_refresh_needed`` (set when the shard
loads and on topic changes that concern the group; the next heartbeat recomputes the metadata hash
and bumps the epoch if it changed) and ``last_state`` (to report state transitions as events).
"""

from __future__ import annotations

from collections import Counter
from typing import Any
from uuid import UUID

from msgspec.structs import replace

from coordinator.core.consumer.schema import (
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataValue,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataValue,
)
from coordinator.core.errors import CoordinatorError, ErrorCode
from coordinator.core.groups import (
    ExpirationBase,
    OwnedPartitions,
    Partitions,
    commit_timestamp,
)
from coordinator.core.record_codec import Record
from coordinator.core.responses import DescribedGroup, ListedGroup
from coordinator.core.topics import TopicsImage

from .assignment import NO_EPOCHS, NO_PARTITIONS, Assignment, assignment_from_record
from .member import (
    LEAVE_GROUP_MEMBER_EPOCH,
    ConsumerGroupMember,
    HeldRecord,
    MemberState,
    held_epochs_complete,
)
from .offsets import OffsetValidation
from .records import group_tombstones

EMPTY = "Empty"
ASSIGNING = "Assigning"
RECONCILING = "Reconciling"
STABLE = "Stable"
CONSUMER_GROUP_STATES = (EMPTY, ASSIGNING, RECONCILING, STABLE)


class ConsumerGroup(OffsetValidation):
    """A KIP-848 group. Mutated only by the ``replay_*`` methods (see the module docstring)."""

    group_type = "consumer"
    protocol_type = "consumer"

    def __init__(self, group_id: str, topics: TopicsImage | None = None) -> None:
        self.group_id = group_id
        # The shard's topic image (shared, read-only here): regex subscriptions resolve against it.
        self.topics = topics if topics is not None else TopicsImage()
        # durable
        self.group_epoch = 0
        self.metadata_hash = 0
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerGroupMember] = {}
        self.target_assignment: dict[str, Assignment] = {}
        # derived from the durable state
        self.static_members: dict[str, str] = {}
        self.partition_owners: dict[UUID, dict[int, str]] = {}
        self.subscribed_names: Counter[str] = Counter()
        self.subscribed_regexes: Counter[str] = Counter()
        self.regex_subscriptions: Counter[tuple[str, frozenset[str] | None]] = Counter()
        """(regex, what it may match: the member's ``regex_topics``) -> members; see ``resolve``."""
        self.server_assignors: Counter[str] = Counter()
        # Members speaking the classic protocol, and how many of them support each protocol name
        # (a classic member may join only with a protocol every one of them supports).
        self.classic_members = 0
        self.classic_protocols: Counter[str] = Counter()
        # Members not STABLE at ``assignment_epoch``: kept by ``_set_member``, recounted when the
        # assignment epoch moves, so ``state_name`` never walks the members (it is asked after
        # every replayed batch, and a join makes every member of the group heartbeat once).
        self.unreconciled = 0
        # member id -> the last record 8 replayed for it, with the partition objects it was
        # replayed into; only records whose partitions all carry their epochs (ours always do).
        # A member that catches up to a new epoch keeping everything it holds (after a join, all
        # but a few) reuses that record's partitions, and its replay reuses the member's objects
        # (``assignment_value``, ``replay_current_assignment``): no partition is re-sorted,
        # rebuilt or re-indexed.
        self.held_records: dict[str, HeldRecord] = {}
        # soft
        self.metadata_refresh_needed = False  # set by on_loaded and by topic changes
        self.last_state = ""

    # ---- queries ---------------------------------------------------------------------------------

    @property
    def state_name(self) -> str:
        if not self.members:
            return EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ASSIGNING
        return RECONCILING if self.unreconciled else STABLE

    def owner(self, topic_id: UUID, partition: int) -> str | None:
        """The member that has the partition assigned or pending revocation, if any."""
        partitions = self.partition_owners.get(topic_id)
        return None if partitions is None else partitions.get(partition)

    def static_member(self, instance_id: str) -> ConsumerGroupMember | None:
        member_id = self.static_members.get(instance_id)
        return None if member_id is None else self.members.get(member_id)

    def target(self, member_id: str) -> Assignment:
        return self.target_assignment.get(member_id, NO_PARTITIONS)

    def is_caught_up(self, member: ConsumerGroupMember) -> bool:
        """Whether ``member`` is at the assignment epoch without a record saying so (a lazy
        catch-up): STABLE at an older epoch > 0, speaking the consumer protocol, holding exactly its
        target. Such a member is told the assignment epoch and writes no record 8 for it (after a
        join, every member but a few)."""
        epoch = member.member_epoch
        if not 0 < epoch < self.assignment_epoch or member.state is not MemberState.STABLE or member.classic is not None:
            return False
        target = self.target_assignment.get(member.member_id, NO_PARTITIONS)
        return target is member.assigned_partitions or target == member.assigned_partitions

    def effective_epoch(self, member: ConsumerGroupMember) -> int:
        """The member epoch as the member's client may know it (see ``is_caught_up``)."""
        return self.assignment_epoch if self.is_caught_up(member) else member.member_epoch

    def latest_told_epoch(self, member: ConsumerGroupMember) -> int:
        """The highest epoch ``member``'s client may have been told. A member's state changes only by
        its record 8, and the epochs it is told without one (``is_caught_up``) are the assignment
        epochs of the moment, with the partitions that record gave it: so a STABLE member whose
        client names an epoch from its recorded one up to the assignment epoch holds exactly those
        partitions at that epoch (even once its target moved on), and is served at it."""
        epoch = member.member_epoch
        if epoch > 0 and member.state is MemberState.STABLE and member.classic is None:
            return max(epoch, self.assignment_epoch)
        return epoch

    def as_told(self, member: ConsumerGroupMember, told: int) -> ConsumerGroupMember:
        """``member`` at the epoch its client names (``told``, accepted by ``latest_told_epoch``): the
        epoch its reconciliation moves on from, so that no answer takes a client's epoch back."""
        if told <= member.member_epoch or told > self.latest_told_epoch(member):
            return member
        return replace(member, member_epoch=told, previous_member_epoch=member.member_epoch)

    def is_reconciled(self, member: ConsumerGroupMember) -> bool:
        """STABLE at the assignment epoch, recorded or caught up (what ``state_name`` counts)."""
        return member.is_reconciled_to(self.assignment_epoch) or self.is_caught_up(member)

    def assignment_value(self, member: ConsumerGroupMember) -> ConsumerGroupCurrentMemberAssignmentValue:
        """Record 8's value for ``member`` (a member computed from this group's member of the same
        id): the last record's partitions when the member still holds the very same ones."""
        held = self.held_records.get(member.member_id)
        if held is not None and held.holds(member):
            return replace(
                held.value,
                member_epoch=member.member_epoch,
                previous_member_epoch=member.previous_member_epoch,
                state=int(member.state),
            )
        return member.to_assignment_value()

    # ---- the Group contract (coordinator.core.groups) ------------------------------------------

    @property
    def is_empty(self) -> bool:
        return not self.members

    def list_row(self) -> ListedGroup:
        return ListedGroup(self.group_id, self.protocol_type, self.state_name, self.group_type)

    def describe_row(self) -> DescribedGroup:
        # Described by ConsumerGroupDescribe; DescribeGroups (classic API) answers as Kafka does:
        # Dead, GROUP_ID_NOT_FOUND from v6.
        return DescribedGroup(self.group_id, ErrorCode.NONE, "Dead", exists=False)

    def validate_offset_delete(self) -> None:
        """Consumer groups allow OffsetDelete in every state."""

    def validate_delete_group(self) -> None:
        if self.members:
            raise CoordinatorError(ErrorCode.NON_EMPTY_GROUP)

    def is_subscribed_to_topic(self, topic: str) -> bool:
        """Subscribed by name, or through a regex that resolves to it now."""
        if self.subscribed_names.get(topic, 0) > 0:
            return True
        return any(topic in self.resolve(regex, allowed) for regex, allowed in self.regex_subscriptions)

    def resolve(self, regex: str, allowed: frozenset[str] | None) -> frozenset[str]:
        """The topics ``regex`` matches now, among ``allowed`` (a member's ``regex_topics``)."""
        names = self.topics.resolve(regex)
        return names if allowed is None else names & allowed

    def offset_expiration_base(self) -> ExpirationBase | None:
        return commit_timestamp  # from the commit, in any state (subscribed topics never expire)

    def tombstones(self) -> list[Record]:
        """The records that delete the group, in Kafka's order (``createGroupTombstoneRecords``)."""
        return group_tombstones(self.group_id, sorted(self.members), sorted(self.target_assignment))

    @property
    def revokes_all_on_rebalance(self) -> bool:
        return False  # members revoke only what moves (KIP-848 reconciliation)

    def owned_partitions(self) -> dict[str, OwnedPartitions]:
        return {member_id: (m.instance_id, self.topic_names(m.assigned_partitions)) for member_id, m in self.members.items()}

    def member_partitions(self, member_id: str) -> OwnedPartitions | None:
        member = self.members.get(member_id)
        return None if member is None else (member.instance_id, self.topic_names(member.assigned_partitions))

    def topic_names(self, assignment: Assignment) -> Partitions:
        """Partitions by topic name (a topic deleted meanwhile is named by its id)."""
        out: dict[str, frozenset[int]] = {}
        for topic_id, parts in assignment.items():
            info = self.topics.by_id(topic_id)
            out[info.name if info is not None else str(topic_id)] = frozenset(parts)
        return out

    @property
    def persisted(self) -> tuple[Any, ...]:
        """Everything the records determine, as plain comparable data (``durable_view``)."""
        return (
            self.group_epoch,
            self.metadata_hash,
            self.assignment_epoch,
            tuple(sorted((mid, m.metadata_view(), m.assignment_view()) for mid, m in self.members.items())),
            tuple(sorted((mid, dict(a)) for mid, a in self.target_assignment.items())),
        )

    # ---- replay ------------------------------------------------------------------------------------

    def replay_metadata(self, value: ConsumerGroupMetadataValue) -> None:
        self.group_epoch = value.epoch
        self.metadata_hash = value.metadata_hash

    def replay_target_metadata(self, value: ConsumerGroupTargetAssignmentMetadataValue | None) -> None:
        if value is None:
            assert not self.target_assignment, f"{self.group_id}: target epoch tombstone with targets left"
            self.assignment_epoch = -1
        else:
            self.assignment_epoch = value.assignment_epoch
        self.unreconciled = self._count_unreconciled()

    def _count_unreconciled(self) -> int:
        """``is_reconciled`` over every member, inlined: it runs at every record 6 (a join's), over
        the whole group, and most members hold their target as the very same object (see
        ``replay_target_member``), so most cost an identity check."""
        epoch = self.assignment_epoch
        targets = self.target_assignment
        stable = MemberState.STABLE
        count = 0
        for member_id, m in self.members.items():
            e = m.member_epoch
            if m.state is not stable:
                count += 1
            elif e == epoch:
                continue
            elif not 0 < e < epoch or m.classic is not None:
                count += 1
            else:
                target = targets.get(member_id, NO_PARTITIONS)
                if target is not m.assigned_partitions and target != m.assigned_partitions:
                    count += 1
        return count

    def replay_target_member(self, member_id: str, value: ConsumerGroupTargetAssignmentMemberValue | None) -> None:
        # A member's target decides whether it is caught up (``is_caught_up``): recount it.
        member = self.members.get(member_id)
        if member is not None and not self.is_reconciled(member):
            self.unreconciled -= 1
        if value is None:
            self.target_assignment.pop(member_id, None)
        else:
            target = assignment_from_record(value.topic_partitions)
            if member is not None and target == member.assigned_partitions:
                target = member.assigned_partitions  # the same object: ``is_caught_up`` by identity
            self.target_assignment[member_id] = target
        if member is not None and not self.is_reconciled(member):
            self.unreconciled += 1

    def replay_member_metadata(self, member_id: str, value: ConsumerGroupMemberMetadataValue | None) -> None:
        old = self.members.get(member_id)
        if value is None:
            if old is not None:
                self._set_member(old, None)
            return
        # A member fenced by its record-8 tombstone always gets its record-5 tombstone in the same
        # batch, so a record 5 for it means that tombstone was compacted away (superseded by this
        # rejoin): this is a new member at epoch 0, as live, not the fenced one at -1.
        fenced = old is not None and old.member_epoch == LEAVE_GROUP_MEMBER_EPOCH
        base = old if old is not None and not fenced else ConsumerGroupMember(member_id)
        self._set_member(old, base.with_metadata(value))

    def replay_current_assignment(
        self, member_id: str, value: ConsumerGroupCurrentMemberAssignmentValue | None
    ) -> None:
        old = self.members.get(member_id)
        if value is None:
            self.held_records.pop(member_id, None)
            if old is not None:
                # Kafka keeps the member, fenced (epoch -1, nothing owned), until its metadata tombstone.
                self._set_member(
                    old,
                    replace(
                        old,
                        member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                        previous_member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                        assigned_partitions=NO_PARTITIONS,
                        partitions_pending_revocation=NO_PARTITIONS,
                        assignment_epochs=NO_EPOCHS,
                    ),
                )
            return
        held = self.held_records.get(member_id)
        if (
            old is not None
            and held is not None
            and held.holds(old)
            and held.value.assigned_partitions == value.assigned_partitions
            and held.value.partitions_pending_revocation == value.partitions_pending_revocation
        ):
            # The same partitions at the same epochs as the member holds (a catch-up to a new
            # epoch): what ``with_assignment`` would build, as the objects the member has.
            new = replace(
                old,
                member_epoch=value.member_epoch,
                previous_member_epoch=value.previous_member_epoch,
                state=MemberState.parse(value.state),
            )
        else:
            new = (old if old is not None else ConsumerGroupMember(member_id)).with_assignment(value)
            target = self.target_assignment.get(member_id)
            if target is not None and target is not new.assigned_partitions and target == new.assigned_partitions:
                # Its target as the very object (``is_caught_up`` by identity at the next epochs).
                new = replace(new, assigned_partitions=target)
        if held_epochs_complete(value):
            self.held_records[member_id] = HeldRecord(
                value, new.assigned_partitions, new.partitions_pending_revocation, new.assignment_epochs
            )
        else:
            self.held_records.pop(member_id, None)
        self._set_member(old, new)

    # ---- index maintenance -----------------------------------------------------------------------

    def _set_member(self, old: ConsumerGroupMember | None, new: ConsumerGroupMember | None) -> None:
        if old is not None and not self.is_reconciled(old):
            self.unreconciled -= 1
        if new is not None and not self.is_reconciled(new):
            self.unreconciled += 1
        if (
            old is not None
            and new is not None
            and old.subscribed_topic_names is new.subscribed_topic_names
            and old.subscribed_topic_regex == new.subscribed_topic_regex
            and old.regex_topics == new.regex_topics
            and old.instance_id == new.instance_id
            and old.server_assignor == new.server_assignor
            and old.classic is new.classic
        ):
            # Only the assignment (record 8) or non-indexed metadata changed, the common case in a
            # rebalance: the subscription, static-member and assignor indexes stay as they are.
            if old.assigned_partitions is not new.assigned_partitions:
                self._release(old.member_id, old.assigned_partitions)
            if old.partitions_pending_revocation is not new.partitions_pending_revocation:
                self._release(old.member_id, old.partitions_pending_revocation)
            if old.assigned_partitions is not new.assigned_partitions:
                self._claim(new.member_id, new.assigned_partitions)
            if old.partitions_pending_revocation is not new.partitions_pending_revocation:
                self._claim(new.member_id, new.partitions_pending_revocation)
            self.members[new.member_id] = new
            return
        if new is None and old is not None:
            self.held_records.pop(old.member_id, None)
        if old is not None:
            if old.instance_id is not None and self.static_members.get(old.instance_id) == old.member_id:
                del self.static_members[old.instance_id]
            self.subscribed_names.subtract(old.subscribed_topic_names)
            if old.subscribed_topic_regex:
                self.subscribed_regexes[old.subscribed_topic_regex] -= 1
                self.regex_subscriptions[old.subscribed_topic_regex, old.regex_topics] -= 1
            if old.server_assignor is not None:
                self.server_assignors[old.server_assignor] -= 1
            if old.classic is not None:
                self.classic_members -= 1
                self.classic_protocols.subtract(name for name, _ in old.classic.supported_protocols)
            self._release(old.member_id, old.assigned_partitions)
            self._release(old.member_id, old.partitions_pending_revocation)
            del self.members[old.member_id]
            # Counter.subtract keeps zero counts: drop them so the counters list only live entries.
            for counter in (self.subscribed_names, self.subscribed_regexes, self.regex_subscriptions,
                            self.server_assignors, self.classic_protocols):
                for key in [k for k, v in counter.items() if v <= 0]:
                    del counter[key]
        if new is not None:
            if new.instance_id is not None:
                self.static_members[new.instance_id] = new.member_id
            self.subscribed_names.update(new.subscribed_topic_names)
            if new.subscribed_topic_regex:
                self.subscribed_regexes[new.subscribed_topic_regex] += 1
                self.regex_subscriptions[new.subscribed_topic_regex, new.regex_topics] += 1
            if new.server_assignor is not None:
                self.server_assignors[new.server_assignor] += 1
            if new.classic is not None:
                self.classic_members += 1
                self.classic_protocols.update(name for name, _ in new.classic.supported_protocols)
            self._claim(new.member_id, new.assigned_partitions)
            self._claim(new.member_id, new.partitions_pending_revocation)
            self.members[new.member_id] = new

    # Ownership during replay (KAFKA-19862). Live, a partition is released before another member
    # claims it. A log read while compaction rewrites it (a standby tailing, a load racing the
    # compactor) can lack the record in which a member released a partition (superseded by that
    # member's later record) yet hold another member's later claim. So, as Kafka's
    # ``removePartitionEpochs``/``addPartitionEpochs`` now do: a release leaves a partition another
    # member holds alone, and a claim takes it over. The stale holder's own later record (the one
    # that superseded its release) then brings its view back in line: the end state equals live.

    def _release(self, member_id: str, assignment: Assignment) -> None:
        for topic_id, partitions in assignment.items():
            owners = self.partition_owners.get(topic_id)
            if owners is None:
                continue
            for partition in partitions:
                if owners.get(partition) == member_id:
                    del owners[partition]
            if not owners:
                del self.partition_owners[topic_id]

    def _claim(self, member_id: str, assignment: Assignment) -> None:
        for topic_id, partitions in assignment.items():
            owners = self.partition_owners.setdefault(topic_id, {})
            for partition in partitions:
                owners[partition] = member_id
