"""``ConsumerHarness``: the core harness plus topic metadata and KIP-848 helpers and checks.

On top of :class:`tests.core.harness.Harness` (replay of all records == live durable state after every
step), it checks after every step, on the live shard and on the replayed one:

* the ownership index is exactly the union of every member's assigned and pending-revocation
  partitions, and no partition is in two members' unions;
* static members, subscription counters and assignor counters match the members;
* ``assignment_epoch <= group_epoch`` and no member is ahead of the assignment epoch;
* the latest assignment each member was TOLD (its last heartbeat response carrying one) never shares
  a partition with another member's: the property clients rely on.

Topics are created with deterministic ids (``UUID(int=n)``) and posted to the shard as
``TopicsChanged`` events, as the runtime posts the catalog.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any
from uuid import UUID

from coordinator.core.config import GroupConfig
from coordinator.core.consumer.group import ConsumerGroup
from coordinator.core.consumer.member import MemberState
from coordinator.core.errors import ErrorCode
from coordinator.core.requests import (
    ConsumerGroupDescribe,
    ConsumerGroupHeartbeat,
    HeartbeatTopicPartitions,
    TopicsChanged,
)
from coordinator.core.shard import CoordinatorShard
from coordinator.core.topics import TopicInfo
from tests.core.harness import Harness

CONSUMER = GroupConfig(group_initial_rebalance_delay_ms=0, consumer_group_assignors=("uniform", "range"))
UNSET: Any = object()


class ConsumerHarness(Harness):
    def __init__(
        self, topics: Mapping[str, int] | None = None, config: GroupConfig = CONSUMER, start_ms: int = 1_000_000
    ) -> None:
        self.catalog: dict[str, TopicInfo] = {}
        self._next_topic = 0
        # (group, member) -> {topic id: partitions} from the member's latest response with an assignment
        self.told: dict[tuple[str, str], dict[UUID, frozenset[int]]] = {}
        super().__init__(config, start_ms)
        for name, partitions in (topics or {}).items():
            self._new_topic(name, partitions)
        self.send(TopicsChanged(tuple(self.catalog.values()), snapshot=True))

    # ---- topics ----------------------------------------------------------------------------------

    def _new_topic(self, name: str, partitions: int) -> TopicInfo:
        self._next_topic += 1
        info = TopicInfo(UUID(int=self._next_topic), name, partitions)
        self.catalog[name] = info
        return info

    def tid(self, name: str) -> UUID:
        return self.catalog[name].topic_id

    def name_of(self, topic_id: UUID) -> str:
        return next(t.name for t in self.catalog.values() if t.topic_id == topic_id)

    def create_topic(self, name: str, partitions: int) -> UUID:
        info = self._new_topic(name, partitions)
        self.send(TopicsChanged((info,)))
        return info.topic_id

    def grow_topic(self, name: str, partitions: int) -> None:
        info = self.catalog[name]._replace(num_partitions=partitions)
        self.catalog[name] = info
        self.send(TopicsChanged((info,)))

    def delete_topic(self, name: str) -> None:
        info = self.catalog.pop(name)
        self.send(TopicsChanged(deleted=(info.topic_id,)))

    def restart(self) -> Any:
        result = super().restart()
        self.send(TopicsChanged(tuple(self.catalog.values()), snapshot=True))
        return result

    # ---- requests --------------------------------------------------------------------------------

    def owned(self, owned: Mapping[str, Iterable[int]] | None) -> tuple[HeartbeatTopicPartitions, ...] | None:
        if owned is None:
            return None
        return tuple(HeartbeatTopicPartitions(self.tid(t), tuple(sorted(ps))) for t, ps in owned.items())

    def cgh(
        self,
        member_id: str,
        epoch: int,
        group_id: str = "g",
        *,
        names: Iterable[str] | None = None,
        regex: str | None = None,
        owned: Mapping[str, Iterable[int]] | None = None,
        raw_owned: tuple[HeartbeatTopicPartitions, ...] | None = UNSET,
        rebalance_timeout_ms: int = -1,
        instance_id: str | None = None,
        rack_id: str | None = None,
        assignor: str | None = None,
        member_id_required: bool = True,
        new_member_id: str = "",
        client_id: str = "client",
        describable: Iterable[str] | None = None,
    ) -> Any:
        """Send one ConsumerGroupHeartbeat; returns its response. ``describable``: the topics the
        member's principal may DESCRIBE, as the edge computes them under an authorizer."""
        ref = self.next_ref()
        self.send(
            ConsumerGroupHeartbeat(
                ref=ref,
                group_id=group_id,
                member_id=member_id,
                member_epoch=epoch,
                instance_id=instance_id,
                rack_id=rack_id,
                rebalance_timeout_ms=rebalance_timeout_ms,
                subscribed_topic_names=None if names is None else tuple(names),
                subscribed_topic_regex=regex,
                server_assignor=assignor,
                topic_partitions=self.owned(owned) if raw_owned is UNSET else raw_owned,
                client_id=client_id,
                client_host="/127.0.0.1",
                member_id_required=member_id_required,
                new_member_id=new_member_id,
                describable_topics=None if describable is None else frozenset(describable),
            )
        )
        response = self.reply(ref)
        self._track(group_id, member_id or response.member_id or "", epoch, response)
        return response

    def cjoin(
        self,
        member_id: str,
        names: Iterable[str] | None = ("foo",),
        group_id: str = "g",
        *,
        regex: str | None = None,
        rebalance_timeout_ms: int = 300_000,
        **kwargs: Any,
    ) -> Any:
        """A full epoch-0 (re)join request, as clients send it."""
        return self.cgh(
            member_id, 0, group_id, names=names, regex=regex, owned={}, rebalance_timeout_ms=rebalance_timeout_ms,
            **kwargs,
        )

    def batch(self, *events: Any) -> dict[int, Any]:
        """Handle ``events`` as one runtime batch (``handle_batch``, one Result = one log entry per
        event). Checks the replay of the log after every entry (a crash may cut the log there) and,
        after the batch, replay == live; returns the replies by ref (each request gets exactly one)."""
        replies: dict[int, Any] = {}
        results = self.shard.handle_batch(events, self.now)
        assert len(results) == len(events)
        for result in results:
            assert result.failure is None
            self._absorb(result)
            check_consumer_invariants(self._replayed_shard())
        self.check()
        for result in results:
            for reply in result.replies:
                assert reply.ref not in replies, f"two replies to {reply.ref}"
                replies[reply.ref] = reply.response
        assert set(replies) == {e.ref for e in events if hasattr(e, "ref")}
        return replies

    def join_request(self, member_id: str, names: Iterable[str] = ("foo",), group_id: str = "g") -> Any:
        return ConsumerGroupHeartbeat(
            ref=self.next_ref(), group_id=group_id, member_id=member_id, member_epoch=0, rebalance_timeout_ms=300_000,
            subscribed_topic_names=tuple(names), topic_partitions=(), client_id="client", client_host="/127.0.0.1",
        )

    def describe_consumer(self, *group_ids: str) -> Any:
        ref = self.next_ref()
        self.send(ConsumerGroupDescribe(ref, group_ids))
        return self.reply(ref)

    def _track(self, group_id: str, member_id: str, epoch: int, response: Any) -> None:
        key = (group_id, member_id)
        if response.error_code != ErrorCode.NONE or epoch < 0:
            self.told.pop(key, None)  # the client drops its partitions (lost) or left
        elif response.assignment is not None:
            self.told[key] = {tid: frozenset(ps) for tid, ps in response.assignment}
        self.check_told()

    # ---- reading -----------------------------------------------------------------------------------

    def cgroup(self, group_id: str = "g") -> ConsumerGroup:
        group = self.shard.group(group_id)
        assert isinstance(group, ConsumerGroup), f"{group_id} is not a consumer group: {group!r}"
        return group

    def named(self, assignment: Any) -> dict[str, set[int]]:
        """A response assignment (or a member's partitions) by topic name."""
        if assignment is None:
            return {}
        items = assignment.items() if isinstance(assignment, Mapping) else assignment
        return {self.name_of(tid): set(ps) for tid, ps in items if ps}

    # ---- checks ------------------------------------------------------------------------------------

    def check(self) -> None:
        super().check()
        check_consumer_invariants(self.shard)
        check_consumer_invariants(self._replayed_shard())

    def check_told(self) -> None:
        """No partition is in two members' latest responses (members still in their group)."""
        seen: dict[tuple[str, UUID, int], str] = {}
        for (group_id, member_id), assignment in self.told.items():
            group = self.shard.group(group_id)
            if not isinstance(group, ConsumerGroup) or member_id not in group.members:
                continue
            for tid, partitions in assignment.items():
                for p in partitions:
                    other = seen.setdefault((group_id, tid, p), member_id)
                    assert other == member_id, f"{tid}-{p} was given to both {other} and {member_id}"


def check_consumer_invariants(shard: CoordinatorShard) -> None:
    for group_id, group in shard.groups.items():
        if not isinstance(group, ConsumerGroup):
            continue
        owners: dict[tuple[UUID, int], str] = {}
        for member in group.members.values():
            for assignment in (member.assigned_partitions, member.partitions_pending_revocation):
                for tid, partitions in assignment.items():
                    assert partitions, f"{group_id}: empty partition set kept for {tid}"
                    for p in partitions:
                        previous = owners.setdefault((tid, p), member.member_id)
                        assert previous == member.member_id, f"{group_id}: {tid}-{p} owned twice"
            if member.state is not MemberState.UNREVOKED_PARTITIONS:
                assert not member.partitions_pending_revocation, f"{member.member_id} pending outside UNREVOKED"
            assert member.member_epoch <= group.assignment_epoch or member.member_epoch < 0, (
                f"{group_id}: member {member.member_id} at {member.member_epoch} ahead of {group.assignment_epoch}"
            )
        index = {(tid, p): m for tid, parts in group.partition_owners.items() for p, m in parts.items()}
        assert index == owners, f"{group_id}: ownership index drifted"
        assert group.static_members == {
            m.instance_id: m.member_id for m in group.members.values() if m.instance_id is not None
        }
        names: dict[str, int] = {}
        regexes: dict[str, int] = {}
        filtered: dict[tuple[str, frozenset[str] | None], int] = {}
        assignors: dict[str, int] = {}
        for m in group.members.values():
            for n in m.subscribed_topic_names:
                names[n] = names.get(n, 0) + 1
            if m.subscribed_topic_regex:
                regexes[m.subscribed_topic_regex] = regexes.get(m.subscribed_topic_regex, 0) + 1
                key = (m.subscribed_topic_regex, m.regex_topics)
                filtered[key] = filtered.get(key, 0) + 1
            if m.server_assignor is not None:
                assignors[m.server_assignor] = assignors.get(m.server_assignor, 0) + 1
        assert dict(group.subscribed_names) == names
        assert dict(group.subscribed_regexes) == regexes
        assert dict(group.regex_subscriptions) == filtered
        assert dict(group.server_assignors) == assignors
        unreconciled = sum(1 for m in group.members.values() if not group.is_reconciled(m))
        assert group.unreconciled == unreconciled, f"{group_id}: unreconciled count drifted"
        for mid, held in group.held_records.items():
            member = group.members[mid]
            if held.holds(member):  # the record a catch-up would reuse says what the member holds
                assert group.assignment_value(member) == member.to_assignment_value(), f"{group_id}: {mid}"
        assert group.assignment_epoch <= group.group_epoch
        assert set(group.target_assignment) <= set(group.members), f"{group_id}: target of a non-member"
