"""The safety and liveness checks, shared by every client type and every group type.

Checked after EVERY step (``check``):

* the live shard's durable view equals the shadow shard's, which replayed the log record by record;
  the timers the world holds are exactly the shard's;
* the core's own invariants: ``check_consumer_invariants`` (KIP-848: no partition in two members'
  assigned ∪ pending-revocation sets, indexes match) and ``check_invariants`` (classic: leader is a
  member, static map, a Stable/Empty group equals its last persisted record);
* no partition is owned by two clients that the coordinator still counts as owners (each client type
  says when it does: ``ModelClient.counts_as_owner``), whatever protocol they speak;
* epochs never go back on the server: a consumer group's group and assignment epochs, each member's
  epoch while it stays a member, a classic group's generation, also across an online conversion
  between the two (an EMPTY group replaced by one of the other type starts over, as in Kafka). Each
  client checks what it is told.

After the faults and at the end (``check_full_replay``): a full replay of the log, a replay of the
compacted log and a load of the log through the record log (as a restarted server loads it) all
rebuild the live durable state. (A restart is itself a full replay, checked against
the shadow from then on.)

Liveness (``converged``): every group is Stable with exactly the live clients as members, every client
reports itself converged, and the union of what the clients want is owned exactly once.
"""

from __future__ import annotations

from collections.abc import Sequence

from coordinator.core.classic.group import ClassicGroup
from coordinator.core.consumer.group import ConsumerGroup
from tests.core.consumer.harness import check_consumer_invariants
from tests.core.harness import check_invariants

from .model import ModelClient, TopicPartition
from .world import SimulationFailure, World, compacted, loaded, replayed


class Checker:
    def __init__(self, world: World) -> None:
        self.world = world
        # server-side monotonicity baselines, forgotten at restarts (soft state and unacknowledged
        # writes are lost there, and nobody acted on them)
        self.group_epochs: dict[str, tuple[int, int]] = {}
        self.group_kinds: dict[str, tuple[str, bool]] = {}  # group id -> (type, empty) when last seen
        self.member_epochs: dict[tuple[str, str], int] = {}
        self.restarts = 0

    def check(self, clients: Sequence[ModelClient]) -> None:
        world = self.world
        if world.shard.durable_view() != world.shadow.durable_view():
            raise SimulationFailure("live state differs from the replay of the log")
        if world.timers != world.shard.timers.deadlines:
            raise SimulationFailure("the timers armed differ from the shard's")
        check_consumer_invariants(world.shard)
        check_invariants(world.shard)
        self.check_ownership(clients)
        self.check_epochs()

    def check_ownership(self, clients: Sequence[ModelClient]) -> None:
        seen: dict[tuple[str, TopicPartition], str] = {}
        for client in clients:
            if not client.alive or not client.counts_as_owner(self.world):
                continue
            for tp in client.owned(self.world):
                other = seen.setdefault((client.group_id, tp), client.name)
                if other != client.name:
                    raise SimulationFailure(f"{client.group_id}: {tp} owned by clients {other} and {client.name}")

    def check_epochs(self) -> None:
        if self.restarts != self.world.restarts:
            self.restarts = self.world.restarts
            self.group_epochs.clear()
            self.member_epochs.clear()
            self.group_kinds.clear()
        present: set[tuple[str, str]] = set()
        for group_id, group in self.world.shard.groups.items():
            if isinstance(group, ConsumerGroup):
                now = (group.group_epoch, group.assignment_epoch)
                members = {m: member.member_epoch for m, member in group.members.items()}
            elif isinstance(group, ClassicGroup):
                now = (group.generation_id, group.generation_id)
                members = {}
                since = self.world.generation_since.get(group_id)
                if since is None or since[0] != group.generation_id:
                    self.world.generation_since[group_id] = (group.generation_id, self.world.ticks)
            else:
                continue
            kind = self.group_kinds.get(group_id)
            if kind is not None and kind[0] != group.group_type and (kind[1] or group_id in self.world.emptied):
                self.group_epochs.pop(group_id, None)  # an empty group replaced offline: starts over
            self.group_kinds[group_id] = (group.group_type, group.is_empty)
            before = self.group_epochs.get(group_id)
            if before is not None and (now[0] < before[0] or now[1] < before[1]):
                raise SimulationFailure(f"{group_id}: epochs went back from {before} to {now}")
            self.group_epochs[group_id] = now
            for member_id, epoch in members.items():
                key = (group_id, member_id)
                present.add(key)
                last = self.member_epochs.get(key)
                if last is not None and 0 <= epoch < last:
                    raise SimulationFailure(f"{key}: member epoch went back from {last} to {epoch}")
                self.member_epochs[key] = max(epoch, last if last is not None else -1)
        for key in set(self.member_epochs) - present:
            del self.member_epochs[key]  # removed: a rejoin starts over
        for group_id in set(self.group_epochs) - set(self.world.shard.groups):
            del self.group_epochs[group_id]
            self.group_kinds.pop(group_id, None)
        self.world.emptied.clear()

    def check_full_replay(self) -> None:
        live = self.world.shard.durable_view()
        if replayed(self.world.log).durable_view() != live:
            raise SimulationFailure("a full replay of the log differs from the live state")
        if replayed(compacted(self.world.log)).durable_view() != live:
            raise SimulationFailure("the replay of the compacted log differs from the live state")
        if loaded(self.world.log, self.world.entries).durable_view() != live:
            raise SimulationFailure("loading the log through the record log differs from the live state")

    def converged(self, group_ids: Sequence[str], clients: Sequence[ModelClient]) -> bool:
        live = [c for c in clients if c.alive]
        for group_id in group_ids:
            group = self.world.shard.group(group_id)
            mine = [c for c in live if c.group_id == group_id]
            if group is None:
                if mine:
                    return False
                continue
            if set(group.members) != {c.member_id for c in mine}:
                return False
            if not mine:
                continue
            if group.state_name != "Stable" or not all(c.converged(self.world) for c in mine):
                return False
            owned = [tp for c in mine for tp in c.owned(self.world)]
            wanted: set[TopicPartition] = set()
            for c in mine:
                wanted |= c.wanted(self.world)
            if len(owned) != len(set(owned)) or set(owned) != wanted:
                return False
        return True
