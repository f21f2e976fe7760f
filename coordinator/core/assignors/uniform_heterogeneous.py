"""The ``uniform`` assignor for a heterogeneous group (members subscribe to different topics).

Counterpart of Kafka's ``UniformHeterogeneousAssignmentBuilder``. See
:mod:`coordinator.core.assignors.uniform` for the theory of operation; this module is the code.

Data layout: members are numbered 0..M-1 in member id order; each topic has an owner list (``int``
member number per partition, -1 for none) and each member a load (its partition count). Partition
numbers only become sets again when the result is built.
"""

from __future__ import annotations

import heapq
from uuid import UUID

from coordinator.core.assignors._helpers import partition_counts
from coordinator.core.assignors.api import (
    GroupAssignment,
    GroupSpec,
    SubscribedTopicDescriber,
)

_UNOWNED = -1


def assign_heterogeneous(
    group_spec: GroupSpec, topics: SubscribedTopicDescriber
) -> GroupAssignment:
    """As balanced as the subscriptions allow, sticky, each partition to one of its subscribers."""
    return _HeterogeneousBuilder(group_spec, topics).build()


class _HeterogeneousBuilder:
    __slots__ = ("group_spec", "load", "member_ids", "num_partitions", "owners", "subscribers")

    def __init__(self, group_spec: GroupSpec, topics: SubscribedTopicDescriber) -> None:
        self.group_spec = group_spec
        self.member_ids = group_spec.sorted_member_ids
        members = group_spec.members
        subscribers: dict[UUID, list[int]] = {}
        for member_index, member_id in enumerate(self.member_ids):
            for topic_id in members[member_id].subscribed_topic_ids:
                subscribers.setdefault(topic_id, []).append(member_index)
        # Ascending topic id order everywhere below (the dict above has set-iteration order).
        self.num_partitions = partition_counts(subscribers, topics)
        self.subscribers = {topic_id: subscribers[topic_id] for topic_id in self.num_partitions}
        self.owners = {topic_id: [_UNOWNED] * n for topic_id, n in self.num_partitions.items()}
        self.load = [0] * len(self.member_ids)

    def build(self) -> GroupAssignment:
        if not self.num_partitions:
            return {member_id: {} for member_id in self.member_ids}
        self._keep_current()
        self._assign_unowned()
        self._balance()
        return self._result()

    def _topic_order(self, topic_id: UUID) -> tuple[float, int, UUID]:
        """Partitions per subscriber descending, then subscriber count ascending, then topic id."""
        subscriber_count = len(self.subscribers[topic_id])
        return (-self.num_partitions[topic_id] / subscriber_count, subscriber_count, topic_id)

    def _keep_current(self) -> None:
        """Step 1: every member keeps its current partitions of topics it still subscribes to."""
        members = self.group_spec.members
        owners = self.owners
        load = self.load
        for member_index, member_id in enumerate(self.member_ids):
            member = members[member_id]
            subscribed = member.subscribed_topic_ids
            kept = 0
            for topic_id, partitions in member.assigned_partitions.items():
                if topic_id not in subscribed:
                    continue
                owner = owners[topic_id]
                count = len(owner)
                for partition in partitions:
                    if 0 <= partition < count and owner[partition] == _UNOWNED:
                        owner[partition] = member_index
                        kept += 1
            load[member_index] = kept

    def _assign_unowned(self) -> None:
        """Step 2: hand the unowned partitions of each topic to its least loaded subscribers.

        Water-filling per topic: the least loaded subscribers are raised level by level; when the
        partitions run out mid-level the lowest (load, member number) subscribers get the last ones.
        Each subscriber receives a contiguous run of the topic's unowned partitions.
        """
        load = self.load
        pending: dict[UUID, list[int]] = {}
        for topic_id, owner in self.owners.items():
            if _UNOWNED in owner:
                pending[topic_id] = [p for p, o in enumerate(owner) if o == _UNOWNED]
        for topic_id in sorted(pending, key=self._topic_order):
            unowned = pending[topic_id]
            ranked = sorted(self.subscribers[topic_id], key=lambda m: (load[m], m))
            owner = self.owners[topic_id]
            start = 0
            for member_index, share in _water_fill(ranked, load, len(unowned)):
                for partition in unowned[start : start + share]:
                    owner[partition] = member_index
                load[member_index] += share
                start += share

    def _balance(self) -> None:
        """Step 3: move partitions from the most to the least loaded subscriber of each topic.

        Passes over the topics (same order as step 2) until a whole pass moves nothing. Every move
        lowers the sum of squared loads by at least two, so this terminates; unlike Kafka there is
        no cap on the number of passes, which makes the result a fixpoint: recomputing from it
        changes nothing.
        """
        movable = [t for t in self.num_partitions if len(self.subscribers[t]) >= 2]
        movable.sort(key=self._topic_order)
        if not movable:
            return
        last_moved = -1
        while True:
            for topic_index, topic_id in enumerate(movable):
                if topic_index == last_moved:
                    return  # a full pass since the last move moved nothing
                if self._balance_topic(topic_id) or last_moved == -1:
                    last_moved = topic_index

    def _balance_topic(self, topic_id: UUID) -> int:
        """Moves this topic's partitions until no holder is two or more above any subscriber.

        The giver is the most loaded holder (ties: highest member number) and gives its highest
        numbered partition of the topic; the receiver is the least loaded subscriber (ties: lowest
        member number). Returns the number of partitions moved.
        """
        load = self.load
        subscribers = self.subscribers[topic_id]
        lowest = min(load[m] for m in subscribers)
        if max(load[m] for m in subscribers) - lowest <= 1:
            return 0

        owner = self.owners[topic_id]
        held: dict[int, list[int]] = {}
        for partition, member_index in enumerate(owner):
            held.setdefault(member_index, []).append(partition)

        # Lazy heaps: every load change pushes a fresh entry; entries whose recorded load is no
        # longer the member's load are discarded when they surface.
        givers = [(-load[m], -m) for m in subscribers if m in held]
        receivers = [(load[m], m) for m in subscribers]
        heapq.heapify(givers)
        heapq.heapify(receivers)
        moved = 0
        while givers:
            giver_load, giver = -givers[0][0], -givers[0][1]
            if load[giver] != giver_load or not held[giver]:
                heapq.heappop(givers)
                continue
            receiver_load, receiver = receivers[0]
            if load[receiver] != receiver_load:
                heapq.heappop(receivers)
                continue
            if giver_load - receiver_load <= 1:
                break
            partition = held[giver].pop()
            owner[partition] = receiver
            held.setdefault(receiver, []).append(partition)
            load[giver] -= 1
            load[receiver] += 1
            moved += 1
            heapq.heapreplace(givers, (-load[giver], -giver))
            heapq.heapreplace(receivers, (load[receiver], receiver))
            heapq.heappush(receivers, (load[giver], giver))
            heapq.heappush(givers, (-load[receiver], -receiver))
        return moved

    def _result(self) -> GroupAssignment:
        per_member: list[dict[UUID, list[int]]] = [{} for _ in self.member_ids]
        for topic_id, owner in self.owners.items():  # ascending topic id order
            for partition, member_index in enumerate(owner):
                if member_index != _UNOWNED:
                    partitions = per_member[member_index].get(topic_id)
                    if partitions is None:
                        per_member[member_index][topic_id] = [partition]
                    else:
                        partitions.append(partition)
        return {
            member_id: {topic_id: frozenset(p) for topic_id, p in assigned.items()}
            for member_id, assigned in zip(self.member_ids, per_member, strict=True)
        }


def _water_fill(ranked: list[int], load: list[int], units: int) -> list[tuple[int, int]]:
    """How many of ``units`` partitions each member of ``ranked`` gets (members with none omitted).

    ``ranked`` is sorted by (load, member number). The lowest level is raised one partition per
    member at a time, members joining once the level reaches their load; a final partial round
    goes to the first members in ``ranked`` order.
    """
    count = len(ranked)
    level = load[ranked[0]]
    width = 0  # ranked[:width] are at ``level``
    remaining = units
    while True:
        while width < count and load[ranked[width]] <= level:
            width += 1
        if width == count:
            break
        step = (load[ranked[width]] - level) * width
        if remaining < step:
            break
        remaining -= step
        level = load[ranked[width]]
    rounds, extra = divmod(remaining, width)
    level += rounds
    shares = []
    for position in range(width):
        member_index = ranked[position]
        share = level - load[member_index] + (1 if position < extra else 0)
        if share:
            shares.append((member_index, share))
    return shares
