"""The generations of a classic group's members, asked of this coordinator's private
DescribeGroupGenerations (`protocol/private.py`), and the quiet fallback where it is not served.

Kafka's DescribeGroups has no generation; the one a member's subscription names (KIP-792) is the
one it held when it last joined, so it lags the group's by a rebalance (librdkafka sends -1 on a
first join). This coordinator knows each member's generation and answers it under a private key
that ApiVersions never lists, so it is asked without negotiation, version 0. A broker that does not
know the key (Apache Kafka, an older coordinator) closes the connection: then the answer is None and
the caller goes on with a fresh connection to the same broker.

DescribeGroups is another request, so another moment. A group's generation only grows (every
completed join, even one that empties the group, moves it on), so asking before and after it and
finding the same generation and state proves no rebalance completed in between: the generations
are those of the members DescribeGroups saw (`held_throughout`). Otherwise none are shown.
"""

from __future__ import annotations

from dataclasses import dataclass

from protocol.private import DESCRIBE_GROUP_GENERATIONS

from .client import AdminClient, AdminError, Connection


@dataclass(frozen=True, slots=True)
class Generations:
    group_state: str
    generation_id: int
    members: dict[str, int]
    """Member id -> the generation it holds (-1: none yet)."""


async def group_generations(client: AdminClient, connection: Connection, group_id: str
                            ) -> tuple[Generations | None, Connection]:
    """(the group's generations, or None when the broker cannot say; the connection to go on with,
    a fresh one when the broker closed the first)."""
    try:
        response = await connection.request(DESCRIBE_GROUP_GENERATIONS, {"groups": [group_id]}, version=0)
    except AdminError:  # the key is unknown there: the connection is closed (or its answer unusable)
        return None, await client.reconnect(connection)
    group = next((g for g in response.groups if g.group_id == group_id), None)
    if group is None or int(group.error_code):  # not classic, refused, elsewhere: DescribeGroups says why
        return None, connection
    return Generations(group.group_state, int(group.generation_id),
                       {m.member_id: int(m.generation_id) for m in group.members}), connection


def held_throughout(before: Generations, after: Generations | None, state: str) -> Generations | None:
    """`after` when the group was at the same generation and in the same state (`state`, the one
    DescribeGroups answered in between) both times, else None."""
    if after is None or (after.generation_id, after.group_state) != (before.generation_id, before.group_state):
        return None
    return after if after.group_state == state else None
