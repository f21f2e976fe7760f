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
reports itself converged, and the union of what the clients want is owned exactly once. When it fails,
``unconverged`` says for each group what is wrong and where each client stands (member, epoch or
generation, what it owns and what it subscribes to).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

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
        return not self.unconverged(group_ids, clients)

    def unconverged(self, group_ids: Sequence[str], clients: Sequence[ModelClient]) -> list[str]:
        """One report per group that has not converged (empty: all have): the group, what is wrong
        with it, and each live client's member, epoch or generation, what it owns and wants."""
        return [report for group_id in group_ids if (report := self._group_report(group_id, clients))]

    def _group_report(self, group_id: str, clients: Sequence[ModelClient]) -> str:
        world = self.world
        group = world.shard.group(group_id)
        mine = [c for c in clients if c.alive and c.group_id == group_id]
        problems: list[str] = []
        if group is None:
            if not mine:
                return ""
            head = f"{group_id}: no such group on the coordinator"
            problems.append(f"live clients {sorted(c.name for c in mine)}")
        else:
            head = f"{group_id}: {_group_state(group)}"
            members, ids = set(group.members), {c.member_id for c in mine}
            if members - ids:
                problems.append(f"members without a live client {sorted(members - ids)}")
            strangers = [c.name for c in mine if c.member_id not in members]
            if strangers:
                problems.append(f"live clients that are not members {strangers}")
            if not mine and not problems:
                return ""
            if mine and group.state_name != "Stable":
                problems.append(f"{group.state_name}, not Stable")
            waiting = [c.name for c in mine if not c.converged(world)]
            if waiting:
                problems.append(f"clients not converged {waiting}")
            owned = [tp for c in mine for tp in c.owned(world)]
            wanted: set[TopicPartition] = set()
            for c in mine:
                wanted |= c.wanted(world)
            twice = {tp for tp in owned if owned.count(tp) > 1}
            if twice:
                problems.append(f"owned twice: {self._partitions(twice)}")
            if wanted - set(owned):
                problems.append(f"subscribed to but owned by nobody: {self._partitions(wanted - set(owned))}")
            if set(owned) - wanted:
                problems.append(f"owned but subscribed to by nobody: {self._partitions(set(owned) - wanted)}")
            if not problems:
                return ""
        lines = [f"{head}; {'; '.join(problems)}"]
        for c in mine:
            done = "converged" if c.converged(world) else "NOT converged"
            lines.append(
                f"  {c.describe(world)}, {done}; owns {self._partitions(c.owned(world))};"
                f" subscribed to {self._partitions(c.wanted(world))}"
            )
        return "\n".join(lines)

    def _partitions(self, tps: Iterable[TopicPartition]) -> str:
        """``t0[0,2] t3[1]``: partitions by topic name (an id no longer in the catalog shows as such)."""
        by_topic: dict[str, list[int]] = {}
        for topic_id, partition in tps:
            by_topic.setdefault(self.world.topic_names.get(topic_id, str(topic_id)), []).append(partition)
        if not by_topic:
            return "nothing"
        return " ".join(f"{t}[{','.join(map(str, sorted(ps)))}]" for t, ps in sorted(by_topic.items()))


def _group_state(group: object) -> str:
    if isinstance(group, ConsumerGroup):
        epochs = ", ".join(f"{m} {member.member_epoch}" for m, member in group.members.items())
        return (
            f"consumer group {group.state_name}, group epoch {group.group_epoch}, assignment epoch"
            f" {group.assignment_epoch}, member epochs {{{epochs}}}"
        )
    if isinstance(group, ClassicGroup):
        return (
            f"classic group {group.state_name}, generation {group.generation_id}, leader {group.leader_id},"
            f" protocol {group.protocol_name}"
        )
    return type(group).__name__
