"""A model classic-protocol consumer (JoinGroup / SyncGroup / Heartbeat / LeaveGroup), as the Java client.

Theory of operation
===================

The client is in one of three phases, each naming what it sends next:

``JOIN``
    A JoinGroup with its subscription (ConsumerProtocolSubscription v2: topics, owned partitions,
    generation). *Before* sending it, an **eager** client revokes everything it owns
    (``onPartitionsRevoked``); a **cooperative** client (KIP-429) keeps what it owns and declares it,
    revoking only partitions of topics it no longer subscribes to. A new dynamic member first gets
    MEMBER_ID_REQUIRED and joins again with that id (KIP-394); a static member (``group.instance.id``)
    joins with an empty id and gets one at once.
``SYNC``
    A SyncGroup for the generation the JoinGroup answer named; the leader sends the assignment it
    computed from the members' subscriptions (``assignors.py``). On the answer an eager client takes
    its assignment; a cooperative one drops what is not in it and, if it dropped anything, rejoins
    (the second rebalance hands the partitions over). An assignment naming topics it does not
    subscribe to is refused: it rejoins with its current subscription (Java's
    ``checkAssignmentMatchedSubscription``).
``STABLE``
    Heartbeats. REBALANCE_IN_PROGRESS means rejoin; the leader also rejoins when topic metadata of
    the group's subscription changed since it assigned, and anyone whose regex now resolves to other
    topics rejoins. A restarted static leader told to skip the assignment (KIP-814) rebalances once:
    it cannot know what changed while it was down.

The Java client's join loop runs inside one ``poll``: MEMBER_ID_REQUIRED is followed by the JoinGroup,
a JoinGroup answer by the SyncGroup, REBALANCE_IN_PROGRESS by the JoinGroup, at once (``follow_up``).

ILLEGAL_GENERATION and UNKNOWN_MEMBER_ID reset the generation (and, for the latter, the member id):
everything owned is lost (``onPartitionsLost``) and the client rejoins. So does a client that was
stalled (paused, or not scheduled) for longer than its rebalance timeout, as the Java client's poll
timer (``max.poll.interval.ms``) resets its generation: only then can the group have moved on without
it. FENCED_INSTANCE_ID is fatal in Kafka; here it is accepted only after a coordinator restart (the
restart forgot the static member's new id; its supervisor restarts it with the same instance id) and
fails the run otherwise. A SyncGroup that fails on the network is retried as a JoinGroup, as the Java
client retries its join future.

Client-side promise checked: the generation it is told never goes back while it stays the same member,
except across a coordinator restart (a rebalance in flight is soft state and is lost with the shard).

Inside a consumer group (a rolling upgrade, ``coordinator/core/migration.py``) the same client talks to
the same APIs: its JoinGroup answer names no leader (the coordinator assigns), its generation is its
member epoch, REBALANCE_IN_PROGRESS on a heartbeat or a SyncGroup means rejoin (to give partitions up
or to take new ones), a JoinGroup parked when its group was upgraded is answered REBALANCE_IN_PROGRESS.
There it counts as owner while it is a member: the coordinator never gives away what a member holds
(assigned or pending revocation) before the member's JoinGroup said it gave it up.

Ownership counts toward the safety check (``counts_as_owner``) while the client is a member of the
coordinator's group, has heard from this incarnation of the coordinator, and is at the group's
generation (or one behind after declaring what it owns in a JoinGroup), or was answered without error
since the group moved past its generation (which the coordinator must never do). A member the group
moved on without is a zombie until its next request fails.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any
from uuid import UUID

from coordinator.core.classic.group import ClassicGroup
from coordinator.core.consumer.group import ConsumerGroup
from coordinator.core.errors import ErrorCode
from coordinator.core.requests import (
    Heartbeat,
    JoinGroup,
    LeaveGroup,
    LeavingMember,
    Request,
    SyncGroup,
)

from .assignors import (
    COOPERATIVE,
    Partitions,
    assign,
    decode,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from .model import ModelClient, TopicPartition
from .world import SimulationFailure

if TYPE_CHECKING:
    from .world import World

JOIN, SYNC, STABLE = "JOIN", "SYNC", "STABLE"
SESSION_TIMEOUT_MS = 25_000
# Static members run with long sessions (that is what they are for): a restart or a stall within it
# keeps their slot, and the group moves on without them meanwhile.
STATIC_SESSION_TIMEOUT_MS = 45_000
REBALANCE_TIMEOUT_MS = 15_000
RESET_ERRORS = {ErrorCode.ILLEGAL_GENERATION, ErrorCode.UNKNOWN_MEMBER_ID}
NONE = ErrorCode.NONE


class ClassicClient(ModelClient):
    def __init__(
        self, name: str, group_id: str, names: tuple[str, ...], regex: str, *,
        cooperative: bool, protocols: tuple[str, ...], instance_id: str | None = None, migrating: bool = False,
    ) -> None:
        super().__init__(name, group_id)
        # Its group also has KIP-848 members: an empty group may be replaced by one of the other type
        # (offline conversion), where the member id it rejoins with starts over from a new epoch.
        self.migrating = migrating
        self.names = names
        self.regex = regex
        self.cooperative = cooperative
        self.protocol_names = (COOPERATIVE,) if cooperative else protocols
        self.instance_id = instance_id
        self.phase = JOIN
        self.generation = -1
        self.protocol: str | None = None
        self.assignments: tuple[tuple[str, bytes], ...] = ()  # the leader's, for its SyncGroup
        # The leader's view when it assigned: the group's subscribed topics and their partition counts.
        self.snapshot: tuple[frozenset[str], dict[str, int]] | None = None
        self.owned_names: Partitions = {}
        self.topic_ids: dict[str, UUID] = {}
        self.joined_topics: tuple[str, ...] | None = None  # the subscription of its last JoinGroup
        self.rejoin = False
        self.declared = False  # sent a JoinGroup since its last SyncGroup answer
        self.last_seen = -1
        self.restarts_seen = 0
        self.last_ok = -1  # world tick of the last answer without error
        self.active_at = 0  # when it last sent or heard anything (its poll loop ran)
        self.leaving = False

    # ---- subscription -------------------------------------------------------------------------------

    def subscribe(self, names: tuple[str, ...], regex: str) -> None:
        self.names, self.regex = names, regex

    def topics(self, world: World) -> tuple[str, ...]:
        """What the client subscribes to, its regex resolved against the metadata it sees."""
        matched = {t for t in world.topics if self.regex and re.fullmatch(self.regex, t)}
        return tuple(sorted(set(self.names) | matched))

    def needs_rejoin(self, world: World) -> bool:
        if self.rejoin or self.joined_topics != self.topics(world):
            return True
        return self.snapshot is not None and self.snapshot[1] != self._metadata(world, self.snapshot[0])

    @staticmethod
    def _metadata(world: World, topics: Any) -> dict[str, int]:
        return {t: world.topics[t].num_partitions for t in topics if t in world.topics}

    # ---- driving ------------------------------------------------------------------------------------

    def leave(self) -> bool:
        if self.instance_id is not None:
            return False  # static members close without LeaveGroup: the session timeout ends them
        self.leaving = True
        return True

    def next_request(self, world: World) -> Request | None:
        if self.waiting is not None:
            return None
        if self.generation >= 0 and world.now - self.active_at >= REBALANCE_TIMEOUT_MS:
            # max.poll.interval.ms (the rebalance timeout) expired while it was stalled: the Java client
            # resets its generation and member id, so the next join loses everything it owned.
            world.note(f"{self.name} stalled past its poll timeout: resets")
            self._reset(world, forget_id=True)
        ref = world.next_ref()
        if self.leaving:
            self.owned_names = {}  # onPartitionsRevoked, then LeaveGroup
            return LeaveGroup(ref, self.group_id, (LeavingMember(self.member_id, self.instance_id),))
        if self.phase == STABLE and self.needs_rejoin(world):
            self.phase = JOIN
        if self.phase == JOIN:
            return self._join(world, ref)
        if self.phase == SYNC:
            return SyncGroup(
                ref, self.group_id, self.generation, self.member_id, self.instance_id, "consumer", self.protocol,
                self.assignments,
            )
        return Heartbeat(ref, self.group_id, self.generation, self.member_id, self.instance_id)

    def _join(self, world: World, ref: int) -> JoinGroup:
        topics = self.topics(world)
        if self.cooperative:
            self.owned_names = {t: ps for t, ps in self.owned_names.items() if t in topics}
        else:
            self.owned_names = {}
        self.joined_topics = topics
        self.rejoin = False
        self.declared = True
        metadata = encode_subscription(topics, self.owned_names, self.generation)
        return JoinGroup(
            ref=ref, group_id=self.group_id, member_id=self.member_id, group_instance_id=self.instance_id,
            protocol_type="consumer", protocols=tuple((name, metadata) for name in self.protocol_names),
            session_timeout_ms=SESSION_TIMEOUT_MS if self.instance_id is None else STATIC_SESSION_TIMEOUT_MS, rebalance_timeout_ms=REBALANCE_TIMEOUT_MS,
            client_id=self.name, client_host="/10.0.0.2", new_member_id=world.new_id(self.instance_id or self.name),
        )

    def sent(self, world: World, request: Request) -> None:
        super().sent(world, request)
        self.active_at = world.now

    def on_reply(self, world: World, request: Request, response: Any) -> None:
        if request.ref != self.waiting:
            return  # an answer to a request it already gave up on
        self.waiting = None
        self.active_at = world.now
        code = response.error_code
        if isinstance(request, LeaveGroup):
            self.alive = False
            return
        if code == ErrorCode.FENCED_INSTANCE_ID:
            if self.restarts_seen == world.restarts:
                raise SimulationFailure(f"{self.name} fenced without a coordinator restart")
            world.note(f"{self.name} was fenced after a coordinator restart: restarts with {self.instance_id}")
            self._reset(world, forget_id=True)
            return
        if code in RESET_ERRORS:
            self._reset(world, forget_id=code == ErrorCode.UNKNOWN_MEMBER_ID)
            return
        if isinstance(request, JoinGroup):
            self._on_join(world, response)
        elif isinstance(request, SyncGroup):
            self._on_sync(world, response)
        elif code == ErrorCode.REBALANCE_IN_PROGRESS:
            self.phase = JOIN
            self.follow_up = True
        elif code != NONE:
            raise SimulationFailure(f"{self.name}: unexpected heartbeat answer {code!r}")
        else:
            self._heard(world)

    def _heard(self, world: World) -> None:
        self.restarts_seen = world.restarts
        self.last_ok = world.ticks

    def _on_join(self, world: World, response: Any) -> None:
        if response.error_code == ErrorCode.MEMBER_ID_REQUIRED:
            self.member_id = response.member_id
            self.phase = JOIN
            self.follow_up = True
            return
        if response.error_code == ErrorCode.REBALANCE_IN_PROGRESS:
            # Its parked JoinGroup was cut short (the group was upgraded meanwhile): join again.
            self.phase = JOIN
            self.follow_up = True
            return
        if response.error_code != NONE:
            raise SimulationFailure(f"{self.name}: unexpected JoinGroup answer {response.error_code!r}")
        self._saw_generation(world, response.generation_id)
        self._heard(world)
        self.member_id = response.member_id
        self.generation = response.generation_id
        self.protocol = response.protocol_name
        self.assignments = ()
        self.snapshot = None
        if response.leader == self.member_id:
            members = {m.member_id: decode_subscription(m.metadata) for m in response.members}
            subscribed = frozenset(t for s in members.values() for t in s.topics)
            if response.skip_assignment:
                # KIP-814: a restarted static leader keeps the group's assignment, which it never saw.
                # The Java client then watches metadata only from now on and can miss changes made
                # while it was down; this model compares against nothing, so it rebalances once.
                self.snapshot = (subscribed, {})
            else:
                counts = self._metadata(world, subscribed)
                assert self.protocol is not None
                plan = assign(self.protocol, members, counts)
                self.assignments = tuple((m, encode_assignment(parts)) for m, parts in sorted(plan.items()))
                self.snapshot = (subscribed, counts)
        self.phase = SYNC
        self.follow_up = True

    def _on_sync(self, world: World, response: Any) -> None:
        if response.error_code == ErrorCode.REBALANCE_IN_PROGRESS:
            self.phase = JOIN
            self.follow_up = True
            return
        if response.error_code != NONE:
            raise SimulationFailure(f"{self.name}: unexpected SyncGroup answer {response.error_code!r}")
        self._heard(world)
        assigned = decode(response.assignment)
        subscribed = self.topics(world)
        if any(t not in subscribed for t in assigned):
            # Not what it subscribes to (e.g. a static member restarted with another subscription got
            # its predecessor's assignment without a rebalance): the Java client takes none of it and
            # rejoins with its current subscription.
            self.rejoin = True
            self.declared = False
            self.phase = STABLE
            return
        if self.cooperative:
            revoked = any(ps - assigned.get(t, frozenset()) for t, ps in self.owned_names.items())
            self.rejoin = revoked  # KIP-429: revoke, then rejoin so the partitions can move
        self.owned_names = assigned
        # The topics it was given, as its metadata resolved them then: a partition of a topic deleted
        # since is not a partition of a namesake created later.
        self.topic_ids = {t: world.topics[t].topic_id for t in assigned if t in world.topics}
        self.declared = False
        self.phase = STABLE

    def _reset(self, world: World, forget_id: bool) -> None:
        self.owned_names = {}  # onPartitionsLost
        self.generation = -1
        self.snapshot = None
        self.phase = JOIN
        if forget_id or self.migrating:
            self.last_seen = -1
        if forget_id:
            self.member_id = ""

    def _saw_generation(self, world: World, generation: int) -> None:
        if generation < self.last_seen:
            raise SimulationFailure(f"{self.name} saw its generation go back: {self.last_seen} -> {generation}")
        self.last_seen = generation

    def on_lost(self, world: World, request: Request) -> None:
        if request.ref != self.waiting:
            return
        self.waiting = None
        self.active_at = world.now
        if isinstance(request, LeaveGroup):
            self.alive = False  # closed anyway: the session timeout removes it
        elif not isinstance(request, Heartbeat):
            self.phase = JOIN

    def on_coordinator_restart(self) -> None:
        self.last_seen = -1  # the rebalance in flight, and the generation it made, may be gone

    # ---- what the checkers read -----------------------------------------------------------------------

    def _group(self, world: World) -> ClassicGroup | None:
        group = world.shard.group(self.group_id)
        return group if isinstance(group, ClassicGroup) else None

    def _consumer_member(self, world: World) -> Any:
        """Its member in a consumer group (an online migration), if it is one."""
        group = world.shard.group(self.group_id)
        if not isinstance(group, ConsumerGroup):
            return None
        return group.members.get(self.member_id)

    def owned(self, world: World) -> frozenset[TopicPartition]:
        out = set()
        for topic, ps in self.owned_names.items():
            info = world.topics.get(topic)
            if info is not None and self.topic_ids.get(topic, info.topic_id) == info.topic_id:
                out |= {(info.topic_id, p) for p in ps if p < info.num_partitions}
        return frozenset(out)

    def counts_as_owner(self, world: World) -> bool:
        if isinstance(world.shard.group(self.group_id), ConsumerGroup):
            return self._consumer_member(world) is not None
        group = self._group(world)
        if group is None or self.member_id not in group.members or self.restarts_seen != world.restarts:
            return False
        if self.generation == group.generation_id or (self.declared and self.generation == group.generation_id - 1):
            return True
        # Behind the group: a zombie, unless the coordinator answered it without error since the
        # group moved on (then it had every reason to believe it still owns its partitions).
        since = world.generation_since.get(self.group_id)
        return since is not None and self.last_ok >= since[1]

    def converged(self, world: World) -> bool:
        consumer_group = world.shard.group(self.group_id)
        if isinstance(consumer_group, ConsumerGroup):
            member = self._consumer_member(world)
            if member is None or self.waiting is not None or self.phase != STABLE or self.needs_rejoin(world):
                return False
            owned = {(world.topics[t].topic_id, p) for t, ps in self.owned_names.items() if t in world.topics
                     for p in ps}
            target = {(t, p) for t, ps in consumer_group.target(self.member_id).items() for p in ps}
            held = {(t, p) for t, ps in member.assigned_partitions.items() for p in ps}
            return (
                self.generation == member.member_epoch == consumer_group.group_epoch
                and owned == held == target
            )
        group = self._group(world)
        if group is None or self.member_id not in group.members or self.waiting is not None:
            return False
        return (
            self.phase == STABLE
            and not self.needs_rejoin(world)
            and self.generation == group.generation_id
            and self.owned_names == decode(group.members[self.member_id].assignment)
        )

    def describe(self, world: World) -> str:
        static = f" (static {self.instance_id})" if self.instance_id else ""
        member = self._consumer_member(world)
        group = self._group(world)
        if member is not None:
            server = f"member epoch {member.member_epoch} in the consumer group"
        elif group is not None and self.member_id in group.members:
            server = f"group generation {group.generation_id}"
        else:
            server = "not a member"
        doing = [f"waiting on #{self.waiting}"] if self.waiting is not None else []
        if self.needs_rejoin(world):
            doing.append("needs to rejoin")
        if self.snapshot is not None:
            # a leader rejoins when the metadata of these topics changes, and of no others
            doing.append(f"assigned as leader for {' '.join(sorted(self.snapshot[0])) or 'no topics'}")
        return (
            f"{self.name} member {self.member_id or '-'}{static}: {self.phase} at generation {self.generation}"
            f" ({server}){''.join(', ' + d for d in doing)}"
        )

    def wanted(self, world: World) -> frozenset[TopicPartition]:
        return frozenset(
            (world.topics[t].topic_id, p) for t in self.topics(world) if t in world.topics
            for p in range(world.topics[t].num_partitions)
        )
