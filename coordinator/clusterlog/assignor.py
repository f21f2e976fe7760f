"""Which instance owns which log partition: balanced, sticky and cooperative. Pure.

Theory of operation. Every instance reports, when it joins the instance group, the partitions it
owns and the generation in which it got them. The group's leader (one of the instances, chosen by
the upstream's group coordinator) runs `assign` over those reports:

1. A partition claimed by two instances (a report from before a rebalance this instance missed) is
   kept by the claim of the newest generation; the others lose it at once.
2. Quotas: P partitions over N instances is P // N each, and one more for P % N of them; the extra
   ones go to the instances that already own the most, so the fewest partitions move.
3. Each instance keeps what it owns up to its quota (stickiness). What it owns beyond its quota is
   revoked: it is assigned to nobody in this round.
4. Partitions nobody owns are given to instances below their quota, lowest partition first.

Step 3 is the cooperative rule (KIP-429): a partition is never assigned to a new owner while another
instance may still be serving it. The instance that lost partitions hands them over (its pending
replies settle, its writer stops) and joins again at once; in that second round the partitions are
unowned and step 4 places them. So two rounds settle any change, and no partition is ever owned by
two instances in one generation. The result depends only on the reports, never on their order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Report:
    member_id: str
    node_id: int
    owned: frozenset[int]
    generation: int
    """The generation in which `owned` was assigned (-1: owns nothing yet)."""


def assign(reports: Sequence[Report], partitions: int) -> dict[str, frozenset[int]]:
    """member id → the partitions it owns in the next generation."""
    if not reports:
        return {}
    ordered = sorted(reports, key=lambda r: r.member_id)
    owner: dict[int, Report] = {}
    for report in ordered:  # step 1: the newest claim of a partition wins; ties by member id
        for partition in report.owned:
            if not 0 <= partition < partitions:
                continue
            current = owner.get(partition)
            if current is None or report.generation > current.generation:
                owner[partition] = report
    kept: dict[str, list[int]] = {r.member_id: sorted(p for p, o in owner.items() if o is r) for r in ordered}

    base, extra = divmod(partitions, len(ordered))
    by_holdings = sorted(ordered, key=lambda r: (-len(kept[r.member_id]), r.member_id))
    quota = {r.member_id: base + (1 if i < extra else 0) for i, r in enumerate(by_holdings)}

    result: dict[str, set[int]] = {}
    for report in ordered:  # step 3: keep up to the quota; the rest is revoked this round
        result[report.member_id] = set(kept[report.member_id][:quota[report.member_id]])
    free = [p for p in range(partitions) if p not in owner]
    for report in by_holdings:  # step 4: unowned partitions fill the instances below their quota
        room = quota[report.member_id] - len(result[report.member_id])
        if room > 0:
            result[report.member_id].update(free[:room])
            free = free[room:]
    return {member: frozenset(owned) for member, owned in result.items()}
