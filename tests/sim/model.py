"""The one interface every model client implements, whatever protocol it speaks.

A scenario holds a list of ``ModelClient``s and never asks which protocol one speaks: it picks a client,
asks it for its next request, and the world delivers replies (or failures) back to it. The checkers
read every client through the same few questions: which partitions do you own (by topic id, the
identity both protocols resolve to), does the coordinator still count you as an owner, are you
done (liveness), which partitions does your subscription want. So a classic member and a KIP-848
member sit side by side, in separate groups of one shard or in one group (a rolling upgrade, the
``mixed`` kind of ``scenario.py``), under the same checks.

Each implementation checks its own client-side promise as it goes (the epoch or generation it is
told never goes back while it stays the same member) and raises ``SimulationFailure`` otherwise.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING
from uuid import UUID

from coordinator.core.requests import Request

if TYPE_CHECKING:
    from tests.sim.world import World

TopicPartition = tuple[UUID, int]


class ModelClient(ABC):
    name: str  # stable label for the trace (the member id may change)
    member_id: str
    group_id: str
    instance_id: str | None  # group.instance.id of a static member
    alive: bool  # False: crashed or left, for good
    paused: bool  # stalled (GC pause, network partition): sends nothing, keeps what it owns
    waiting: int | None  # ref of the request it waits on; None: free to send
    sent_at: int
    # An answer made it want to send the next request at once, in the same poll (the Java client's
    # join loop: MEMBER_ID_REQUIRED -> JoinGroup, JoinGroup answer -> SyncGroup, REBALANCE_IN_PROGRESS
    # -> JoinGroup). The scenario lets it, unless it is paused.
    follow_up: bool

    def __init__(self, name: str, group_id: str) -> None:
        self.name = name
        self.member_id = ""
        self.group_id = group_id
        self.instance_id = None
        self.alive = True
        self.paused = False
        self.waiting = None
        self.sent_at = 0
        self.follow_up = False

    # ---- driving ------------------------------------------------------------------------------------

    @abstractmethod
    def next_request(self, world: World) -> Request | None:
        """The request the client sends now, or None (it waits on one, or has nothing to say)."""

    def sent(self, world: World, request: Request) -> None:
        """The world put ``request`` on the wire; the client waits for its answer."""
        self.waiting = request.ref
        self.sent_at = world.now

    def give_up(self, world: World) -> None:
        """Request timeout: stop waiting; the late answer, if any, is ignored."""
        if self.waiting is not None:
            flight = world.inflight.get(self.waiting)
            if flight is not None:
                flight.fate = "ignored"
                self.on_lost(world, flight.request)
            self.waiting = None

    @abstractmethod
    def on_reply(self, world: World, request: Request, response: object) -> None: ...

    @abstractmethod
    def on_lost(self, world: World, request: Request) -> None:
        """The request failed on the network: no answer will come."""

    @abstractmethod
    def subscribe(self, names: tuple[str, ...], regex: str) -> None:
        """Change the subscription: topic names and a regex ("" for none)."""

    @abstractmethod
    def leave(self) -> bool:
        """Start leaving the group; False if this client stops without a word (static members)."""

    def resume(self) -> None:
        self.paused = False

    @abstractmethod
    def on_coordinator_restart(self) -> None:
        """The coordinator restarted (its soft state is gone, every connection broke)."""

    # ---- what the checkers read -----------------------------------------------------------------------

    @abstractmethod
    def owned(self, world: World) -> frozenset[TopicPartition]:
        """What the client consumes right now."""

    @abstractmethod
    def counts_as_owner(self, world: World) -> bool:
        """Whether the coordinator still answers for what this client owns. False for a zombie (a member
        the group moved on without, that will learn it on its next request): no protocol can stop a
        stalled process from believing it owns partitions; Kafka fences its commits instead."""

    @abstractmethod
    def converged(self, world: World) -> bool:
        """Done: a member at the group's latest assignment, with nothing left to revoke or ask."""

    @abstractmethod
    def describe(self, world: World) -> str:
        """One line for a liveness report: its name, member id, the epoch or generation it has and the
        coordinator's, and what it is doing (waiting on a request, about to rejoin)."""

    @abstractmethod
    def wanted(self, world: World) -> frozenset[TopicPartition]:
        """Every partition this client's subscription covers (the group must own their union once)."""

