"""An instance's membership in the instance group: who owns which log partition, through the upstream
cluster's own group protocol.

Theory of operation. Every instance is a member of one classic group on the upstream (its id a
setting; protocol type `coordinator-log`, as Kafka Connect's workers form a `connect` group). A
member's JoinGroup metadata says which node it is and which partitions it owns since which
generation; the leader the upstream picks runs `assignor.assign` over every member's metadata and
hands each member, in SyncGroup, its partitions and the owner of every partition (the node table
that FindCoordinator answers from). Then:

    joining ──JoinGroup/SyncGroup──► apply: revoked = owned − assigned; added = assigned − owned
       ▲                              │  listener.revoked(revoked) first (the hand-over), then
       │                              │  listener.assigned(added); if anything was revoked, join
       │                              ▼  again at once (the cooperative second round)
       └── REBALANCE_IN_PROGRESS ◄── stable: a Heartbeat every interval
           UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION, or no successful heartbeat for a session
           timeout: everything owned is lost (listener.lost) before joining again, because the
           group may already have given it to another instance

`leave()` hands every partition over (listener.revoked) and then sends LeaveGroup, so the others
take them in the rebalance the departure starts, without waiting out a session timeout.

Each member's metadata also carries its listeners (name, advertised host, port), and the leader
sends every member the listeners of every node, so any instance can answer FindCoordinator with
the owner of a group's partition on the listener the request came in on. `live()` is the lease
(the reference's step 11): true while the last heartbeat the upstream answered was sent less than
a session timeout ago; past it the group may have given our partitions away, so nothing may be
answered from memory either (a paused process resuming answers nothing before it hears again).

Two instances configured with the same node id would answer FindCoordinator for each other: the
leader refuses the one joining (or, between two joining, the later by member id) with the assignment error DUPLICATE_NODE_ID, and that
instance's `run()` ends with `DuplicateNodeId`.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from protocol.errors import ErrorCode

from ..logging import get_logger
from .assignor import Report, assign
from .cluster import GROUP_KEY_TYPE, LogCluster, LogUnavailable

log = get_logger("coordinator.clusterlog.membership")

JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP = 11, 12, 13, 14
PROTOCOL_TYPE = "coordinator-log"
PROTOCOL_NAME = "cooperative-sticky-v0"
DUPLICATE_NODE_ID = 1

_I16, _I32 = struct.Struct(">h"), struct.Struct(">i")
VERSION = 1
"""Metadata and assignment layout: 0 without listeners, 1 with them (both read)."""

Endpoint = tuple[str, str, int]
"""(listener name, advertised host, port)."""
LEASE_FRACTION = 0.9
"""The lease ends this fraction of a session timeout after the last answered heartbeat was sent
(the upstream's clock and ours may run at slightly different rates)."""


def _encode_endpoints(endpoints: tuple[Endpoint, ...]) -> bytes:
    out = [_I32.pack(len(endpoints))]
    for name, host, port in endpoints:
        for text in (name, host):
            raw = text.encode()
            out.append(_I16.pack(len(raw)) + raw)
        out.append(_I32.pack(port))
    return b"".join(out)


def _decode_endpoints(data: bytes, position: int) -> tuple[tuple[Endpoint, ...], int]:
    (count,) = _I32.unpack_from(data, position)
    position += 4
    endpoints: list[Endpoint] = []
    for _ in range(count):
        texts = []
        for _ in range(2):
            (length,) = _I16.unpack_from(data, position)
            texts.append(data[position + 2:position + 2 + length].decode())
            position += 2 + length
        (port,) = _I32.unpack_from(data, position)
        position += 4
        endpoints.append((texts[0], texts[1], port))
    return tuple(endpoints), position


class DuplicateNodeId(Exception):
    """Another instance of the group has this instance's node id."""


class OwnershipListener(Protocol):
    async def revoked(self, partitions: frozenset[int]) -> None:
        """Hand these over: settle what is pending on them and stop serving them."""

    async def assigned(self, partitions: frozenset[int], owners: Mapping[int, int]) -> None:
        """Start serving these; `owners` is partition → node id for every settled partition."""

    async def lost(self, partitions: frozenset[int]) -> None:
        """These may already be another instance's: stop serving them at once."""


@dataclass(frozen=True, slots=True)
class Metadata:
    node_id: int
    generation: int
    owned: frozenset[int]
    endpoints: tuple[Endpoint, ...] = ()

    def encode(self) -> bytes:
        return (_I16.pack(VERSION) + _I32.pack(self.node_id) + _I32.pack(self.generation)
                + _I32.pack(len(self.owned)) + b"".join(_I32.pack(p) for p in sorted(self.owned))
                + _encode_endpoints(self.endpoints))

    @classmethod
    def decode(cls, data: bytes) -> Metadata:
        (version,) = _I16.unpack_from(data, 0)
        node_id, generation, count = struct.unpack_from(">iii", data, 2)
        owned = frozenset(struct.unpack_from(f">{count}i", data, 14))
        endpoints = _decode_endpoints(data, 14 + 4 * count)[0] if version >= 1 else ()
        return cls(node_id, generation, owned, endpoints)


@dataclass(frozen=True, slots=True)
class Assignment:
    error: int
    partitions: frozenset[int]
    owners: dict[int, int]
    nodes: dict[int, tuple[Endpoint, ...]] = field(default_factory=dict)
    """node id → its listeners, for every member the leader accepted."""

    def encode(self) -> bytes:
        owners = sorted(self.owners.items())
        nodes = sorted(self.nodes.items())
        return (_I16.pack(VERSION) + _I16.pack(self.error) + _I32.pack(len(self.partitions))
                + b"".join(_I32.pack(p) for p in sorted(self.partitions))
                + _I32.pack(len(owners)) + b"".join(struct.pack(">ii", p, n) for p, n in owners)
                + _I32.pack(len(nodes)) + b"".join(_I32.pack(n) + _encode_endpoints(e) for n, e in nodes))

    @classmethod
    def decode(cls, data: bytes) -> Assignment:
        (version,) = _I16.unpack_from(data, 0)
        (error,) = _I16.unpack_from(data, 2)
        (count,) = _I32.unpack_from(data, 4)
        partitions = frozenset(struct.unpack_from(f">{count}i", data, 8))
        position = 8 + 4 * count
        (owner_count,) = _I32.unpack_from(data, position)
        flat = struct.unpack_from(f">{2 * owner_count}i", data, position + 4)
        position += 4 + 8 * owner_count
        nodes: dict[int, tuple[Endpoint, ...]] = {}
        if version >= 1:
            (node_count,) = _I32.unpack_from(data, position)
            position += 4
            for _ in range(node_count):
                (node,) = _I32.unpack_from(data, position)
                nodes[node], position = _decode_endpoints(data, position + 4)
        return cls(error, partitions, dict(zip(flat[::2], flat[1::2], strict=True)), nodes)


def leader_assignments(members: Mapping[str, Metadata], partitions: int) -> dict[str, Assignment]:
    """What the leader sends each member: its partitions, or DUPLICATE_NODE_ID for every member but
    one of a node id (one already in the group before one joining, then the first by member id)."""
    first_of_node: dict[int, str] = {}
    # An instance already in the group (it was given a generation) keeps its node id against a
    # newcomer claiming it: the newcomer is the misconfigured one, and refusing the established
    # instance would stop it serving.
    for member_id in sorted(members, key=lambda m: (members[m].generation < 0, m)):
        first_of_node.setdefault(members[member_id].node_id, member_id)
    valid = {m: meta for m, meta in members.items() if first_of_node[meta.node_id] == m}
    result = assign([Report(m, meta.node_id, meta.owned, meta.generation) for m, meta in valid.items()], partitions)
    owners = {p: valid[m].node_id for m, owned in result.items() for p in owned}
    nodes = {meta.node_id: meta.endpoints for meta in valid.values()}
    return {m: (Assignment(0, result[m], owners, nodes) if m in valid
                else Assignment(DUPLICATE_NODE_ID, frozenset(), {}))
            for m in members}


class LogMembership:
    """One instance's member of the instance group. `run()` until `leave()`."""

    def __init__(self, cluster: LogCluster, group_id: str, node_id: int, partitions: int,
                 listener: OwnershipListener, session_timeout_ms: int = 10_000,
                 rebalance_timeout_ms: int = 30_000, heartbeat_interval_ms: int = 1_000,
                 endpoints: tuple[Endpoint, ...] = ()) -> None:
        self.cluster = cluster
        self.group_id = group_id
        self.node_id = node_id
        self.partitions = partitions
        self.listener = listener
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.heartbeat_interval_s = heartbeat_interval_ms / 1000
        self.member_id = ""
        self.generation = -1
        self.owned: frozenset[int] = frozenset()
        self.owners: dict[int, int] = {}
        self.nodes: dict[int, tuple[Endpoint, ...]] = {}
        self.endpoints = endpoints
        self.stable = asyncio.Event()
        self._leaving = False
        self._last_heartbeat = time.monotonic()

    async def run(self) -> None:
        """Join, serve the assignment, heartbeat, rejoin when told; returns after `leave()`."""
        rejoin = True
        while not self._leaving:
            try:
                if rejoin:
                    rejoin = await self._join_and_sync()
                    continue
                rejoin = await self._heartbeat()
            except LogUnavailable as exc:
                log.warning("instance_group_unreachable", group=self.group_id, detail=str(exc))
                if self.owned and time.monotonic() - self._last_heartbeat > self.session_timeout_ms / 1000:
                    await self._lose_everything()
                rejoin = True
                await asyncio.sleep(self.heartbeat_interval_s)

    def live(self) -> bool:
        """The lease: the upstream cannot have ended our session yet (see the module docstring)."""
        return time.monotonic() - self._last_heartbeat < LEASE_FRACTION * self.session_timeout_ms / 1000

    async def leave(self) -> None:
        """Hand every partition over, then leave the group (the others take them at once)."""
        self._leaving = True
        if self.owned:
            owned, self.owned = self.owned, frozenset()
            await self.listener.revoked(owned)
        if self.member_id:
            with contextlib.suppress(LogUnavailable):
                await self._call(LEAVE_GROUP, 4, {"group_id": self.group_id,
                                                  "members": [{"member_id": self.member_id, "group_instance_id": None}]})
        self.member_id = ""

    async def _call(self, api_key: int, version: int, fields: dict[str, object]) -> object:
        return await self.cluster.call_coordinator(self.group_id, api_key, version, fields, GROUP_KEY_TYPE)

    async def _join_and_sync(self) -> bool:
        """One rebalance round; True when another round is needed at once."""
        self.stable.clear()
        metadata = Metadata(self.node_id, self.generation, self.owned, self.endpoints).encode()
        response = await self.cluster.call_coordinator(self.group_id, JOIN_GROUP, 7, {
            "group_id": self.group_id, "session_timeout": self.session_timeout_ms,
            "rebalance_timeout": self.rebalance_timeout_ms, "member_id": self.member_id, "group_instance_id": None,
            "protocol_type": PROTOCOL_TYPE, "protocols": [{"name": PROTOCOL_NAME, "metadata": metadata}]},
            GROUP_KEY_TYPE)
        code = ErrorCode(int(response.error_code))
        if code == ErrorCode.MEMBER_ID_REQUIRED:
            self.member_id = str(response.member_id)
            return True
        if code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION):
            self.member_id = ""
            await self._lose_everything()
            return True
        if code in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE):
            self.cluster.forget_coordinator(self.group_id, GROUP_KEY_TYPE)
            raise LogUnavailable(f"JoinGroup {self.group_id}: {code.name}")
        if code in (ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS):
            return True
        if code != ErrorCode.NONE:
            raise LogUnavailable(f"JoinGroup {self.group_id}: {code.name}")
        self.member_id = str(response.member_id)
        generation = int(response.generation_id)
        assignments = []
        if response.leader == response.member_id:
            members = {str(m.member_id): Metadata.decode(bytes(m.metadata)) for m in response.members}
            assignments = [{"member_id": m, "assignment": a.encode()}
                           for m, a in leader_assignments(members, self.partitions).items()]
        sent = time.monotonic()  # the upstream restarts our session when SyncGroup reaches it
        synced = await self.cluster.call_coordinator(self.group_id, SYNC_GROUP, 5, {
            "group_id": self.group_id, "generation_id": generation, "member_id": self.member_id,
            "group_instance_id": None, "protocol_type": PROTOCOL_TYPE, "protocol_name": PROTOCOL_NAME,
            "assignments": assignments}, GROUP_KEY_TYPE)
        code = ErrorCode(int(synced.error_code))
        if code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION):
            self.member_id = ""
            await self._lose_everything()
            return True
        if code != ErrorCode.NONE:
            return True  # REBALANCE_IN_PROGRESS and the like: the round is over, join again
        assignment = Assignment.decode(bytes(synced.assignment))
        if assignment.error == DUPLICATE_NODE_ID:
            await self.leave()
            raise DuplicateNodeId(f"node id {self.node_id} is already used by another instance of "
                                  f"{self.group_id}; give every instance its own sidecar.node.id")
        self.generation = generation
        self._last_heartbeat = sent
        revoked = self.owned - assignment.partitions
        added = assignment.partitions - self.owned
        if revoked:
            self.owned = self.owned - revoked
            await self.listener.revoked(revoked)
        self.owners = assignment.owners
        self.nodes = assignment.nodes
        if added:
            self.owned = self.owned | added
            await self.listener.assigned(added, assignment.owners)
        log.info("instance_group_assignment", group=self.group_id, generation=generation,
                 owned=sorted(self.owned), revoked=sorted(revoked), added=sorted(added))
        if revoked:
            return True  # the cooperative second round: the revoked partitions are free now
        self.stable.set()
        return False

    async def _heartbeat(self) -> bool:
        await asyncio.sleep(self.heartbeat_interval_s)
        if self._leaving:
            return False
        sent = time.monotonic()
        response = await self._call(HEARTBEAT, 4, {"group_id": self.group_id, "generation_id": self.generation,
                                                   "member_id": self.member_id, "group_instance_id": None})
        code = ErrorCode(int(response.error_code))  # type: ignore[attr-defined]
        if code in (ErrorCode.NONE, ErrorCode.REBALANCE_IN_PROGRESS):  # still a member: the session goes on
            self._last_heartbeat = sent
        if code == ErrorCode.NONE:
            return False
        if code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION, ErrorCode.FENCED_INSTANCE_ID):
            self.member_id = ""
            await self._lose_everything()
        elif code in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE):
            self.cluster.forget_coordinator(self.group_id, GROUP_KEY_TYPE)
        return True

    async def _lose_everything(self) -> None:
        self.generation = -1
        if self.owned:
            owned, self.owned = self.owned, frozenset()
            await self.listener.lost(owned)
