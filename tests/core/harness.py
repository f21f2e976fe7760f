"""A synchronous, sleep-free driver for ``CoordinatorShard``.

``Harness`` holds a shard, a manual clock, every record written (round-tripped through the codec),
the timers armed, every reply by request ref and every event. ``advance(ms)`` fires due timers in
deadline order through ``handle(TimerFired(...))``, exactly as the runtime would.

After EVERY step it checks:

1. a fresh shard loading all records written so far as the server loads its log
   (``tests.support.loading``: through the record log, superseded offset commits skipped,
   decoded and replayed from bytes) has the same ``durable_view()`` as the live one;
2. the invariants of ``coordinator/core/classic/state.py`` on both shards, in particular that a
   classic group in Stable or Empty has exactly the durable fields of its last persisted record (so
   the durable-view check cannot be satisfied by simply never writing records).

The generic part (send/advance/check/restart) knows nothing about group types; classic helpers
(join/sync/...) build requests with fresh refs. KIP-848 helpers can be added next to them.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from coordinator.core.classic.group import ClassicGroup, persisted_view
from coordinator.core.classic.state import EMPTY, STABLE
from coordinator.core.config import GroupConfig
from coordinator.core.records import Record
from coordinator.core.registry import GroupTypeFactory
from coordinator.core.requests import (
    DeleteGroups,
    DescribeGroups,
    Event,
    Heartbeat,
    JoinGroup,
    LeaveGroup,
    LeavingMember,
    ListGroups,
    OffsetCommit,
    OffsetCommitPartition,
    OffsetCommitTopic,
    OffsetDelete,
    OffsetDeleteTopic,
    OffsetFetch,
    OffsetFetchGroup,
    OffsetFetchTopic,
    SyncGroup,
    TimerFired,
)
from coordinator.core.result import Result
from coordinator.core.shard import GROUP_TYPES, CoordinatorShard, ShardService
from tests.support.loading import loaded

DEFAULT_PROTOCOLS: tuple[tuple[str, bytes], ...] = (("range", b"r"), ("roundrobin", b"rr"))

# Tests mostly want rebalances to complete as soon as everyone has joined.
FAST = GroupConfig(group_initial_rebalance_delay_ms=0)


class Harness:
    def __init__(self, config: GroupConfig = FAST, start_ms: int = 1_000_000,
                 services: Callable[[], Sequence[ShardService]] = tuple,
                 group_types: Sequence[GroupTypeFactory] = GROUP_TYPES) -> None:
        """``services`` makes the shard services the node would install (for every shard the
        harness builds, the replayed ones too); none by default. ``group_types``: the group types
        every shard it builds hosts (the built-in ones by default)."""
        self.config = config
        self.now = start_ms
        self._services = services
        self._group_types = group_types
        self.shard = CoordinatorShard(config, services=services(), group_types=group_types)
        self.records: list[Record] = []
        self.timers: dict[tuple[str, ...], int] = {}
        self.replies: dict[int, list[object]] = defaultdict(list)
        self.events: list[object] = []
        self.results: list[Result] = []
        self._next_ref = 0
        self._next_id = 0
        self._absorb(self.shard.on_loaded(self.now))

    # ---- generic driving -------------------------------------------------------------------------

    def next_ref(self) -> int:
        self._next_ref += 1
        return self._next_ref

    def send(self, event: Event) -> Result:
        return self._step(event)

    def fire(self, key: tuple[str, ...], deadline_ms: int) -> Result:
        """Deliver a timer firing (possibly a stale one) without touching the clock."""
        return self._step(TimerFired(key, deadline_ms))

    def advance(self, ms: int) -> None:
        target = self.now + ms
        while True:
            due = [(deadline, key) for key, deadline in self.timers.items() if deadline <= target]
            if not due:
                break
            deadline, key = min(due)
            self.now = deadline
            del self.timers[key]
            self._step(TimerFired(key, deadline))
        self.now = target

    def restart(self) -> Result:
        """A new shard replays the log and takes over (soft state and timers are lost)."""
        self.shard = self._replayed_shard()
        self.timers = {}
        result = self.shard.on_loaded(self.now)
        self._absorb(result)
        self.check()
        return result

    def _step(self, event: Event | TimerFired) -> Result:
        result = self.shard.handle(event, self.now)
        self._absorb(result)
        self.check()
        return result

    def _absorb(self, result: Result) -> None:
        self.results.append(result)
        for record in result.records:
            encoded = self.shard.codec.encode_record(record)  # the shard's: every type it hosts
            decoded = self.shard.codec.decode_record(*encoded)
            assert decoded == record, f"codec round trip changed {record!r}"
            self.records.append(decoded)
        for op in result.timers:
            if op.deadline_ms is None:
                self.timers.pop(op.key, None)
            else:
                self.timers[op.key] = op.deadline_ms
        for reply in result.replies:
            self.replies[reply.ref].append(reply.response)
        self.events.extend(result.events)

    # ---- checks ----------------------------------------------------------------------------------

    def _replayed_shard(self) -> CoordinatorShard:
        return loaded(([record] for record in self.records), self.config, services=self._services,
                      group_types=self._group_types)

    def check(self) -> None:
        fresh = self._replayed_shard()
        assert fresh.durable_view() == self.shard.durable_view()
        check_invariants(self.shard)
        check_invariants(fresh)
        # The harness's view of armed timers is the shard's own.
        assert self.timers == self.shard.timers.deadlines

    # ---- reading results ---------------------------------------------------------------------------

    def reply(self, ref: int) -> Any:
        """The one reply to ``ref`` (fails if there is none yet, or more than one)."""
        answers = self.replies.get(ref, [])
        assert len(answers) == 1, f"expected exactly one reply to {ref}, got {answers!r}"
        return answers[0]

    def pending(self, ref: int) -> bool:
        return not self.replies.get(ref)

    def group(self, group_id: str) -> ClassicGroup:
        group = self.shard.group(group_id)
        assert group is not None, f"no group {group_id}"
        return group

    def state(self, group_id: str) -> str:
        group = self.shard.group(group_id)
        return "absent" if group is None else group.state_name

    def events_of(self, kind: type) -> list[Any]:
        return [e for e in self.events if isinstance(e, kind)]

    # ---- classic group requests (each returns the request's ref) ---------------------------------

    def join(
        self,
        group_id: str = "g",
        member_id: str = "",
        *,
        instance_id: str | None = None,
        protocol_type: str = "consumer",
        protocols: tuple[tuple[str, bytes], ...] = DEFAULT_PROTOCOLS,
        session_timeout_ms: int = 10_000,
        rebalance_timeout_ms: int = 30_000,
        client_id: str = "client",
        require_known_member_id: bool = True,
        supports_skip_assignment: bool = True,
    ) -> int:
        self._next_id += 1
        ref = self.next_ref()
        self.send(
            JoinGroup(
                ref=ref,
                group_id=group_id,
                member_id=member_id,
                group_instance_id=instance_id,
                protocol_type=protocol_type,
                protocols=protocols,
                session_timeout_ms=session_timeout_ms,
                rebalance_timeout_ms=rebalance_timeout_ms,
                client_id=client_id,
                client_host="/127.0.0.1",
                require_known_member_id=require_known_member_id,
                supports_skip_assignment=supports_skip_assignment,
                new_member_id=f"{instance_id or client_id}-{self._next_id}",
            )
        )
        return ref

    def join_new(self, group_id: str = "g", **kwargs: Any) -> tuple[int, str]:
        """KIP-394 two-step join of a dynamic member; returns (ref of the parked join, member id)."""
        first = self.join(group_id, **kwargs)
        member_id = self.reply(first).member_id
        return self.join(group_id, member_id, **kwargs), member_id

    def sync(
        self,
        group_id: str,
        member_id: str,
        generation_id: int,
        assignments: Iterable[tuple[str, bytes]] = (),
        *,
        instance_id: str | None = None,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
    ) -> int:
        ref = self.next_ref()
        self.send(
            SyncGroup(ref, group_id, generation_id, member_id, instance_id, protocol_type, protocol_name, tuple(assignments))
        )
        return ref

    def heartbeat(self, group_id: str, member_id: str, generation_id: int, instance_id: str | None = None) -> int:
        ref = self.next_ref()
        self.send(Heartbeat(ref, group_id, generation_id, member_id, instance_id))
        return ref

    def leave(self, group_id: str, *members: LeavingMember | str) -> int:
        ref = self.next_ref()
        batch = tuple(m if isinstance(m, LeavingMember) else LeavingMember(m) for m in members)
        self.send(LeaveGroup(ref, group_id, batch))
        return ref

    def commit(
        self,
        group_id: str,
        offsets: dict[tuple[str, int], int] | None = None,
        *,
        generation_id: int = -1,
        member_id: str = "",
        instance_id: str | None = None,
        retention_time_ms: int = -1,
        metadata: str | None = None,
    ) -> int:
        by_topic: dict[str, list[OffsetCommitPartition]] = defaultdict(list)
        for (topic, partition), offset in (offsets or {("t", 0): 1}).items():
            by_topic[topic].append(OffsetCommitPartition(partition, offset, -1, metadata))
        ref = self.next_ref()
        self.send(
            OffsetCommit(
                ref,
                group_id,
                generation_id,
                member_id,
                instance_id,
                retention_time_ms,
                tuple(OffsetCommitTopic(t, tuple(ps)) for t, ps in by_topic.items()),
            )
        )
        return ref

    def fetch(self, group_id: str, topics: dict[str, tuple[int, ...]] | None = None) -> Any:
        ref = self.next_ref()
        wanted = None if topics is None else tuple(OffsetFetchTopic(t, ps) for t, ps in topics.items())
        self.send(OffsetFetch(ref, (OffsetFetchGroup(group_id, topics=wanted),), require_stable=True))
        return self.reply(ref).groups[0]

    def delete_offsets(self, group_id: str, topics: dict[str, tuple[int, ...]]) -> Any:
        ref = self.next_ref()
        self.send(OffsetDelete(ref, group_id, tuple(OffsetDeleteTopic(t, ps) for t, ps in topics.items())))
        return self.reply(ref)

    def list_groups(self, states: tuple[str, ...] = (), types: tuple[str, ...] = ()) -> Any:
        ref = self.next_ref()
        self.send(ListGroups(ref, states, types))
        return self.reply(ref)

    def describe(self, *group_ids: str) -> Any:
        ref = self.next_ref()
        self.send(DescribeGroups(ref, group_ids))
        return self.reply(ref)

    def delete_groups(self, *group_ids: str) -> Any:
        ref = self.next_ref()
        self.send(DeleteGroups(ref, group_ids))
        return self.reply(ref)

    # ---- classic scenarios -------------------------------------------------------------------------

    def stable_group(self, group_id: str = "g", n: int = 2, **join_kwargs: Any) -> tuple[list[str], int]:
        """Form a Stable group of ``n`` dynamic members from scratch.

        Returns (member ids with the leader first, generation).
        """
        member_ids = [self.join_new(group_id, client_id=f"c{i}", **join_kwargs)[1] for i in range(n)]
        self.finish_initial_delay(group_id)
        return self.sync_all(group_id, member_ids)

    def finish_initial_delay(self, group_id: str) -> None:
        group = self.group(group_id)
        for _ in range(20):
            if group.state_name != "PreparingRebalance":
                return
            self.advance(self.config.group_initial_rebalance_delay_ms)
        raise AssertionError("the initial rebalance did not complete")

    def sync_all(self, group_id: str, member_ids: list[str]) -> tuple[list[str], int]:
        """In CompletingRebalance: followers sync, then the leader assigns ``assign-<id>`` to each."""
        group = self.group(group_id)
        assert group.state_name == "CompletingRebalance", group.state_name
        assert set(group.members) == set(member_ids), (set(group.members), member_ids)
        leader = group.leader_id
        assert leader is not None
        generation = group.generation_id
        followers = [m for m in member_ids if m != leader]
        refs = [self.sync(group_id, m, generation) for m in followers]
        assert all(self.pending(ref) for ref in refs), "followers answered before the leader synced"
        leader_ref = self.sync(group_id, leader, generation, [(m, f"assign-{m}".encode()) for m in member_ids])
        for member_id, ref in zip([*followers, leader], [*refs, leader_ref], strict=True):
            response = self.reply(ref)
            assert response.error_code == 0, response
            assert response.assignment == f"assign-{member_id}".encode()
        assert group.state is STABLE
        return [leader, *followers], generation


def check_invariants(shard: CoordinatorShard) -> None:
    for group_id, group in shard.groups.items():
        assert group.group_id == group_id
        if not isinstance(group, ClassicGroup):
            continue  # KIP-848 groups: tests/core/consumer/harness.py checks them
        if group.members:
            assert group.leader_id in group.members, f"{group_id}: leader {group.leader_id} not a member"
        else:
            assert group.leader_id is None, f"{group_id}: leader without members"
        assert group.static_members == {
            m.group_instance_id: m.member_id for m in group.members.values() if m.group_instance_id is not None
        }
        recount = Counter(name for m in group.members.values() for name in dict.fromkeys(n for n, _ in m.protocols))
        assert +group.supported_protocols == recount, f"{group_id}: protocol counter drifted"
        assert not (set(group.pending_join_members) & set(group.members))
        if group.state in (STABLE, EMPTY):
            # Nothing durable may run ahead of the log outside a rebalance.
            assert group.fields_view() == persisted_view(group.persisted), (
                f"{group_id} ({group.state_name}) differs from its last persisted record:\n"
                f"  live      {group.fields_view()}\n  persisted {persisted_view(group.persisted)}"
            )
