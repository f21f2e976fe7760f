"""The classic group state machine: theory of operation, the transition table, the error table.

Theory of operation
===================

A classic group is a set of members that agree, round after round ("generations"), on one protocol and
on an assignment computed by one of them (the leader). The coordinator never interprets protocol
metadata or assignments (except to read subscribed topics, see ``consumer_protocol``); it counts
protocol names, compares byte strings, parks requests and releases them together.

States (Kafka's strings, returned by DescribeGroups/ListGroups):

``Empty``
    No members. The group lingers (offsets, generation, protocol type) until its offsets expire.
``PreparingRebalance``
    The join barrier. Every JoinGroup is parked until all known members have rejoined (and no KIP-394
    pending member id is outstanding) or the rebalance timeout (max over members) fires; members that
    did not rejoin are then dropped (dynamic) or kept with their old metadata (static). The FIRST
    rebalance out of Empty completes only on the initial-delay timer
    (``group.initial.rebalance.delay.ms``, extended by one delay per newcomer, capped by the rebalance
    timeout), so that a group starting up does not rebalance once per arriving member.
``CompletingRebalance``
    The sync barrier. The new generation exists, JoinGroup responses went out (the leader's with all
    members' metadata), SyncGroups are parked until the leader sends the assignment.
``Stable``
    The leader's assignment is persisted and every member got (or can fetch) its share.
``Dead``
    The shard gave the group up (unload). Everything answers COORDINATOR_NOT_AVAILABLE.

Rules:

1. A transition is legal only if the current state is in ``VALID_PREVIOUS_STATES[target]`` (one table,
   Kafka's ``ClassicGroupState``). There is no direct Stable -> Empty: leavers go through
   PreparingRebalance, which completes at once when nobody is left.
2. The error a request gets because of the group's state comes from ``STATE_ERRORS`` (one table), at
   one of two points: before the member's identity is checked, or after identity and generation.
3. Durability follows Kafka: a GroupMetadata record is written (a) when the leader's SyncGroup
   completes the sync barrier (replies to every parked SyncGroup ride in the same Result, so they are
   released only once the record is durable), (b) when a join phase ends with no members (Empty),
   (c) when a static member replaces its old member id while Stable without changing the selected
   protocol or the topics it subscribes to, (d) when a JoinGroup creates a group and wrote nothing else (the "empty group" record).
   Everything else (PreparingRebalance/CompletingRebalance, parked requests, pending member ids,
   pending syncs, heartbeats, timers) is soft state, exactly as in Kafka, where classic mutations are
   applied in memory and not replayed (``CoordinatorResult(..., replayRecords=false)``).
4. After a restart the group is rebuilt from its last GroupMetadata: Stable with its members if it had
   any, else Empty; every member gets a fresh session timeout (``on_loaded``).

Invariants (checked by the tests' harness after every step):

* ``leader_id`` is a member whenever there are members, and ``None`` otherwise.
* ``static_members`` maps each instance id to exactly the member that carries it.
* A group in Stable or Empty has exactly the durable fields of its last persisted GroupMetadata
  (generation, protocol type and name, leader, members with timeouts, selected-protocol metadata and
  assignment). Only rebalances (PreparingRebalance/CompletingRebalance) may run ahead of the log.
* Replaying all records written so far rebuilds every group's last persisted GroupMetadata.
"""

from __future__ import annotations

from enum import Enum

from coordinator.core.errors import ErrorCode


class ClassicGroupState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"

    # Members are singletons compared by identity: hash them by identity too (C speed) rather than
    # by Enum's Python-level hash of the name; `STATE_ERRORS` is looked up on every heartbeat.
    __hash__ = object.__hash__

    def __str__(self) -> str:
        return self.value


EMPTY = ClassicGroupState.EMPTY
PREPARING_REBALANCE = ClassicGroupState.PREPARING_REBALANCE
COMPLETING_REBALANCE = ClassicGroupState.COMPLETING_REBALANCE
STABLE = ClassicGroupState.STABLE
DEAD = ClassicGroupState.DEAD

# Allowed predecessors of each state (Kafka's ClassicGroupState.validPreviousStates).
VALID_PREVIOUS_STATES: dict[ClassicGroupState, frozenset[ClassicGroupState]] = {
    EMPTY: frozenset({PREPARING_REBALANCE}),
    PREPARING_REBALANCE: frozenset({STABLE, COMPLETING_REBALANCE, EMPTY}),
    COMPLETING_REBALANCE: frozenset({PREPARING_REBALANCE}),
    STABLE: frozenset({COMPLETING_REBALANCE}),
    DEAD: frozenset(ClassicGroupState),
}


def can_transition(current: ClassicGroupState, target: ClassicGroupState) -> bool:
    return current in VALID_PREVIOUS_STATES[target]


def can_rebalance(state: ClassicGroupState) -> bool:
    """A rebalance may start from exactly the states PreparingRebalance may be entered from."""
    return state in VALID_PREVIOUS_STATES[PREPARING_REBALANCE]


class Api(Enum):
    """Operations whose answer depends on the group's state."""

    JOIN_NEW_MEMBER = "JoinGroup (new member)"
    JOIN_EXISTING_MEMBER = "JoinGroup (known member id)"
    SYNC = "SyncGroup"
    HEARTBEAT = "Heartbeat"
    LEAVE = "LeaveGroup"
    OFFSET_COMMIT = "OffsetCommit (group member)"
    OFFSET_DELETE = "OffsetDelete"
    DELETE_GROUP = "DeleteGroups"

    __hash__ = object.__hash__  # as `ClassicGroupState`'s: a key of `STATE_ERRORS`


class Check(Enum):
    """Where in a request's validation a state error is raised (Kafka's order matters to clients)."""

    BEFORE_MEMBER = "before member/generation validation"
    AFTER_MEMBER = "after member/generation validation"


B, A = Check.BEFORE_MEMBER, Check.AFTER_MEMBER

# THE error table: (api, state) -> (when, error). Missing entries mean "no state error: the handler's
# per-state behaviour applies" (park, complete, answer with the current generation, ...).
STATE_ERRORS: dict[Api, dict[ClassicGroupState, tuple[Check, ErrorCode]]] = {
    Api.JOIN_NEW_MEMBER: {
        DEAD: (B, ErrorCode.COORDINATOR_NOT_AVAILABLE),
    },
    Api.JOIN_EXISTING_MEMBER: {
        DEAD: (B, ErrorCode.COORDINATOR_NOT_AVAILABLE),
        # Unreachable with a valid member (an Empty group has none); kept because Kafka has it.
        EMPTY: (A, ErrorCode.UNKNOWN_MEMBER_ID),
    },
    Api.SYNC: {
        EMPTY: (B, ErrorCode.UNKNOWN_MEMBER_ID),
        DEAD: (B, ErrorCode.COORDINATOR_NOT_AVAILABLE),
        PREPARING_REBALANCE: (A, ErrorCode.REBALANCE_IN_PROGRESS),
    },
    Api.HEARTBEAT: {
        DEAD: (B, ErrorCode.COORDINATOR_NOT_AVAILABLE),
        EMPTY: (A, ErrorCode.UNKNOWN_MEMBER_ID),
        # The member's session timer IS reset: it is alive, it just has to rejoin.
        PREPARING_REBALANCE: (A, ErrorCode.REBALANCE_IN_PROGRESS),
    },
    Api.LEAVE: {
        DEAD: (B, ErrorCode.COORDINATOR_NOT_AVAILABLE),
    },
    Api.OFFSET_COMMIT: {
        DEAD: (B, ErrorCode.COORDINATOR_NOT_AVAILABLE),
        # The member holds the new generation but no assignment yet (KAFKA-8487): make it rejoin.
        COMPLETING_REBALANCE: (A, ErrorCode.REBALANCE_IN_PROGRESS),
    },
    Api.OFFSET_DELETE: {
        DEAD: (B, ErrorCode.GROUP_ID_NOT_FOUND),
        # Only for groups whose protocol type is not "consumer": a consumer group's subscriptions
        # are known, so its offsets can be deleted per topic (GROUP_SUBSCRIBED_TO_TOPIC instead).
        PREPARING_REBALANCE: (B, ErrorCode.NON_EMPTY_GROUP),
        COMPLETING_REBALANCE: (B, ErrorCode.NON_EMPTY_GROUP),
        STABLE: (B, ErrorCode.NON_EMPTY_GROUP),
    },
    Api.DELETE_GROUP: {
        DEAD: (B, ErrorCode.GROUP_ID_NOT_FOUND),
        PREPARING_REBALANCE: (B, ErrorCode.NON_EMPTY_GROUP),
        COMPLETING_REBALANCE: (B, ErrorCode.NON_EMPTY_GROUP),
        STABLE: (B, ErrorCode.NON_EMPTY_GROUP),
    },
}


def state_error(api: Api, state: ClassicGroupState, check: Check) -> ErrorCode | None:
    entry = STATE_ERRORS[api].get(state)
    if entry is not None and entry[0] is check:
        return entry[1]
    return None
