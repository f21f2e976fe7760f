"""Kafka's ``simple`` share-group assignor (``SimpleAssignor`` and its two assignment builders).

Share partitions may be consumed by several members at once, so the simple assignor balances
*sharing*, not ownership:

- ``desired_sharing = ceil(members / partitions)``: with more members than partitions each
  partition goes to several members, with fewer each partition to exactly one;
- member ``i`` (in id order) wants ``ceil(q * (i + 1)) - ceil(q * i)`` partitions, where
  ``q = desired_sharing * partitions / members``, so counts differ by at most one;
- from the previous assignment it keeps what is still subscribed and assignable, takes away what
  overfills a member or overshares a partition, then hands the partitions that want more members
  to the members that want more partitions, round robin (a partition no wanting member can take is
  left short: a slight imbalance is tolerated). Balance comes before stickiness.

When every member has the same subscription this runs once over all partitions (Kafka's
homogeneous builder). Otherwise it runs per topic over the members subscribed to it, which is
what Kafka's heterogeneous builder achieves (its javadoc's example: M1 on T1, M2 on T2, M3 on both
gives M3 half of T1 and half of T2). Only assignable partitions (initialized share partitions) are
assigned; a subscribed topic missing from the metadata is :class:`AssignorError`, answered
UNKNOWN_SERVER_ERROR as Kafka's ``PartitionAssignorException``. Iteration is in sorted order (Kafka
iterates hash sets), so the result is deterministic: replay and a standby compute the same.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from uuid import UUID

NAME = "simple"

Assignment = dict[UUID, set[int]]
TopicPartition = tuple[UUID, int]


class AssignorError(Exception):
    """The assignment cannot be computed (Kafka's ``PartitionAssignorException``)."""


def assign(
    subscriptions: Mapping[str, frozenset[UUID]],
    previous: Mapping[str, Mapping[UUID, set[int]]],
    assignable: Mapping[UUID, Sequence[int]],
) -> dict[str, Assignment]:
    """The target assignment: member id -> topic id -> partitions.

    ``subscriptions``: each member's subscribed topic ids. ``previous``: the last target assignment
    (members absent from it start empty). ``assignable``: per topic in the metadata, its assignable
    partitions (a subscribed topic absent from it raises :class:`AssignorError`)."""
    for member, topics in subscriptions.items():
        missing = sorted(str(t) for t in topics if t not in assignable)
        if missing:
            raise AssignorError(f"member {member} is subscribed to topics missing from the metadata: {missing}")
    members = sorted(subscriptions)
    result: dict[str, Assignment] = {m: {} for m in members}
    if not members:
        return result
    if len({subscriptions[m] for m in members}) == 1:
        groups = [(members, subscriptions[members[0]])]
    else:
        every_topic = sorted({t for m in members for t in subscriptions[m]}, key=str)
        groups = [([m for m in members if t in subscriptions[m]], frozenset({t})) for t in every_topic]
    for group_members, topics in groups:
        partitions = [(t, p) for t in sorted(topics, key=str) for p in sorted(assignable[t])]
        for member, tps in _build(group_members, partitions, previous).items():
            for topic, partition in tps:
                result[member].setdefault(topic, set()).add(partition)
    return result


def _build(members: list[str], partitions: list[TopicPartition],
           previous: Mapping[str, Mapping[UUID, set[int]]]) -> dict[str, list[TopicPartition]]:
    """The homogeneous builder over ``members`` (sorted) and ``partitions`` (sorted)."""
    if not partitions:
        return {m: [] for m in members}
    sharing = -(-len(members) // len(partitions))
    quota = _quotas(len(members), len(partitions), sharing)
    targets = set(partitions)

    by_member: dict[str, list[TopicPartition]] = {}
    by_partition: dict[TopicPartition, list[str]] = {tp: [] for tp in partitions}
    for i, member in enumerate(members):
        kept = sorted(
            ((t, p) for t, ps in previous.get(member, {}).items() for p in ps if (t, p) in targets),
            key=lambda tp: (str(tp[0]), tp[1]),
        )[: quota[i]]  # an overfilled member gives back what is beyond its quota
        by_member[member] = kept
        for tp in kept:
            by_partition[tp].append(member)

    for tp in partitions:  # an overshared partition keeps only the members it wants
        holders = by_partition[tp]
        while len(holders) > sharing:
            member = holders.pop()
            by_member[member].remove(tp)

    unfilled = [m for i, m in enumerate(members) if len(by_member[m]) < quota[i]]
    wanted = {m: quota[i] for i, m in enumerate(members)}
    cursor = 0
    for tp in partitions:
        if not unfilled:
            break
        need = sharing - len(by_partition[tp])
        tried_without_success = 0
        while need > 0 and unfilled and tried_without_success < len(unfilled):
            cursor %= len(unfilled)
            member = unfilled[cursor]
            if member in by_partition[tp]:
                cursor += 1
                tried_without_success += 1
                continue
            by_member[member].append(tp)
            by_partition[tp].append(member)
            need -= 1
            tried_without_success = 0
            if len(by_member[member]) >= wanted[member]:
                unfilled.pop(cursor)
            else:
                cursor += 1
    return by_member


def _quotas(members: int, partitions: int, sharing: int) -> list[int]:
    """Each member's desired count: exact integer arithmetic for Kafka's ``ceil(q*(i+1)) - ceil(q*i)``."""
    total = sharing * partitions  # q = total / members

    def ceil_at(i: int) -> int:
        return -(-total * i // members)

    return [ceil_at(i + 1) - ceil_at(i) for i in range(members)]
