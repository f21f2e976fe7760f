"""The ``uniform`` assignor for a homogeneous group (every member subscribes to the same topics).

Counterpart of Kafka's ``UniformHomogeneousAssignmentBuilder`` (4.1+ behaviour, KAFKA-18688). See
:mod:`coordinator.core.assignors.uniform` for the theory of operation; this module is the code.

Data layout: topics are numbered by rank (ascending topic id) and per-topic state lives in lists
indexed by rank. The work is done on sets and slices, never with one Python object per partition:
kept partitions stay the member's own frozensets (copied only when trimmed), the partitions to
hand out are a list of ``(rank, range or sorted list)`` chunks, and each unfilled member takes a
slice of that stream.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import itemgetter

from coordinator.core.assignors._helpers import partition_counts
from coordinator.core.assignors.api import (
    GroupAssignment,
    GroupSpec,
    MemberAssignment,
    PartitionAssignorError,
    SubscribedTopicDescriber,
)

_first = itemgetter(0)


def assign_homogeneous(group_spec: GroupSpec, topics: SubscribedTopicDescriber) -> GroupAssignment:
    """Balanced (sizes differ by at most one) and maximally sticky assignment of a homogeneous group."""
    member_ids = group_spec.sorted_member_ids
    if not member_ids:
        return {}
    members = group_spec.members
    counts_by_id = partition_counts(members[member_ids[0]].subscribed_topic_ids, topics)
    if not counts_by_id:
        return {member_id: {} for member_id in member_ids}
    topic_ids = list(counts_by_id)
    counts = list(counts_by_id.values())
    rank_of = {topic_id: rank for rank, topic_id in enumerate(topic_ids)}

    member_count = len(member_ids)
    minimum_quota, remaining_extra = divmod(sum(counts), member_count)

    # Partitions some member currently holds (valid and first-claimed), per topic rank.
    claimed: list[set[int]] = [set() for _ in topic_ids]
    # Partitions over a member's quota, released for hand-out after the never-claimed ones.
    released: list[tuple[int, Sequence[int]]] = []
    # (member index, partitions still to receive), in member order.
    unfilled: list[tuple[int, int]] = []
    assignments: list[MemberAssignment] = []

    # Pass 1: keep each member's current partitions up to its quota.
    for member_index, member_id in enumerate(member_ids):
        quota = minimum_quota
        has_extra = remaining_extra > 0
        if has_extra:
            quota += 1

        kept: MemberAssignment = {}
        current = members[member_id].assigned_partitions
        if current:
            ranked = []
            for topic_id, partitions in current.items():
                rank = rank_of.get(topic_id)
                if rank is not None:  # else no longer subscribed: dropped
                    ranked.append((rank, partitions))
            ranked.sort(key=_first)
            for rank, partitions in ranked:
                usable = _claim(partitions, counts[rank], claimed[rank])
                if not usable:
                    continue
                if len(usable) <= quota:
                    kept[topic_ids[rank]] = usable
                    quota -= len(usable)
                else:
                    ordered = sorted(usable)
                    if quota > 0:
                        kept[topic_ids[rank]] = frozenset(ordered[:quota])
                        released.append((rank, ordered[quota:]))
                        quota = 0
                    else:
                        released.append((rank, ordered))

        # A member that cannot fill its extra slot from what it already holds gives the slot up,
        # unless it is one of the last members, all of whom must take an extra partition. So an
        # assignment that is already balanced is never reshuffled.
        if quota > 0 and has_extra and member_count - member_index > remaining_extra:
            quota -= 1
            has_extra = False
        if quota > 0:
            unfilled.append((member_index, quota))
        if has_extra:
            remaining_extra -= 1
        assignments.append(kept)

    # The partitions to hand out: never-claimed ones per topic in ascending order, then released.
    chunks: list[tuple[int, Sequence[int]]] = []
    for rank, count in enumerate(counts):
        taken = claimed[rank]
        if not taken:
            if count:
                chunks.append((rank, range(count)))
        elif len(taken) < count:
            chunks.append((rank, [p for p in range(count) if p not in taken]))
    chunks.extend(released)

    # Pass 2: fill the members below quota, in member order, from the chunk stream.
    chunk_index = 0
    offset = 0
    for member_index, need in unfilled:
        kept = assignments[member_index]
        in_order = True  # are kept's keys still in ascending rank order?
        last_rank = rank_of[next(reversed(kept))] if kept else -1
        while need and chunk_index < len(chunks):
            rank, chunk = chunks[chunk_index]
            take = min(need, len(chunk) - offset)
            piece = frozenset(chunk[offset : offset + take])
            topic_id = topic_ids[rank]
            existing = kept.get(topic_id)
            if existing is None:
                kept[topic_id] = piece
                in_order = in_order and rank > last_rank
                last_rank = rank
            else:
                kept[topic_id] = existing | piece
            need -= take
            offset += take
            if offset == len(chunk):
                chunk_index += 1
                offset = 0
        if not in_order:  # canonical shape: keys in ascending topic id order
            ordered_ids = sorted(kept, key=rank_of.__getitem__)
            assignments[member_index] = {topic_id: kept[topic_id] for topic_id in ordered_ids}
    if chunk_index < len(chunks):
        raise PartitionAssignorError("Partitions were left unassigned")

    return dict(zip(member_ids, assignments, strict=True))


def _claim(partitions: frozenset[int], count: int, claimed: set[int]) -> frozenset[int]:
    """The usable part of a member's current ``partitions`` of a topic, now marked as claimed.

    Drops numbers outside ``[0, count)`` and partitions an earlier member already claimed.
    """
    if type(partitions) is not frozenset:
        partitions = frozenset(partitions)
    if partitions and (min(partitions) < 0 or max(partitions) >= count):
        partitions = frozenset(p for p in partitions if 0 <= p < count)
    if not claimed.isdisjoint(partitions):
        partitions = partitions - claimed
    claimed.update(partitions)
    return partitions
