"""Assignments and their partition epochs: the immutable values a consumer group member holds.

An :data:`Assignment` maps topic id -> partitions (frozensets; topics with no partition are absent;
never mutated once built, so members and targets share them). :data:`PartitionEpochs` are KIP-1251's
assignment epochs: the member epoch at which each held partition (assigned or pending revocation) was
assigned. This module owns those types and their pure helpers: their record forms (record 7's
``TopicPartitions``, record 8's ``AssignedTopicPartitions``, including how a record written before
KIP-1251 reads), and how a reconciliation step carries the epochs (``carried_epochs``). Members are in
:mod:`.member`, the group and its replay in :mod:`.group`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType
from uuid import UUID

from coordinator.core.consumer.schema import AssignedTopicPartitions, TopicPartitions

Assignment = Mapping[UUID, frozenset[int]]
"""topic id -> partitions; topics with no partition are absent. Never mutated once built."""

NO_PARTITIONS: Assignment = MappingProxyType({})

TopicEpochs = int | Mapping[int, int]
"""The epochs at which a member got the partitions it holds of one topic: one int when it got them
all at the same epoch (the common case, and what a record without epochs means), else partition ->
epoch."""

PartitionEpochs = Mapping[UUID, TopicEpochs]
"""topic id -> :data:`TopicEpochs`, for every topic the member holds partitions of (assigned or
pending revocation): KIP-1251's assignment epochs. Never mutated once built."""

NO_EPOCHS: PartitionEpochs = MappingProxyType({})


def topic_epoch(epochs: TopicEpochs, partition: int) -> int:
    """The epoch a held partition was assigned at."""
    return epochs if isinstance(epochs, int) else epochs[partition]


def uniform(epochs: Mapping[int, int]) -> TopicEpochs:
    """One int when every partition has the same epoch."""
    values = iter(epochs.values())
    first = next(values, None)
    if first is not None and all(e == first for e in values):
        return first
    return epochs


def carried_epochs(
    old: PartitionEpochs, kept: Assignment, pending: Assignment, added: Mapping[UUID, frozenset[int]], epoch: int
) -> PartitionEpochs:
    """The epochs after a reconciliation step: what it keeps and what it revokes keep the epochs they
    were assigned at (``old``), what it is given now is assigned at ``epoch``."""
    out: dict[UUID, TopicEpochs] = {}
    for topic_id in kept.keys() | pending.keys():
        known = old.get(topic_id, 0)
        if isinstance(known, int):
            out[topic_id] = known
        else:
            held = kept.get(topic_id, frozenset()) | pending.get(topic_id, frozenset())
            out[topic_id] = uniform({p: known.get(p, 0) for p in held})
    for topic_id, partitions in added.items():
        if not partitions:
            continue
        have = out.get(topic_id)
        if have is None or (isinstance(have, int) and have == epoch):
            out[topic_id] = epoch
            continue
        held = kept.get(topic_id, frozenset()) | pending.get(topic_id, frozenset())
        grown = dict.fromkeys(held, have) if isinstance(have, int) else dict(have)
        grown.update(dict.fromkeys(partitions, epoch))
        out[topic_id] = grown
    return MappingProxyType(out) if out else NO_EPOCHS



def assignment_from_record(topics: Iterable[TopicPartitions]) -> Assignment:
    result = {tp.topic_id: frozenset(tp.partitions) for tp in topics if tp.partitions}
    return MappingProxyType(result) if result else NO_PARTITIONS


def assignment_to_record(assignment: Assignment) -> tuple[TopicPartitions, ...]:
    return tuple(
        TopicPartitions(topic_id, tuple(sorted(partitions)))
        for topic_id, partitions in sorted(assignment.items())
        if partitions
    )


def held_to_record(assignment: Assignment, epochs: PartitionEpochs) -> tuple[AssignedTopicPartitions, ...]:
    """Record 8's partitions with their assignment epochs (Kafka 4.3 always writes them)."""
    out = []
    for topic_id, partitions in sorted(assignment.items()):
        if not partitions:
            continue
        ordered = tuple(sorted(partitions))
        known = epochs.get(topic_id, 0)
        if isinstance(known, int):
            given = (known,) * len(ordered)
        else:
            given = tuple(known.get(p, 0) for p in ordered)
        out.append(AssignedTopicPartitions(topic_id, ordered, given))
    return tuple(out)


def held_from_record(
    topics: Iterable[AssignedTopicPartitions], default_epoch: int
) -> tuple[Assignment, dict[UUID, TopicEpochs]]:
    """Record 8's partitions of one kind (assigned, or pending revocation) and their assignment
    epochs. A record written before KIP-1251 (or with a list of the wrong length, which Kafka logs
    and ignores) reads every partition as assigned at ``default_epoch`` (Kafka's
    ``assignmentFromTopicPartitions``). Start-up replays one of these per record 8 in the log: a
    topic whose partitions share one epoch (the usual case) costs one int, not a dict."""
    result: dict[UUID, frozenset[int]] = {}
    epochs: dict[UUID, TopicEpochs] = {}
    for tp in topics:
        partitions = tp.partitions
        if not partitions:
            continue
        topic_id = tp.topic_id
        result[topic_id] = frozenset(partitions)
        given = tp.assignment_epochs
        if given is None or len(given) != len(partitions):
            epochs[topic_id] = default_epoch
        elif given.count(given[0]) == len(given):
            epochs[topic_id] = given[0]
        else:
            epochs[topic_id] = dict(zip(partitions, given, strict=False))
    return (MappingProxyType(result) if result else NO_PARTITIONS), epochs


def merged_epochs(
    assigned: Assignment, of_assigned: dict[UUID, TopicEpochs], pending: Assignment, of_pending: dict[UUID, TopicEpochs]
) -> PartitionEpochs:
    """The epochs of everything held: a topic with partitions of both kinds at different epochs
    becomes one partition -> epoch map."""
    for topic_id, theirs in of_pending.items():
        mine = of_assigned.get(topic_id)
        if mine is None or (isinstance(mine, int) and mine == theirs):
            of_assigned[topic_id] = theirs
            continue
        merged = dict.fromkeys(assigned[topic_id], mine) if isinstance(mine, int) else dict(mine)
        if isinstance(theirs, int):
            merged.update(dict.fromkeys(pending[topic_id], theirs))
        else:
            merged.update(theirs)
        of_assigned[topic_id] = merged
    return MappingProxyType(of_assigned) if of_assigned else NO_EPOCHS


def at_one_epoch(assignment: Assignment, epoch: int) -> PartitionEpochs:
    """Every partition of ``assignment`` held since ``epoch``."""
    out: dict[UUID, TopicEpochs] = {topic_id: epoch for topic_id, parts in assignment.items() if parts}
    return MappingProxyType(out) if out else NO_EPOCHS


def normalized(assignment: Mapping[UUID, Iterable[int]]) -> Assignment:
    """An immutable :data:`Assignment` without empty topics (frozensets are reused, not copied)."""
    result: dict[UUID, frozenset[int]] = {}
    for topic_id, parts in assignment.items():
        if parts:
            result[topic_id] = parts if isinstance(parts, frozenset) else frozenset(parts)
    return MappingProxyType(result) if result else NO_PARTITIONS


def partition_count(assignment: Assignment) -> int:
    return sum(len(parts) for parts in assignment.values())

