"""Client-side assignment for the model classic clients: the embedded consumer protocol and three
tiny deterministic assignors the elected leader runs (the coordinator never assigns for classic groups).

* ``range``: per topic, the subscribed members sorted by id take consecutive ranges (Kafka's
  RangeAssignor);
* ``roundrobin``: every subscribed partition, sorted, dealt in turn to the sorted members that
  subscribe to its topic (RoundRobinAssignor);
* ``cooperative-sticky`` (KIP-429): members keep what they declared as owned (up to a fair share),
  the rest goes to the least loaded subscriber; then the cooperative rule: a partition that moves
  from one owner to another is given to nobody in this generation (its owner revokes it and rejoins,
  the second rebalance hands it over), and a partition claimed by two members goes to nobody.

Subscriptions and assignments are real ``ConsumerProtocolSubscription`` v2 / ``ConsumerProtocolAssignment``
v0 bytes (kio's schemas), so the coordinator parses the subscribed topics exactly as from a Java client.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from dataclasses import dataclass

from kio.schema.consumer_protocol_assignment.v0.data import ConsumerProtocolAssignment
from kio.schema.consumer_protocol_assignment.v0.data import TopicPartition as AssignedTopic
from kio.schema.consumer_protocol_subscription.v2.data import ConsumerProtocolSubscription
from kio.schema.consumer_protocol_subscription.v2.data import TopicPartition as OwnedTopic
from kio.schema.types import TopicName
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32

from coordinator.admin.assignment import decode_assignment

Partitions = dict[str, frozenset[int]]  # topic name -> partitions
EAGER_PROTOCOLS = ("range", "roundrobin")
COOPERATIVE = "cooperative-sticky"


@dataclass(frozen=True)
class Subscription:
    topics: tuple[str, ...]
    owned: Partitions
    generation: int


def encode_subscription(topics: tuple[str, ...], owned: Partitions, generation: int) -> bytes:
    value = ConsumerProtocolSubscription(
        topics=tuple(sorted(topics)),
        user_data=None,
        owned_partitions=tuple(
            OwnedTopic(topic=TopicName(t), partitions=tuple(i32(p) for p in sorted(ps))) for t, ps in sorted(owned.items()) if ps
        ),
        generation_id=i32(generation),
    )
    buffer = io.BytesIO()
    entity_writer(ConsumerProtocolSubscription)(buffer, value)
    return i16(2).to_bytes(2, "big") + buffer.getvalue()


def decode_subscription(data: bytes) -> Subscription:
    value, _ = entity_reader(ConsumerProtocolSubscription)(data, 2)
    owned = {str(tp.topic): frozenset(int(p) for p in tp.partitions) for tp in value.owned_partitions}
    return Subscription(tuple(value.topics), owned, int(value.generation_id))


def encode_assignment(partitions: Partitions) -> bytes:
    value = ConsumerProtocolAssignment(
        assigned_partitions=tuple(
            AssignedTopic(topic=TopicName(t), partitions=tuple(i32(p) for p in sorted(ps))) for t, ps in sorted(partitions.items()) if ps
        ),
        user_data=None,
    )
    buffer = io.BytesIO()
    entity_writer(ConsumerProtocolAssignment)(buffer, value)
    return i16(0).to_bytes(2, "big") + buffer.getvalue()


def decode(data: bytes) -> Partitions:
    return {t: frozenset(ps) for t, ps in decode_assignment(data).items() if ps}


def assign(protocol: str, members: Mapping[str, Subscription], counts: Mapping[str, int]) -> dict[str, Partitions]:
    """The leader's assignment: member id -> partitions, for topics that exist (``counts``)."""
    subscribers: dict[str, list[str]] = {}
    for member_id in sorted(members):
        for topic in members[member_id].topics:
            if topic in counts:
                subscribers.setdefault(topic, []).append(member_id)
    out: dict[str, dict[str, set[int]]] = {m: {} for m in members}
    if protocol == "range":
        for topic, subs in sorted(subscribers.items()):
            n = counts[topic]
            for i, member_id in enumerate(subs):
                start = i * (n // len(subs)) + min(i, n % len(subs))
                size = n // len(subs) + (1 if i < n % len(subs) else 0)
                out[member_id].setdefault(topic, set()).update(range(start, start + size))
    elif protocol == "roundrobin":
        turn = 0
        ordered = sorted(members)
        for topic, subs in sorted(subscribers.items()):
            for p in range(counts[topic]):
                while ordered[turn % len(ordered)] not in subs:
                    turn += 1
                out[ordered[turn % len(ordered)]].setdefault(topic, set()).add(p)
                turn += 1
    elif protocol == COOPERATIVE:
        return _cooperative_sticky(members, counts, subscribers)
    else:
        raise ValueError(f"unknown protocol {protocol!r}")
    return {m: {t: frozenset(ps) for t, ps in parts.items()} for m, parts in out.items()}


def _cooperative_sticky(
    members: Mapping[str, Subscription], counts: Mapping[str, int], subscribers: Mapping[str, list[str]]
) -> dict[str, Partitions]:
    claims: dict[tuple[str, int], list[str]] = {}
    for member_id, sub in sorted(members.items()):
        for topic, ps in sorted(sub.owned.items()):
            for p in sorted(ps):
                claims.setdefault((topic, p), []).append(member_id)
    partitions = sorted((t, p) for t, subs in subscribers.items() for p in range(counts[t]))
    active = [m for m in sorted(members) if any(t in counts for t in members[m].topics)]
    share = -(-len(partitions) // max(len(active), 1))
    load = {m: 0 for m in members}
    target: dict[tuple[str, int], str] = {}
    previous: dict[tuple[str, int], str] = {}
    # 1. stickiness: an uncontested owner that still subscribes keeps it, up to its fair share
    for tp in partitions:
        owners = claims.get(tp, [])
        if len(owners) == 1 and owners[0] in subscribers[tp[0]]:
            previous[tp] = owners[0]
            if load[owners[0]] < share:
                target[tp] = owners[0]
                load[owners[0]] += 1
    # 2. the rest to the least loaded subscriber (its previous owner first on a tie: no ping-pong)
    for tp in partitions:
        if tp not in target:
            chosen = min(subscribers[tp[0]], key=lambda m: (load[m], m != previous.get(tp), m))
            target[tp] = chosen
            load[chosen] += 1
    # 3. the cooperative rule: nothing is handed over while someone else may still own it
    out: dict[str, dict[str, set[int]]] = {m: {} for m in members}
    for tp, member_id in target.items():
        if all(owner == member_id for owner in claims.get(tp, [])):
            out[member_id].setdefault(tp[0], set()).add(tp[1])
    return {m: {t: frozenset(ps) for t, ps in parts.items()} for m, parts in out.items()}
