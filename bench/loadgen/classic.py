"""A classic-protocol model consumer (JoinGroup v9, SyncGroup v5, Heartbeat v4, LeaveGroup v5), each
member on its own connection as real clients are (a parked JoinGroup holds its connection).

Behaviour:
- join: empty member id, MEMBER_ID_REQUIRED (KIP-394), join again with the id; the leader assigns
  on the client side and sends every assignment in its SyncGroup;
- heartbeat every `interval_ms`; REBALANCE_IN_PROGRESS means rejoin; UNKNOWN_MEMBER_ID /
  ILLEGAL_GENERATION mean rejoin from scratch;
- `eager` (protocol "range"): a member gives up all its partitions before rejoining;
- `cooperative` (protocol "cooperative-sticky"): members keep their partitions and report them as
  owned partitions in their subscription; the leader computes a balanced sticky target but withholds
  any partition whose previous owner is another member; a member that lost partitions rejoins at
  once, and the follow-up rebalance hands the withheld partitions out (KIP-429).
The leader's target is balanced: every member owns floor(P/M) or ceil(P/M) partitions.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping

from .conn import Connection, ConnectionLost
from .stats import Recorder
from .wire import (
    HEARTBEAT,
    ILLEGAL_GENERATION,
    JOIN_GROUP,
    LEAVE_GROUP,
    MEMBER_ID_REQUIRED,
    REBALANCE_IN_PROGRESS,
    SYNC_GROUP,
    UNKNOWN_MEMBER_ID,
    decode_assignment,
    decode_response,
    decode_subscription_owned,
    encode_assignment,
    encode_subscription,
    heartbeat_v4_error,
    request,
)

Partitions = dict[str, list[int]]


def balanced_sticky(all_partitions: list[tuple[str, int]], owned: Mapping[str, Partitions],
                    cooperative: bool) -> dict[str, Partitions]:
    """member -> assigned partitions; owned maps member -> what it reports owning."""
    members = sorted(owned)
    claims: dict[tuple[str, int], list[str]] = {}
    for member in members:
        for topic, parts in owned[member].items():
            for p in parts:
                claims.setdefault((topic, p), []).append(member)
    kept: dict[str, list[tuple[str, int]]] = {m: [] for m in members}
    for tp, owners in claims.items():
        if len(owners) == 1:
            kept[owners[0]].append(tp)
    base, extra = divmod(len(all_partitions), len(members))
    by_owned = sorted(members, key=lambda m: (-len(kept[m]), m))
    quota = {m: base + (1 if i < extra else 0) for i, m in enumerate(by_owned)}
    assigned: dict[str, list[tuple[str, int]]] = {}
    taken: set[tuple[str, int]] = set()
    for m in members:
        keep = sorted(kept[m])[: quota[m]]
        assigned[m] = keep
        taken.update(keep)
    free = [tp for tp in all_partitions if tp not in taken]
    free.reverse()
    for m in members:
        while len(assigned[m]) < quota[m] and free:
            assigned[m].append(free.pop())
    result: dict[str, Partitions] = {}
    for m in members:
        parts: Partitions = {}
        for topic, p in sorted(assigned[m]):
            owners = claims.get((topic, p), [])
            if cooperative and owners and owners != [m]:
                continue  # previous owner must revoke first (KIP-429)
            parts.setdefault(topic, []).append(p)
        result[m] = parts
    return result


class ClassicMember:
    def __init__(self, conn: Connection, group_id: str, topics: Mapping[str, int], *, cooperative: bool,
                 interval_ms: int, recorder: Recorder | None = None, client_id: str = "loadgen",
                 join_version: int = 9, sync_version: int = 5) -> None:
        self.join_version = join_version
        self.sync_version = sync_version
        self.conn = conn
        self.group_id = group_id
        self.topics = dict(topics)
        self.cooperative = cooperative
        self.protocol = "cooperative-sticky" if cooperative else "range"
        self.interval_ms = interval_ms
        self.recorder = recorder
        self.client_id = client_id
        self.member_id = ""
        self.generation = -1
        self.owned: Partitions = {}
        self.stable = False
        self.rebalances = 0
        self._stop = False

    def partition_count(self) -> int:
        return sum(len(p) for p in self.owned.values())

    async def run(self) -> None:
        """Join, then heartbeat; rejoin whenever asked. Returns when stopped or disconnected."""
        with contextlib.suppress(ConnectionLost, asyncio.CancelledError):
            while not self._stop:
                await self._join_and_sync()
                while self.stable and not self._stop:
                    await asyncio.sleep(self.interval_ms / 1000)
                    if self._stop:
                        break
                    await self._heartbeat()

    def stop(self) -> None:
        self._stop = True

    async def leave(self) -> None:
        self._stop = True
        await self.conn.call(request(LEAVE_GROUP, 4, {
            "group_id": self.group_id, "members": [{"member_id": self.member_id, "group_instance_id": None}]},
            self.client_id))

    async def _heartbeat(self) -> None:
        payload = await self.conn.call(request(HEARTBEAT, 4, {
            "group_id": self.group_id, "generation_id": self.generation, "member_id": self.member_id},
            self.client_id))
        error = heartbeat_v4_error(payload)
        if error == 0:
            return
        self.stable = False
        if error in (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION):
            self.member_id = "" if error == UNKNOWN_MEMBER_ID else self.member_id
            self.owned = {}
        elif error != REBALANCE_IN_PROGRESS and self.recorder is not None:
            self.recorder.error(f"heartbeat_{error}")

    async def _join_and_sync(self) -> None:
        if not self.cooperative:
            self.owned = {}  # eager: revoke everything before rejoining
        self.stable = False
        metadata = encode_subscription(sorted(self.topics), self.owned if self.cooperative else None)
        while True:
            payload = await self.conn.call(request(JOIN_GROUP, self.join_version, {
                "group_id": self.group_id, "session_timeout": 45_000, "rebalance_timeout": 60_000,
                "member_id": self.member_id, "protocol_type": "consumer", "reason": None,
                "protocols": [{"name": self.protocol, "metadata": metadata}]}, self.client_id))
            join = decode_response(JOIN_GROUP, self.join_version, payload)
            if join.error_code == MEMBER_ID_REQUIRED:
                self.member_id = join.member_id
                continue
            if join.error_code == UNKNOWN_MEMBER_ID:
                self.member_id = ""
                continue
            if join.error_code:
                if self.recorder is not None:
                    self.recorder.error(f"join_{int(join.error_code)}")
                await asyncio.sleep(0.05)
                continue
            break
        self.member_id = join.member_id
        self.generation = join.generation_id
        assignments: list[dict[str, object]] = []
        if join.leader == self.member_id:
            owned = {m.member_id: decode_subscription_owned(m.metadata) for m in join.members}
            everything = [(t, p) for t in sorted(self.topics) for p in range(self.topics[t])]
            plan = balanced_sticky(everything, owned, self.cooperative)
            assignments = [{"member_id": m, "assignment": encode_assignment(a)} for m, a in plan.items()]
        payload = await self.conn.call(request(SYNC_GROUP, self.sync_version, {
            "group_id": self.group_id, "generation_id": self.generation, "member_id": self.member_id,
            "protocol_type": "consumer", "protocol_name": self.protocol, "assignments": assignments},
            self.client_id))
        sync = decode_response(SYNC_GROUP, self.sync_version, payload)
        if sync.error_code:
            if sync.error_code == UNKNOWN_MEMBER_ID:
                self.member_id = ""
            return  # rejoin
        self.rebalances += 1
        new = decode_assignment(sync.assignment)
        lost = any(set(parts) - set(new.get(t, [])) for t, parts in self.owned.items())
        self.owned = new
        # KIP-429: a cooperative member that revoked something rejoins at once.
        self.stable = not (self.cooperative and lost)
