"""A model KIP-848 client (``group.protocol=consumer``), as librdkafka behaves.

A full request on (re)join and after any failure, ``TopicPartitions`` only to acknowledge a new
assignment, instant reconciliation (it drops revoked partitions and takes new ones as soon as a response
tells it), and on UNKNOWN_MEMBER_ID / FENCED_MEMBER_EPOCH it drops everything and rejoins with epoch 0
and the same member id. Client-side promise checked: the epoch it is told never goes back between two
rejoins.

GROUP_ID_NOT_FOUND (fatal in librdkafka: the application restarts the consumer) comes where an online
migration refuses it: a join to a classic group that cannot be upgraded yet, or a heartbeat to a group
that was converted back to a classic group while the client was away. The model is that restart: it
drops everything and joins again later.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from uuid import UUID

from coordinator.core.consumer.group import ConsumerGroup
from coordinator.core.errors import ErrorCode
from coordinator.core.requests import ConsumerGroupHeartbeat, HeartbeatTopicPartitions, Request

from .model import ModelClient, TopicPartition
from .world import SimulationFailure

if TYPE_CHECKING:
    from .world import World

REBALANCE_TIMEOUT_MS = 6_000
REJOIN_ERRORS = {ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_MEMBER_EPOCH}


class ConsumerClient(ModelClient):
    def __init__(self, name: str, group_id: str, names: tuple[str, ...], regex: str, migrating: bool = False) -> None:
        super().__init__(name, group_id)
        self.migrating = migrating  # its group also has classic members (a rolling upgrade)
        self.member_id = name  # KIP-1082: the client makes its own id
        self.names = names
        self.regex = regex
        self.epoch = 0  # 0 = must (re)join
        self.assignment: dict[UUID, frozenset[int]] = {}
        self.full = True  # next request is a full one
        self.ack = False  # next request carries TopicPartitions (acknowledging a new assignment)
        self.subscription_dirty = False
        self.last_seen_epoch = -1
        self.leaving = False

    # ---- driving ------------------------------------------------------------------------------------

    def subscribe(self, names: tuple[str, ...], regex: str) -> None:
        self.names, self.regex = names, regex
        self.subscription_dirty = True

    def leave(self) -> bool:
        self.leaving = True
        return True

    def resume(self) -> None:
        self.paused = False
        self.full = True

    def next_request(self, world: World) -> Request | None:
        if self.waiting is not None:
            return None
        ref = world.next_ref()
        owned = tuple(
            HeartbeatTopicPartitions(t, tuple(sorted(ps))) for t, ps in sorted(self.assignment.items()) if ps
        )
        if self.leaving:
            return ConsumerGroupHeartbeat(ref, self.group_id, self.member_id, -1)
        if self.epoch == 0 or self.full:
            return ConsumerGroupHeartbeat(
                ref, self.group_id, self.member_id, self.epoch,
                rebalance_timeout_ms=REBALANCE_TIMEOUT_MS,
                subscribed_topic_names=self.names, subscribed_topic_regex=self.regex,
                topic_partitions=() if self.epoch == 0 else owned,
                client_id=self.member_id, client_host="/10.0.0.1",
            )
        return ConsumerGroupHeartbeat(
            ref, self.group_id, self.member_id, self.epoch,
            subscribed_topic_names=self.names if self.subscription_dirty else None,
            subscribed_topic_regex=self.regex if self.subscription_dirty else None,
            topic_partitions=owned if self.ack else None,
            client_id=self.member_id, client_host="/10.0.0.1",
        )

    def on_reply(self, world: World, request: Request, response: Any) -> None:
        assert isinstance(request, ConsumerGroupHeartbeat)
        if request.ref != self.waiting:
            return  # an answer to a request it already gave up on
        self.waiting = None
        if request.member_epoch < 0:
            self.leaving = False
            self.alive = False  # a client that left is done
            self.assignment = {}
            return
        if response.error_code in REJOIN_ERRORS or (self.migrating and response.error_code == ErrorCode.GROUP_ID_NOT_FOUND):
            self.assignment = {}
            self.epoch = 0
            self.full = True
            self.ack = False
            self.last_seen_epoch = -1
            return
        if response.error_code != ErrorCode.NONE:
            raise SimulationFailure(f"{self.name}: unexpected {response.error_code!r} {response.error_message}")
        if response.member_epoch < self.last_seen_epoch:
            raise SimulationFailure(
                f"{self.name} saw its epoch go back: {self.last_seen_epoch} -> {response.member_epoch}"
            )
        self.last_seen_epoch = response.member_epoch
        self.epoch = response.member_epoch
        self.full = False
        if request.topic_partitions is not None:
            self.ack = False
        if request.subscribed_topic_names is not None:
            self.subscription_dirty = False
        if response.assignment is not None:
            new = {t: frozenset(ps) for t, ps in response.assignment if ps}
            if new != self.assignment:
                self.assignment = new  # revoke and assign at once, then acknowledge
                self.ack = True

    def on_lost(self, world: World, request: Request) -> None:
        if request.ref != self.waiting:
            return
        self.waiting = None
        self.full = True  # clients resend everything after a failed request
        if self.leaving:
            self.leaving = False
            self.alive = False  # it closed anyway: the session timeout will fence it
            self.assignment = {}

    def on_coordinator_restart(self) -> None:
        pass  # a consumer group's state is all in the log: nothing the client saw is undone

    # ---- what the checkers read -----------------------------------------------------------------------

    def _member(self, world: World) -> Any:
        group = world.shard.group(self.group_id)
        if not isinstance(group, ConsumerGroup):
            return None
        return group.members.get(self.member_id)

    def owned(self, world: World) -> frozenset[TopicPartition]:
        return frozenset((t, p) for t, ps in self.assignment.items() for p in ps)

    def counts_as_owner(self, world: World) -> bool:
        # A client fenced while paused is a zombie: it learns on its next heartbeat.
        return self._member(world) is not None

    def converged(self, world: World) -> bool:
        member = self._member(world)
        if member is None:
            return False
        group = world.shard.group(self.group_id)
        assert isinstance(group, ConsumerGroup)
        return self.assignment == dict(member.assigned_partitions) == dict(group.target(self.member_id))

    def describe(self, world: World) -> str:
        member = self._member(world)
        server = "not a member" if member is None else f"member epoch {member.member_epoch}"
        doing = f", waiting on #{self.waiting}" if self.waiting is not None else ""
        return f"{self.name} member {self.member_id}: epoch {self.epoch} ({server}){doing}"

    def wanted(self, world: World) -> frozenset[TopicPartition]:
        member = self._member(world)
        if member is None:
            return frozenset()
        out: set[TopicPartition] = set()
        for topic_id in world.shard.consumer.member_topic_ids(member):
            info = world.shard.topics.by_id(topic_id)
            assert info is not None
            out |= {(topic_id, p) for p in range(info.num_partitions)}
        return frozenset(out)
