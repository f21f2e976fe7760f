"""The streams group type (KIP-1071) registered with the shard: its group under the ``Group``
contract, its records' replay, its requests and its timers.

``register(ctx)`` is the one line ``shard.GROUP_TYPES`` lists. The pure steps live in the package
(``heartbeat.heartbeat``, ``describe``, ``offsets``); this module only wires them:

- ``StreamsGroup`` is what the shard's one namespace of groups holds: the durable
  ``StreamsGroupState`` its records rebuild, the soft state beside it (task offsets, the refined
  assignment, the endpoint epoch: derived again after a failover, as in Kafka) and the epoch each
  member's rebalance timer was armed at. Offsets, ListGroups (type ``streams``), DescribeGroups
  (Dead / not found, as Kafka answers for a non-classic group), deletion and the history read it
  through the contract.
- A heartbeat's step is replayed into the group as it is written (``heartbeat._write``); the shard
  replays the same records again (``live``), which changes nothing because every streams record is
  the whole value of its key.
- Timers: ``streams-session`` (every successful heartbeat re-arms it; expiry fences the member) and
  ``streams-rebalance`` (armed when a member must revoke; expiry fences it if it still has not).
  The warm-up re-check needs no timer of its own: v1 members report their task offsets every
  ``group.streams.task.offset.interval.ms`` and the heartbeat refines the assignment then.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any
from uuid import UUID

from coordinator.core.effects import Effects, TimerKey
from coordinator.core.errors import CoordinatorError, ErrorCode
from coordinator.core.events import MemberJoined, WarmupTasksChanged
from coordinator.core.groups import (
    DEAD,
    CommitValidator,
    ExpirationBase,
    Group,
    LiveStateMembers,
    OwnedPartitions,
    commit_timestamp,
)
from coordinator.core.record_codec import Record
from coordinator.core.registry import Gauge, Registration, ShardContext
from coordinator.core.requests import OffsetCommit
from coordinator.core.responses import DescribedGroup, ListedGroup
from coordinator.core.topics import TopicsImage

from . import offsets
from .describe import describe, rebalance_expired, session_expired
from .group import StreamsGroupState
from .heartbeat import SoftState, Step, StreamsSettings, heartbeat
from .member import StreamsGroupMember
from .records import StreamsRecord, group_tombstones
from .requests import (
    StreamsGroupDescribe,
    StreamsGroupDescribeResponse,
    StreamsGroupHeartbeat,
    StreamsGroupHeartbeatResponse,
)
from .schema import RECORD_KEYS, RECORD_TYPES
from .topology import configure

TYPE_NAME = "streams"
SESSION_TIMER = "streams-session"
REBALANCE_TIMER = "streams-rebalance"
_TIMER_KINDS = {"session": SESSION_TIMER, "rebalance": REBALANCE_TIMER}


class StreamsGroup(LiveStateMembers):
    """One streams group as the shard holds it (the ``Group`` contract over the pure state)."""

    group_type = TYPE_NAME
    protocol_type = TYPE_NAME
    revokes_all_on_rebalance = False  # members revoke only the tasks that move

    state: StreamsGroupState

    def __init__(self, group_id: str) -> None:
        self.state = StreamsGroupState(group_id)
        self.soft = SoftState()
        self.rebalance_epochs: dict[str, int] = {}
        """member id -> the member epoch its rebalance timer was armed at."""

    @property
    def group_id(self) -> str:
        return self.state.group_id

    @property
    def persisted(self) -> object:
        """Everything the records rebuild (the live group IS its records: every change is one)."""
        s = self.state
        return (s.group_epoch, s.metadata_hash, s.validated_topology_epoch, sorted(s.assignment_configs.items()),
                s.topology, s.assignment_epoch, s.assignment_timestamp, sorted(s.targets.items()),
                sorted(s.members.items()))

    def list_row(self) -> ListedGroup:
        return ListedGroup(self.group_id, TYPE_NAME, self.state_name, TYPE_NAME)

    def describe_row(self) -> DescribedGroup:
        # Described by StreamsGroupDescribe; DescribeGroups answers as Kafka does for a group of
        # another protocol: Dead, GROUP_ID_NOT_FOUND from v6.
        return DescribedGroup(self.group_id, ErrorCode.NONE, DEAD, exists=False)

    def validate_offset_commit(self, req: OffsetCommit, fx: Effects) -> CommitValidator | None:
        validate = offsets.validate_offset_commit(
            self.group_id, self.state.members, self.state.topology, req.member_id, req.group_instance_id,
            req.generation_id_or_member_epoch, False, 9 if req.supports_member_epoch else 8)
        if validate is None:
            return None

        def per_partition(topic: str, topic_id: UUID | None, partition: int) -> None:
            validate(topic, partition)

        return per_partition

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> None:
        offsets.validate_offset_fetch(self.group_id, self.state.members, member_id, member_epoch)

    def validate_offset_delete(self) -> None:
        # Kafka's StreamsGroup.validateOffsetDelete: nothing to check (the per-topic subscription
        # check is ``is_subscribed_to_topic``).
        return None

    def validate_delete_group(self) -> None:
        offsets.validate_delete_group(self.state_name)

    def is_subscribed_to_topic(self, topic: str) -> bool:
        topology = self.state.topology
        if topology is None or not self.state.members:
            return False
        return topic in offsets.source_topic_map(topology)

    def offset_expiration_base(self) -> ExpirationBase | None:
        return commit_timestamp

    def tombstones(self) -> list[Record]:
        return [Record(r.key, r.value) for r in group_tombstones(self.group_id, self.state.members)]

    def owned_partitions(self) -> dict[str, OwnedPartitions]:
        return {}  # members own tasks, not partitions

    def member_partitions(self, member_id: str) -> OwnedPartitions | None:
        return None


class _PartitionCounts(Mapping[str, int]):
    """The shard's topic image as the pure steps read it (name -> partitions), without a copy."""

    def __init__(self, topics: TopicsImage) -> None:
        self._topics = topics

    def __getitem__(self, name: str) -> int:
        info = self._topics.by_name(name)
        if info is None:
            raise KeyError(name)
        return info.num_partitions

    def __iter__(self) -> Iterator[str]:
        return (t.name for t in self._topics)

    def __len__(self) -> int:
        return len(self._topics)


class StreamsGroupType:
    """The streams group type of one shard: its registration and its request and timer handlers."""

    def __init__(self, ctx: ShardContext) -> None:
        self.ctx = ctx
        self.groups = ctx.groups
        self.counts = _PartitionCounts(ctx.topics)
        self._new: dict[str, StreamsGroup] = {}
        """Groups a heartbeat just created, installed by the live replay of their first record."""
        self.registration = Registration(
            name=TYPE_NAME,
            record_types=RECORD_TYPES,
            requests={StreamsGroupHeartbeat: self.heartbeat, StreamsGroupDescribe: self.describe},
            error_responses={
                StreamsGroupHeartbeat: lambda req, code: StreamsGroupHeartbeatResponse(code),
                StreamsGroupDescribe: lambda req, code: StreamsGroupDescribeResponse(
                    tuple(_refused(g, code) for g in req.group_ids)),
            },
            timers={SESSION_TIMER: self.on_session_timer, REBALANCE_TIMER: self.on_rebalance_timer},
            replayers=dict.fromkeys(RECORD_KEYS, self.replay),
            on_loaded=self.on_loaded,
            gauges=(Gauge("coordinator_streams_tasks", "Tasks held by streams-group members, by role.", ("role",),
                          self.tasks_by_role),),
        )

    # ---- settings ----------------------------------------------------------------------------------

    def settings(self, group_id: str = "") -> StreamsSettings:
        """The group's settings: its per-group configs (streams.*) over the broker-wide ones."""
        c, g = self.ctx.config, self.ctx.group_configs.of(group_id)
        return StreamsSettings(
            session_timeout_ms=g.streams_session_timeout_ms,
            heartbeat_interval_ms=g.streams_heartbeat_interval_ms, max_size=c.streams_group_max_size,
            num_standby_replicas=g.streams_num_standby_replicas,
            task_offset_interval_ms=c.streams_group_task_offset_interval_ms,
            num_warmup_replicas=c.streams_group_num_warmup_replicas,
            acceptable_recovery_lag=c.streams_group_acceptable_recovery_lag)

    # ---- requests ----------------------------------------------------------------------------------

    def heartbeat(self, req: StreamsGroupHeartbeat, fx: Effects) -> None:
        hb = req.heartbeat
        self._new.pop(hb.group_id, None)  # one a failed step left behind (its records were dropped)
        found = self.groups.get(hb.group_id)
        replaced: Group | None = None
        existing: StreamsGroup | None = None
        if isinstance(found, StreamsGroup):
            existing = found
        elif found is not None:
            # Kafka's getOrCreateStreamsGroup: an empty group of another type (an app that ran
            # with the classic protocol, or offsets only) is replaced on a join; its offsets stay.
            if hb.member_epoch != 0 or found.members or not found.is_empty:
                fx.reply(req.ref, StreamsGroupHeartbeatResponse(
                    ErrorCode.GROUP_ID_NOT_FOUND, f"Group {hb.group_id} is not a streams group."))
                return
            replaced = found
        group = existing if existing is not None else StreamsGroup(hb.group_id)
        before = group.state.members.get(hb.member_id) if existing is not None else None
        try:
            state, step = heartbeat(group.state if existing is not None else None, group.soft, hb, self.counts, self.ctx.topics.metadata_hash,
                                    self.settings(hb.group_id), req.client_id, req.client_host, fx.now_ms)
        except CoordinatorError as error:
            fx.reply(req.ref, StreamsGroupHeartbeatResponse(error.code, error.message))
            return
        group.state = state
        if existing is None and step.records:
            # A new group: its records' live replay installs this object (soft state and all).
            self._new[hb.group_id] = group
        if replaced is not None:
            for record in replaced.tombstones():
                fx.record(record)
        self._apply(group, step, fx)
        _report(group, before, group.state.members.get(hb.member_id), req, fx)
        fx.reply(req.ref, StreamsGroupHeartbeatResponse(ErrorCode.NONE, None, step.response, step.internal_topics))

    def describe(self, req: StreamsGroupDescribe, fx: Effects) -> None:
        described = []
        for group_id in req.group_ids:
            group = self.groups.get(group_id)
            if not isinstance(group, StreamsGroup):
                message = f"Group {group_id} not found." if group is None else f"Group {group_id} is not a streams group."
                described.append(_refused(group_id, ErrorCode.GROUP_ID_NOT_FOUND, message))
                continue
            topology = group.state.topology
            configured = configure(topology, self.counts) if topology is not None else None
            row = describe(group.state, group.soft, configured, self.counts)
            described.append({"error_code": ErrorCode.NONE, "error_message": None, **row})
        fx.reply(req.ref, StreamsGroupDescribeResponse(tuple(described)))

    # ---- timers ------------------------------------------------------------------------------------

    def on_session_timer(self, key: TimerKey, fx: Effects) -> None:
        group = self.groups.get(key[1])
        if isinstance(group, StreamsGroup):
            step = session_expired(group.state, group.soft, key[2])
            if step is not None:
                self._apply(group, step, fx)

    def on_rebalance_timer(self, key: TimerKey, fx: Effects) -> None:
        group = self.groups.get(key[1])
        if isinstance(group, StreamsGroup):
            epoch = group.rebalance_epochs.pop(key[2], None)
            if epoch is None:
                return
            step = rebalance_expired(group.state, group.soft, key[2], epoch)
            if step is not None:
                self._apply(group, step, fx)

    def on_loaded(self, fx: Effects) -> None:
        """A fresh session for every member the log holds (Kafka does the same on load)."""
        for group in self.groups.values():
            if isinstance(group, StreamsGroup):
                session_ms = self.ctx.group_configs.of(group.group_id).streams_session_timeout_ms
                for member_id in group.state.members:
                    fx.schedule((SESSION_TIMER, group.group_id, member_id), session_ms)

    def _apply(self, group: StreamsGroup, step: Step, fx: Effects) -> None:
        for record in step.records:
            fx.record(Record(record.key, record.value))
        for kind, group_id, member_id in step.cancel:
            fx.cancel((_TIMER_KINDS[kind], group_id, member_id))
            if kind == "rebalance":
                group.rebalance_epochs.pop(member_id, None)
        for (kind, group_id, member_id), deadline_ms, epoch in step.arm:
            fx.schedule((_TIMER_KINDS[kind], group_id, member_id), max(deadline_ms - fx.now_ms, 0))
            if kind == "rebalance":
                group.rebalance_epochs[member_id] = epoch

    # ---- replay ------------------------------------------------------------------------------------

    def replay(self, key: Any, value: Any, live: bool) -> None:
        group = self.groups.get(key.group_id)
        if group is None:
            if value is None:
                return  # a tombstone of a group already gone (the rest of a deletion)
            group = (self._new.pop(key.group_id, None) if live else None) or StreamsGroup(key.group_id)
            self.groups[key.group_id] = group
        if not isinstance(group, StreamsGroup):
            return  # another type's group under that id: its own records own it
        group.state.replay(StreamsRecord(key, value))
        if group.state.deleted:
            del self.groups[key.group_id]

    # ---- gauges ------------------------------------------------------------------------------------

    def tasks_by_role(self) -> dict[tuple[str, ...], float]:
        counts: dict[tuple[str, ...], float] = {("active",): 0.0, ("standby",): 0.0, ("warmup",): 0.0}
        for group in self.groups.values():
            if isinstance(group, StreamsGroup):
                for member in group.state.members.values():
                    counts[("active",)] += len(member.assigned.active)
                    counts[("standby",)] += len(member.assigned.standby)
                    counts[("warmup",)] += len(member.assigned.warmup)
        return counts


def _report(group: StreamsGroup, before: StreamsGroupMember | None, after: StreamsGroupMember | None,
            req: StreamsGroupHeartbeat, fx: Effects) -> None:
    """The heartbeat's events: a member joined; its warm-ups started, promoted or dropped."""
    if after is None:
        return
    if before is None:
        fx.event(MemberJoined(group.group_id, after.member_id, after.instance_id, req.client_id, req.client_host,
                              group_type=TYPE_NAME))
    warm_before = before.assigned.warmup if before is not None else frozenset()
    warm_after = after.assigned.warmup
    if warm_before != warm_after:
        promoted = {t for t in warm_before - warm_after if t in after.assigned.active}
        fx.event(WarmupTasksChanged(group.group_id, after.member_id, after.member_epoch, len(warm_after - warm_before),
                                    len(promoted), len(warm_before - warm_after - promoted)))


def _refused(group_id: str, code: ErrorCode, message: str | None = None) -> dict[str, Any]:
    return {"error_code": code, "error_message": message, "group_id": group_id, "group_state": "",
            "group_epoch": -1, "assignment_epoch": -1, "topology": None, "members": []}


def register(ctx: ShardContext) -> StreamsGroupType:
    return StreamsGroupType(ctx)


__all__ = ["StreamsGroup", "StreamsGroupType", "register"]


