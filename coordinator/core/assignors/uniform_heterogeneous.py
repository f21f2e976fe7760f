"""The ``uniform`` assignor for a heterogeneous group (members subscribe to different topics).

Counterpart of Kafka's ``UniformHeterogeneousAssignmentBuilder``. See
:mod:`coordinator.core.assignors.uniform` for the theory of operation; this module is the code.

Data layout: members are numbered 0..M-1 in member id order and topics 0..T-1 in topic id order.
Each topic has an owner list (member number per partition, -1 for none) and each member a load
(its partition count). Contiguous runs are handled with slice operations and ``groupby``, so the
Python-level work is per run of partitions, not per partition, in the common cases; topic ids
(whose hash is a Python-level method) are only touched at the edges.

Copy-on-write (as Kafka's KAFKA-16864): a member whose partitions did not change and whose input
was already in canonical shape gets a plain copy of its input mapping, and a changed member reuses
its input frozensets for topics in which no partition changed hands. Only touched topics are
rebuilt from the owner lists.
"""

from __future__ import annotations

import heapq
from itertools import groupby
from operator import itemgetter
from uuid import UUID

from coordinator.core.assignors._helpers import partition_counts, subscribers_by_topic
from coordinator.core.assignors.api import (
    GroupAssignment,
    GroupSpec,
    SubscribedTopicDescriber,
)

_UNOWNED = -1
_first = itemgetter(0)


def assign_heterogeneous(
    group_spec: GroupSpec, topics: SubscribedTopicDescriber
) -> GroupAssignment:
    """As balanced as the subscriptions allow, sticky, each partition to one of its subscribers."""
    return _HeterogeneousBuilder(group_spec, topics).build()


class _HeterogeneousBuilder:
    __slots__ = ("changed", "group_spec", "kept", "load", "member_ids", "num_partitions", "owners",
                 "rank_of", "subscribers", "topic_ids", "touched")  # fmt: skip

    def __init__(self, group_spec: GroupSpec, topics: SubscribedTopicDescriber) -> None:
        self.group_spec = group_spec
        self.member_ids = group_spec.sorted_member_ids
        by_topic = subscribers_by_topic(self.member_ids, group_spec.members)
        counts = partition_counts(by_topic, topics)
        self.topic_ids: list[UUID] = list(counts)
        self.rank_of = {topic_id: rank for rank, topic_id in enumerate(self.topic_ids)}
        self.num_partitions: list[int] = list(counts.values())
        self.subscribers: list[list[int]] = [by_topic[t] for t in self.topic_ids]
        self.owners: list[list[int]] = [[_UNOWNED] * n for n in self.num_partitions]
        self.load = [0] * len(self.member_ids)
        # Copy-on-write bookkeeping. ``changed[m]``: member m's result may differ from its input
        # mapping. ``touched[t]``: some partition of topic t changed hands (or was dropped).
        # ``kept[m]``: (topic rank, input frozenset) of the topics member m keeps in full.
        self.changed = [False] * len(self.member_ids)
        self.touched = [False] * len(self.topic_ids)
        self.kept: list[list[tuple[int, frozenset[int]]]] = [[] for _ in self.member_ids]

    def build(self) -> GroupAssignment:
        if not self.topic_ids:
            return {member_id: {} for member_id in self.member_ids}
        self._keep_current()
        self._assign_unowned()
        self._balance()
        return self._result()

    def _topic_order(self, rank: int) -> tuple[float, int, int]:
        """Partitions per subscriber descending, then subscriber count ascending, then topic id."""
        subscriber_count = len(self.subscribers[rank])
        return (-self.num_partitions[rank] / subscriber_count, subscriber_count, rank)

    def _keep_current(self) -> None:
        """Step 1: every member keeps its current partitions of topics it still subscribes to."""
        members = self.group_spec.members
        owners = self.owners
        rank_of = self.rank_of
        load = self.load
        touched = self.touched
        # Topic ranks of each distinct subscription set (frozensets cache their hash).
        allowed_ranks: dict[frozenset[UUID], frozenset[int]] = {}
        for member_index, member_id in enumerate(self.member_ids):
            member = members[member_id]
            if not member.assigned_partitions:
                continue
            subscription = member.subscribed_topic_ids
            allowed = allowed_ranks.get(subscription)
            if allowed is None:
                allowed = frozenset(rank_of[t] for t in subscription)
                allowed_ranks[subscription] = allowed
            held = 0
            changed = False
            full_topics = self.kept[member_index]
            previous_rank = -1
            for topic_id, partitions in member.assigned_partitions.items():
                rank = rank_of.get(topic_id)
                if rank is None or rank not in allowed or not partitions:
                    changed = True  # dropped: unsubscribed, unknown or empty
                    continue
                if rank < previous_rank:
                    changed = True  # not in canonical (ascending topic id) order
                previous_rank = rank
                owner = owners[rank]
                low, high = min(partitions), max(partitions)
                size = len(partitions)
                if (
                    low >= 0
                    and high < len(owner)
                    and high - low + 1 == size
                    and owner[low : high + 1].count(_UNOWNED) == size
                ):  # a free contiguous run: the common case
                    owner[low : high + 1] = [member_index] * size
                    kept = size
                else:
                    kept = 0
                    count = len(owner)
                    for partition in partitions:
                        if 0 <= partition < count and owner[partition] == _UNOWNED:
                            owner[partition] = member_index
                            kept += 1
                held += kept
                if kept == size and type(partitions) is frozenset:
                    full_topics.append((rank, partitions))
                else:
                    changed = True
                    touched[rank] = True
            load[member_index] = held
            self.changed[member_index] = changed

    def _assign_unowned(self) -> None:
        """Step 2: hand the unowned partitions of each topic to its least loaded subscribers.

        Water-filling per topic: the least loaded subscribers are raised level by level; when the
        partitions run out mid-level the lowest (load, member number) subscribers get the last ones.
        Each subscriber receives a contiguous run of the topic's unowned partitions.
        """
        load = self.load
        pending: dict[int, range | list[int]] = {}
        for rank, owner in enumerate(self.owners):
            free = owner.count(_UNOWNED)
            if free == len(owner):
                if free:
                    pending[rank] = range(free)
            elif free:
                pending[rank] = [p for p, o in enumerate(owner) if o == _UNOWNED]
        for rank in sorted(pending, key=self._topic_order):
            unowned = pending[rank]
            ranked = sorted(self.subscribers[rank], key=load.__getitem__)  # stable: ties by member
            owner = self.owners[rank]
            start = 0
            self.touched[rank] = True
            for member_index, share in _water_fill(ranked, load, len(unowned)):
                self.changed[member_index] = True
                run = unowned[start : start + share]
                if isinstance(run, range):
                    owner[run.start : run.stop] = [member_index] * share
                else:
                    for partition in run:
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
        movable = [r for r in range(len(self.topic_ids)) if len(self.subscribers[r]) >= 2]
        movable.sort(key=self._topic_order)
        if not movable:
            return
        last_moved = -1
        while True:
            for position, rank in enumerate(movable):
                if position == last_moved:
                    return  # a full pass since the last move moved nothing
                if self._balance_topic(rank) or last_moved == -1:
                    last_moved = position

    def _balance_topic(self, rank: int) -> int:
        """Moves this topic's partitions until no holder is two or more above any subscriber.

        The giver is the most loaded holder (ties: highest member number) and gives its highest
        numbered partition of the topic; the receiver is the least loaded subscriber (ties: lowest
        member number). Returns the number of partitions moved.
        """
        load = self.load
        subscribers = self.subscribers[rank]
        subscriber_loads = [load[m] for m in subscribers]
        if max(subscriber_loads) - min(subscriber_loads) <= 1:
            return 0
        changed = self.changed

        owner = self.owners[rank]
        held: dict[int, list[int]] = {}
        position = 0
        for member_index, run in groupby(owner):
            end = position + len(list(run))
            held.setdefault(member_index, []).extend(range(position, end))
            position = end

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
            changed[giver] = changed[receiver] = True
            moved += 1
            heapq.heapreplace(givers, (-load[giver], -giver))
            heapq.heapreplace(receivers, (load[receiver], receiver))
            heapq.heappush(receivers, (load[giver], giver))
            heapq.heappush(givers, (-load[receiver], -receiver))
        if moved:
            self.touched[rank] = True
        return moved

    def _result(self) -> GroupAssignment:
        members = self.group_spec.members
        touched = self.touched
        # Per member: (rank, start, end) runs of the touched topics, ascending rank and partition.
        runs: list[list[tuple[int, int, int]]] = [[] for _ in self.member_ids]
        for rank, owner in enumerate(self.owners):
            if not touched[rank]:
                continue
            position = 0
            for member_index, run in groupby(owner):
                end = position + len(list(run))
                if member_index != _UNOWNED:  # cannot happen after step 2; never index with -1
                    runs[member_index].append((rank, position, end))
                position = end

        topic_ids = self.topic_ids
        result: GroupAssignment = {}
        for member_index, member_id in enumerate(self.member_ids):
            if not self.changed[member_index]:
                # Same partitions as the input, already canonical. Copying a dict reuses its
                # stored hashes, so this costs no UUID.__hash__ calls.
                result[member_id] = dict(members[member_id].assigned_partitions)
                continue
            pieces: list[tuple[int, frozenset[int]]] = [
                (rank, partitions)
                for rank, partitions in self.kept[member_index]
                if not touched[rank]
            ]
            previous_rank = -1
            for rank, start, end in runs[member_index]:
                if rank != previous_rank:
                    pieces.append((rank, frozenset(range(start, end))))
                    previous_rank = rank
                else:  # another run of the same topic
                    pieces[-1] = (rank, pieces[-1][1].union(range(start, end)))
            pieces.sort(key=_first)
            result[member_id] = {topic_ids[rank]: partitions for rank, partitions in pieces}
        return result


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
