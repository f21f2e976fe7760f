"""``CoordinatorShard``: the pure state machine of one coordinator shard (one record log).

Contract with the runtime
=========================

* ``handle(event, now_ms) -> Result`` for every request and every fired timer. The shard's state is
  already updated when ``handle`` returns, including the effect of the returned records (they were
  applied through the same replay code). The runtime appends ``result.records`` as one log entry,
  then releases ``result.replies`` and applies ``result.timers``. It must NOT call ``replay`` for
  records it got from ``handle``; doing so is harmless (replay of such a record is a no-op) but wasted.
* ``handle(event, now_ms, batched=True)`` inside a runtime batch, then ``flush(now_ms)`` once at
  its end: KIP-848 heartbeats that need a new target may be deferred to the flush (their replies
  come in the flush's Result, or in the Result of a later event of the batch that had to complete
  them first, in front of its own effects: still one Result = one log entry). See "Deferred target
  assignment" in ``consumer/manager.py``. Without ``batched`` nothing is deferred.
* ``replay(record)`` while loading (start-up) or tailing (standby). Then ``on_loaded(now_ms)`` once,
  even for an empty log: it arms session timers (fresh session timeout for every member, as Kafka),
  the offsets-expiration timer, and writes a new ``CoordinatorEpoch`` when given a ``writer_id``.
* ``on_unloaded(now_ms)`` when giving the shard up: groups go Dead, parked JoinGroup/SyncGroup
  requests are answered NOT_COORDINATOR, timers are cancelled.
* ``handle`` dispatches on the event's type through ``self._handlers`` and timers on the key's first
  element through ``self._timer_handlers``; nothing here depends on a protocol version.

Durable state = offsets + each classic group's last persisted record + every consumer (KIP-848)
group's whole state (+ the coordinator epoch); see ``durable_view``. Soft state (rebalances in
flight, parked requests, timers) is documented in ``classic/group.py``.

Consumer groups follow Kafka's rule strictly: their handlers only WRITE records, and ``_apply``
replays them right after the handler returns (the same ``replay`` the loader uses), so replay is the
only code that changes consumer-group state (``consumer/group.py``). Topic metadata arrives as data:
the runtime posts ``TopicsChanged`` (a snapshot before serving, then one delta per catalog change);
``handle`` feeds it to the consumer groups, which keep a pure image of it (``consumer/topics.py``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from coordinator.core.classic.group import ClassicGroup
from coordinator.core.classic.manager import ClassicGroupManager
from coordinator.core.config import GroupConfig
from coordinator.core.consumer.manager import (
    REBALANCE_TIMER,
    SESSION_TIMER,
    ConsumerGroupManager,
)
from coordinator.core.consumer.topics import TopicsImage
from coordinator.core.effects import OFFSETS_EXPIRATION_KEY, Effects, TimerKey, TimerTable
from coordinator.core.errors import CoordinatorError, ErrorCode
from coordinator.core.group_admin import GroupAdmin
from coordinator.core.groups import Group
from coordinator.core.offsets import OffsetAndMetadata, OffsetManager
from coordinator.core.records import (
    CONSUMER_GROUP_RECORD_KEYS,
    CONSUMER_GROUP_RECORD_VALUES,
    CoordinatorEpochKey,
    CoordinatorEpochValue,
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
)
from coordinator.core.requests import (
    ConsumerGroupDescribe,
    ConsumerGroupHeartbeat,
    DeleteGroups,
    DescribeGroups,
    Event,
    Heartbeat,
    JoinGroup,
    LeaveGroup,
    ListGroups,
    OffsetCommit,
    OffsetDelete,
    OffsetFetch,
    SyncGroup,
    TimerFired,
    TopicsChanged,
)
from coordinator.core.responses import (
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatResponse,
    DeletableGroupResult,
    DeleteGroupsResponse,
    DescribedConsumerGroup,
    DescribedGroup,
    DescribeGroupsResponse,
    HeartbeatResponse,
    JoinGroupResponse,
    LeaveGroupResponse,
    ListGroupsResponse,
    OffsetDeleteResponse,
    OffsetFetchResponse,
    OffsetFetchResponseGroup,
    SyncGroupResponse,
)
from coordinator.core.result import Result

# How a request that failed validation as a whole is answered, per request type.
_ERROR_RESPONSES: dict[type, Callable[[Any, ErrorCode], object]] = {
    JoinGroup: lambda req, code: JoinGroupResponse(code, member_id=req.member_id),
    SyncGroup: lambda req, code: SyncGroupResponse(code),
    Heartbeat: lambda req, code: HeartbeatResponse(code),
    LeaveGroup: lambda req, code: LeaveGroupResponse(code),
    OffsetCommit: OffsetManager.commit_error_response,
    OffsetFetch: lambda req, code: OffsetFetchResponse(
        tuple(OffsetFetchResponseGroup(g.group_id, code) for g in req.groups)
    ),
    OffsetDelete: lambda req, code: OffsetDeleteResponse(code),
    ListGroups: lambda req, code: ListGroupsResponse(code),
    DescribeGroups: lambda req, code: DescribeGroupsResponse(
        tuple(DescribedGroup(g, code, "") for g in req.group_ids)
    ),
    DeleteGroups: lambda req, code: DeleteGroupsResponse(tuple(DeletableGroupResult(g, code) for g in req.group_ids)),
    ConsumerGroupHeartbeat: lambda req, code: ConsumerGroupHeartbeatResponse(code),
    ConsumerGroupDescribe: lambda req, code: ConsumerGroupDescribeResponse(
        tuple(DescribedConsumerGroup(g, code) for g in req.group_ids)
    ),
}


def _merged(first: Result | None, second: Result) -> Result:
    if first is None:
        return second
    return Result(first.records + second.records, first.replies + second.replies,
                  first.timers + second.timers, first.events + second.events)


class CoordinatorShard:
    def __init__(self, config: GroupConfig | None = None, *, stopwatch: Callable[[], int] | None = None) -> None:
        """``stopwatch`` (nanoseconds) only times the assignor for metrics; it never affects state."""
        self.config = config or GroupConfig()
        self.groups: dict[str, Group] = {}
        self.timers = TimerTable()
        self.coordinator_epoch: CoordinatorEpochValue | None = None
        self.topics = TopicsImage()
        self.classic = ClassicGroupManager(self.config, self.groups)
        self.consumer = ConsumerGroupManager(self.config, self.groups, self.topics, stopwatch)
        self.offsets = OffsetManager(self.config, self.groups, ClassicGroup)
        self.admin = GroupAdmin(self.groups, self.offsets)
        self._carried: Result | None = None  # applied, not yet returned (a handler bug interrupted it)
        self._handlers: dict[type, Callable[[Any, Effects], None]] = {
            JoinGroup: self.classic.join,
            SyncGroup: self.classic.sync,
            Heartbeat: self.classic.heartbeat,
            LeaveGroup: self.classic.leave,
            OffsetCommit: self.offsets.commit,
            OffsetFetch: self.offsets.fetch,
            OffsetDelete: self.offsets.delete,
            ListGroups: self.admin.list_groups,
            DescribeGroups: self.admin.describe_groups,
            DeleteGroups: self.admin.delete_groups,
            ConsumerGroupHeartbeat: self.consumer.heartbeat,
            ConsumerGroupDescribe: self.consumer.describe,
        }
        self._timer_handlers: dict[str, Callable[[TimerKey, Effects], None]] = {
            "classic-heartbeat": self.classic.on_heartbeat_timer,
            "classic-join": self.classic.on_join_timer,
            "classic-sync": self.classic.on_sync_timer,
            OFFSETS_EXPIRATION_KEY[0]: self._on_offsets_expiration,
            SESSION_TIMER: self.consumer.on_session_timer,
            REBALANCE_TIMER: self.consumer.on_rebalance_timer,
        }

    # ---- operations --------------------------------------------------------------------------

    def handle(self, event: Event | TimerFired, now_ms: int, *, batched: bool = False) -> Result:
        """Handle one event. ``batched=True`` (the runtime, inside a batch) lets a consumer-group
        heartbeat that needs a new target assignment defer the assignor, its reconciliation and its
        reply to :meth:`flush`, which the caller must call at the end of the batch."""
        pre = self._carried
        self._carried = None
        if self.consumer.has_deferred():
            groups = self.consumer.groups_to_complete_before(event)
            if groups:
                pre = _merged(pre, self._complete(groups, now_ms))
        fx = Effects(now_ms, self.timers)
        self.consumer.deferring = batched
        try:
            self._dispatch(event, fx)
        except BaseException:
            self._carried = pre  # already applied: the next result must still carry it to the log
            raise
        finally:
            self.consumer.deferring = False
        self._apply(fx.records)
        self.consumer.report_state_changes(fx)
        # Completing earlier heartbeats and this event: one entry, in this order.
        return _merged(pre, fx.to_result())

    def flush(self, now_ms: int) -> Result:
        """Complete every deferred consumer-group heartbeat (end of a runtime batch): one entry."""
        pre = self._carried
        self._carried = None
        return _merged(pre, self._complete(self.consumer.deferred_groups(), now_ms))

    def deferred_refs(self) -> list[int]:
        return self.consumer.deferred_refs()

    def _complete(self, group_ids: list[str], now_ms: int) -> Result:
        fx = Effects(now_ms, self.timers)
        for group_id in group_ids:
            self.consumer.complete_deferred(group_id, fx)
        self._apply(fx.records)
        self.consumer.report_state_changes(fx)
        return fx.to_result()

    def _dispatch(self, event: Event | TimerFired, fx: Effects) -> None:
        if isinstance(event, TimerFired):
            if self.timers.is_current(event.key, event.deadline_ms):
                del self.timers.deadlines[event.key]
                self._timer_handlers[event.key[0]](event.key, fx)
        elif isinstance(event, TopicsChanged):
            self.consumer.on_topics_changed(event, fx)
        else:
            try:
                self._handlers[type(event)](event, fx)
            except CoordinatorError as exc:
                # Handlers validate before they mutate, so a raised error means nothing happened.
                assert not fx.records, "a handler raised after producing records"
                fx.reply(event.ref, _ERROR_RESPONSES[type(event)](event, exc.code))

    def on_loaded(self, now_ms: int, *, writer_id: str | None = None) -> Result:
        fx = Effects(now_ms, self.timers)
        if writer_id is not None:
            epoch = 0 if self.coordinator_epoch is None else self.coordinator_epoch.epoch + 1
            fx.record(Record(CoordinatorEpochKey(), CoordinatorEpochValue(epoch, writer_id)))
        self.classic.on_loaded(fx)
        self.consumer.on_loaded(fx)
        fx.schedule(OFFSETS_EXPIRATION_KEY, self.config.offsets_retention_check_interval_ms)
        self._apply(fx.records)
        return fx.to_result()

    def on_unloaded(self, now_ms: int) -> Result:
        pre = self.flush(now_ms)
        fx = Effects(now_ms, self.timers)
        self.classic.on_unloaded(fx)
        for key in list(self.timers.deadlines):
            fx.cancel(key)
        return _merged(pre, fx.to_result())

    def _on_offsets_expiration(self, key: TimerKey, fx: Effects) -> None:
        self.offsets.cleanup_group_metadata(fx)
        fx.schedule(OFFSETS_EXPIRATION_KEY, self.config.offsets_retention_check_interval_ms)

    # ---- replay --------------------------------------------------------------------------------

    def replay(self, record: Record) -> None:
        """Apply one record from the log (loading or standby tailing)."""
        self._replay(record, live=False)

    def _apply(self, records: list[Record]) -> None:
        for record in records:
            self._replay(record, live=True)

    def _replay(self, record: Record, live: bool) -> None:
        key, value = record.key, record.value
        if isinstance(key, OffsetCommitKey):
            assert value is None or isinstance(value, OffsetCommitValue)
            self.offsets.replay(key, value)
        elif isinstance(key, GroupMetadataKey):
            assert value is None or isinstance(value, GroupMetadataValue)
            self.classic.replay(key, value, live)
        elif isinstance(key, CONSUMER_GROUP_RECORD_KEYS):
            # Live or not, the same replay: consumer-group handlers never mutate state themselves.
            assert value is None or isinstance(value, CONSUMER_GROUP_RECORD_VALUES)
            self.consumer.replay(key, value)
        elif isinstance(key, CoordinatorEpochKey):
            assert value is None or isinstance(value, CoordinatorEpochValue)
            self.coordinator_epoch = value
        else:  # pragma: no cover - the codec only produces the keys above
            raise AssertionError(f"unknown record key {key!r}")

    # ---- read-only views -------------------------------------------------------------------------

    def groups_by_state_and_type(self) -> dict[tuple[str, str], int]:
        """(Kafka state string, group type) -> number of groups, for gauges."""
        return dict(Counter((g.state_name, g.group_type) for g in self.groups.values()))

    def member_counts(self) -> dict[str, int]:
        """group id -> number of members."""
        return {group_id: len(g.members) for group_id, g in self.groups.items()}

    def group(self, group_id: str) -> Group | None:
        """The live group object, for inspection only (tests, debugging); never mutate it."""
        return self.groups.get(group_id)

    def committed_offset(self, group_id: str, topic: str, partition: int) -> OffsetAndMetadata | None:
        return self.offsets.get(group_id, topic, partition)

    def durable_view(self) -> dict[str, object]:
        """Everything a replay of the log must reproduce, as plain comparable data.

        For a classic group this is its last PERSISTED GroupMetadata (None for a simple group that
        only exists through its offsets), not its live fields: a group mid-rebalance runs ahead of
        the log by design. The harness checks separately that Stable/Empty groups do not.
        """
        return {
            "groups": {gid: (g.group_type, g.persisted) for gid, g in sorted(self.groups.items())},
            "offsets": {
                gid: {(t, p): o for t, parts in topics.items() for p, o in parts.items()}
                for gid, topics in sorted(self.offsets.offsets.items())
            },
            "coordinator_epoch": self.coordinator_epoch,
        }
