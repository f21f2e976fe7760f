"""The ``uniform`` server-side assignor, Kafka's default (``UniformAssignor``).

Theory of operation
===================

Goals, in priority order: **validity** (every partition of a subscribed topic goes to exactly one
member subscribed to that topic), **balance** (partition counts as even as the subscriptions
allow), **stickiness** (a member keeps what its current target assignment gives it unless balance
requires a move). Racks are ignored, as in Kafka 4.x. The builder is chosen per computation from
:attr:`GroupSpec.subscription_type`.

Input hygiene (both builders). A member's current assignment is a hint. Topics it no longer
subscribes to are dropped; partition numbers outside the topic are dropped; a partition claimed by
several members stays with the first in member id order. Members are always visited in ascending
member id order and topics in ascending topic id order, so the result never depends on the order
of an input mapping (live and replayed computations agree).

Homogeneous group (:mod:`.uniform_homogeneous`). With ``P`` partitions over the common topics and
``M`` members, ``q = P // M`` and ``e = P % M``: ``e`` members get ``q + 1``, the rest ``q``.

1. Visit members in order. A member's quota is ``q + 1`` while extra slots remain, else ``q``. It
   keeps its current partitions up to the quota (its lowest numbered ones per topic, topics in
   order) and releases the rest. If it still has room and holds an extra slot it cannot fill from
   its own partitions, it gives the slot up - unless the members left (itself included) are no
   more than the slots left, in which case all of them must take one. Members below quota are
   noted with the room they have.
2. The partitions to hand out are the never-claimed ones (per topic, ascending), followed by the
   released ones in release order. Members below quota take them in member order, each taking a
   contiguous slice of that stream up to its room. Anything left over is an error (cannot happen
   with valid input).

   Invariants: sizes differ by at most one; members keep as many of their current partitions as
   any balanced assignment could let them keep, i.e. kept = sum(min(c_i, q)) + min(e, #{i: c_i >
   q}) where ``c_i`` is member ``i``'s usable current count. Hence a balanced, valid current
   assignment is returned unchanged (a fixpoint). And when one member joins ``N`` members whose
   current assignment is balanced and complete (so ``M = N + 1``), every existing member has
   ``c_i >= q`` and at least ``e`` of them have ``c_i > q``, so the newcomer receives exactly
   ``P // (N + 1)`` partitions and those are the only ones that move.

Heterogeneous group (:mod:`.uniform_heterogeneous`). Members are numbered in member id order.

1. Every member keeps its usable current partitions of topics it still subscribes to.
2. Topics are ordered by partitions per subscriber descending, then subscriber count ascending,
   then topic id. For each topic in that order, its unowned partitions are water-filled onto its
   subscribers: the least loaded are raised level by level; a final partial round goes to the
   lowest (load, member number) subscribers.
3. Balance: for each topic with two or more subscribers (same order), move partitions from the
   most loaded subscriber that holds some of the topic (its highest numbered one) to the least
   loaded subscriber, until no holder is two or more above any subscriber of the topic. Repeat
   passes until a full pass moves nothing.

   Invariants: when all subscribers of each topic share the same subscriptions the result is
   balanced within one; otherwise it is "locally balanced": for every topic, no member holding
   a partition of it has two or more partitions more than another subscriber of it. The result is
   a fixpoint (recomputing from it changes nothing).

Output shape: one entry per member, in ascending member id order; each member's topics in
ascending topic id order; no empty partition sets. A heterogeneous member whose partitions did not
change gets a copy of its input mapping (copy-on-write, as Kafka's KAFKA-16864).

Differences from Kafka, knowingly:

- Kafka visits members in hash-map order (so which member gets which partition is not
  reproducible there); we use member id order.
- Kafka caps heterogeneous balancing at 16 passes; we run to convergence (each move strictly
  lowers the sum of squared loads, so it terminates) so that the result is a fixpoint.
- Kafka's heterogeneous hand-out deals a topic's partitions round-robin; we give each subscriber a
  contiguous run (same counts per member).
- Kafka derives homogeneous/heterogeneous from subscribed topic *names* and regexes; we derive it
  from the resolved topic id sets. Where they differ (e.g. equal id sets from different name lists)
  we use the homogeneous builder, which is balanced and sticky there too.
- Kafka trusts the current assignment (a partition claimed twice would be kept twice by its
  homogeneous builder); we apply the input hygiene above.
"""

from __future__ import annotations

from typing import Final

from coordinator.core.assignors.api import (
    GroupAssignment,
    GroupSpec,
    SubscribedTopicDescriber,
    SubscriptionType,
)
from coordinator.core.assignors.uniform_heterogeneous import assign_heterogeneous
from coordinator.core.assignors.uniform_homogeneous import assign_homogeneous

__all__ = ["UniformAssignor"]


class UniformAssignor:
    """Balance first, then stickiness; the default KIP-848 server-side assignor."""

    NAME: Final = "uniform"

    @property
    def name(self) -> str:
        return self.NAME

    def assign(self, group_spec: GroupSpec, topics: SubscribedTopicDescriber) -> GroupAssignment:
        if not group_spec.members:
            return {}
        if group_spec.subscription_type is SubscriptionType.HOMOGENEOUS:
            return assign_homogeneous(group_spec, topics)
        return assign_heterogeneous(group_spec, topics)

    def __repr__(self) -> str:
        return "UniformAssignor()"
