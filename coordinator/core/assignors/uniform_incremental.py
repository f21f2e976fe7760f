"""The ``uniform`` assignor's answer for a homogeneous group, derived from the previous target
without visiting every member's partitions: what a join or a leave costs in a big group.

Theory of operation
===================

Input: the members (ids), their current targets, and the partition count of every topic they all
subscribe to. Precondition, checked here in bulk (set operations over whole frozensets, no Python
step per partition): the current targets are *valid*: only subscribed topics, partition numbers in
range, no partition held twice. If they are not, :func:`rebalance_homogeneous` returns ``None`` and
the caller runs the full assignor (which also repairs invalid input).

With ``P`` partitions and ``M`` members, ``q = P // M`` and ``e = P % M``:

1. Order the members by current load, most loaded first, ties by member id. The first ``e`` get a
   quota of ``q + 1``, the rest ``q``.
2. A member above its quota releases the excess: its highest partitions of its highest topic ids.
3. The pool is the partitions nobody holds (a leaver's, new partitions of a topic), per topic
   ascending, then the released ones in release order. Members below quota, in member id order,
   take contiguous slices of the pool up to their quota.

So a newcomer takes its share from the most loaded members, and a leaver's partitions go to the
least loaded ones. Only the members that give or take partitions are touched; every other member's
target is handed back as the very same object (the caller writes records only for changed ones).

Guarantees, the same as the full homogeneous run's (:mod:`.uniform`): every partition of the
subscribed topics is assigned exactly once; sizes differ by at most one; members keep as many of
their current partitions as any balanced assignment could let them keep, since the ``e`` extra
slots go to the most loaded members: kept = sum(min(c_i, q)) + min(e, #{i: c_i > q}). Which
member holds an extra partition may differ from the full run's choice (that one favours low member
ids); both are balanced and valid, and the full run returns either unchanged (a fixpoint), so a
later full run moves nothing. The result is deterministic in its input (no mapping or set order
matters), and it is written as target records like any other, so replay never recomputes it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from uuid import UUID

__all__ = ["rebalance_homogeneous"]

Assignment = Mapping[UUID, frozenset[int]]


def rebalance_homogeneous(
    member_ids: Iterable[str], current: Mapping[str, Assignment], counts: Mapping[UUID, int]
) -> dict[str, Assignment] | None:
    """The new target of every member in ``member_ids`` (see the module docstring), or ``None``
    when ``current`` (member id -> target; absent = none) is not valid for ``counts`` (topic id ->
    partitions, the topics every member subscribes to)."""
    empty: Assignment = {}
    # Keyed by the topic id's int: ``UUID.__hash__`` is a Python call, and this loop is per member.
    held: dict[int, list[frozenset[int]]] = {topic_id.int: [] for topic_id in counts}
    loads: dict[str, int] = {}
    targets: dict[str, Assignment] = {}
    for member_id in member_ids:
        assignment = current.get(member_id, empty)
        targets[member_id] = assignment
        load = 0
        for topic_id, partitions in assignment.items():
            sets = held.get(topic_id.int)
            if sets is None:  # a topic the group no longer subscribes to
                return None
            sets.append(partitions)
            load += len(partitions)
        loads[member_id] = load
    if not loads:
        return {}

    # Validity and the partitions nobody holds, per topic in ascending topic id order.
    pool: list[tuple[UUID, Sequence[int]]] = []
    for topic_id in sorted(counts):
        count = counts[topic_id]
        sets = held[topic_id.int]
        claimed = frozenset().union(*sets)
        if len(claimed) != sum(map(len, sets)):  # a partition held twice
            return None
        if claimed and (min(claimed) < 0 or max(claimed) >= count):
            return None
        if len(claimed) < count:
            pool.append((topic_id, range(count) if not claimed else sorted(set(range(count)) - claimed)))

    minimum_quota, extra = divmod(sum(counts.values()), len(loads))
    order = sorted(loads)  # member id order, then most loaded first (a stable sort keeps ties in id order)
    order.sort(key=loads.__getitem__, reverse=True)

    takers: list[tuple[str, int]] = []
    for position, member_id in enumerate(order):
        quota = minimum_quota + 1 if position < extra else minimum_quota
        load = loads[member_id]
        if load > quota:
            targets[member_id], released = _release(targets[member_id], load - quota)
            pool.extend(released)
        elif load < quota:
            takers.append((member_id, quota - load))
    takers.sort()

    chunk_index = 0
    offset = 0
    for member_id, need in takers:
        gained: dict[UUID, frozenset[int]] = dict(targets[member_id])
        while need:
            topic_id, chunk = pool[chunk_index]
            take = min(need, len(chunk) - offset)
            piece = frozenset(chunk[offset : offset + take])
            existing = gained.get(topic_id)
            gained[topic_id] = piece if existing is None else existing | piece
            need -= take
            offset += take
            if offset == len(chunk):
                chunk_index += 1
                offset = 0
        targets[member_id] = {topic_id: gained[topic_id] for topic_id in sorted(gained)}
    # Every pool partition went to a taker: the quotas sum to P and validity holds.
    assert chunk_index == len(pool) and offset == 0, "incremental target left partitions unassigned"
    return targets


def _release(assignment: Assignment, count: int) -> tuple[Assignment, list[tuple[UUID, Sequence[int]]]]:
    """``assignment`` without its ``count`` highest partitions of its highest topics, and those."""
    kept = dict(assignment)
    released: list[tuple[UUID, Sequence[int]]] = []
    for topic_id in sorted(assignment, reverse=True):
        if not count:
            break
        partitions = sorted(assignment[topic_id])
        take = min(count, len(partitions))
        released.append((topic_id, partitions[len(partitions) - take :]))
        if take == len(partitions):
            del kept[topic_id]
        else:
            kept[topic_id] = frozenset(partitions[: len(partitions) - take])
        count -= take
    return {topic_id: kept[topic_id] for topic_id in sorted(kept)}, released
