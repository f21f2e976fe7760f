"""``CoordinatorShard``: the pure state machine of one coordinator shard (one record log).

Contract with the runtime
=========================

* ``handle_batch(events, now_ms) -> list[Result]``: the runtime's batch of queued events (requests,
  fired timers, topic changes), ONE Result per event, in order. Each Result is one log entry: the
  runtime appends ``result.records`` as one entry, arms ``result.timers``, passes ``result.events``
  to observers and releases ``result.replies`` once everything they depend on is durable. The
  shard's state already includes every Result's records when ``handle_batch`` returns (they were
  applied through the same replay code the loader uses). A reply may come in the Result of a later
  event than its request (a parked JoinGroup, a KIP-848 heartbeat waiting for its group's target
  assignment), never later than the batch's last Result: nothing waits across batches except what
  waits for other clients or for a timer (the classic join and sync barriers).
  ``handle(event, now_ms)`` is a batch of one.
* Batch boundaries are the runtime's choice and never change the outcome's meaning, only how much
  work is shared: the core may let work of several events of one batch wait for the batch's end
  (KIP-848: one assignor run per group and batch, ``consumer/heartbeat.py``); an event that could
  observe such work completes it first, in its own Result.
* A core bug (an exception other than ``CoordinatorError``) in one event does not stop the batch:
  that event's Result carries ``failure`` and the refs (``failed``) that will get no reply; its own
  effects are dropped, effects it carried from earlier events are kept.
* ``replay_encoded(records)`` (the record bytes, as the record log loads them) or ``replay(record)``
  while loading (start-up) or tailing (standby). Then ``on_loaded(now_ms)`` once, even for an empty
  log: it arms session timers (fresh session timeout for every member, as Kafka), the
  offsets-expiration timer, and writes a new ``CoordinatorEpoch`` when given a ``writer_id``.
* ``on_unloaded(now_ms)`` when giving the shard up: groups go Dead, parked requests are answered
  NOT_COORDINATOR, timers are cancelled.

How the shard is put together
=============================

Every group type and every shard-wide service hands the shard a ``Registration``
(``registry.py``): its record types, request handlers, error responses, timer handlers, record
replayers, hooks and gauges. The dispatch tables and the record codec (``codec``, what the runtime
writes the log with) are built from them and from nothing else; a request, timer kind, record type
id or struct registered twice is an error at construction. The group types are given
(``group_types``; default ``GROUP_TYPES``, the built-in ones, and the node adds any it was given);
the services (offsets, group administration, the coordinator epoch) are the shard's own, and the
node may install more (``services``: SCRAM credentials and ACLs, ``security/store.py``), so the core
names no feature. Groups of every type share one namespace (``groups``) and are seen by the
services only through the ``Group`` contract (``groups.py``).

Durable state = offsets + each group's ``persisted`` form (a classic group's last persisted record,
a consumer (KIP-848) group's whole state) + the coordinator epoch + each service's view; see
``durable_view``. Soft state (rebalances in
flight, parked requests, waiting heartbeats, timers) is documented with each type. Topic metadata
arrives as data: the runtime posts ``TopicsChanged`` (a snapshot before serving, then one delta per
catalog change); the shard keeps a pure image of it (``topics.py``) and tells the types.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol, cast

from coordinator.core.classic import manager as classic
from coordinator.core.config import (
    ClassicGroupConfig,
    ConsumerGroupConfig,
    GroupConfig,
    ShareGroupConfig,
    StreamsGroupConfig,
)
from coordinator.core.consumer import registration as consumer
from coordinator.core.effects import Effects, TimerKey, TimerTable
from coordinator.core.epoch import CoordinatorEpoch, CoordinatorEpochValue
from coordinator.core.errors import CoordinatorError
from coordinator.core.group_admin import GroupAdmin
from coordinator.core.group_configs import GroupConfigs
from coordinator.core.groups import Group
from coordinator.core.offsets import LoadPlaces, OffsetAndMetadata, OffsetManager
from coordinator.core.record_codec import Record, RecordCodec, replay_encoded_record
from coordinator.core.registry import (
    Gauge,
    GroupType,
    GroupTypeDeclaration,
    GroupTypeFactory,
    Registration,
    ShardContext,
    check_records,
    connect,
    hooks,
    merged,
)
from coordinator.core.requests import Event, TimerFired, TopicsChanged
from coordinator.core.result import Result
from coordinator.core.share import registration as share
from coordinator.core.streams import registration as streams
from coordinator.core.topics import TopicsImage
from coordinator.core.txn_offsets import TxnOffsets

BUILT_IN_TYPES: tuple[GroupTypeDeclaration, ...] = (
    GroupTypeDeclaration("classic", classic.register, ClassicGroupConfig),
    GroupTypeDeclaration("consumer", consumer.register, ConsumerGroupConfig),
    GroupTypeDeclaration("streams", streams.register, StreamsGroupConfig),
    GroupTypeDeclaration("share", share.register, ShareGroupConfig),
)
"""The built-in group types, one line each: name, registration and settings."""

GROUP_TYPES: tuple[GroupTypeFactory, ...] = tuple(declared.register for declared in BUILT_IN_TYPES)
"""What a shard hosts unless it is given others."""


def _any_of(hooks: Sequence[Callable[[], bool]]) -> Callable[[], bool]:
    """One callable asking every hook; the hook itself when there is one (the usual case)."""
    if len(hooks) == 1:
        return hooks[0]
    if not hooks:
        return lambda: False

    def any_true() -> bool:
        for hook in hooks:  # noqa: SIM110 - once per event: no generator
            if hook():
                return True
        return False

    return any_true


class ShardService(Protocol):
    """A shard-wide service the node installs into the core (SCRAM credentials and ACLs,
    `security/store.py`): its registration (requests, records, hooks), the part of the durable state
    it owns (`durable_view`, under the registration's name), and the view the edges read, which
    changes only once the log entry carrying a change is durable: `mark()` after an entry is
    appended (None: nothing new), `publish(mark)` when it is durable (`ShardRuntime._settle`)."""

    @property
    def registration(self) -> Registration: ...
    def durable_view(self) -> object: ...
    def mark(self) -> int | None: ...
    def publish(self, upto: int) -> None: ...


class CoordinatorShard:
    def __init__(self, config: GroupConfig | None = None, *, stopwatch: Callable[[], int] | None = None,
                 services: Sequence[ShardService] = (), group_types: Sequence[GroupTypeFactory] = GROUP_TYPES,
                 type_settings: Mapping[type[Any], Any] | None = None) -> None:
        """``stopwatch`` (nanoseconds) only times the assignor for metrics; it never affects state.
        ``services`` are the node's shard-wide services (none in tests that need no security).
        ``group_types``: the group types to host (default: the built-in ones; the node adds any it
        was given, ``GROUP_TYPES + extra``). ``type_settings``: the config structs of types that
        ``config`` does not hold (a plug-in's), by struct (``ShardContext.settings``)."""
        self.config = config or GroupConfig()
        self.groups: dict[str, Group] = {}
        self.timers = TimerTable()
        self.epoch = CoordinatorEpoch()
        self.topics = TopicsImage()
        self.group_configs = GroupConfigs(self.config)
        ctx = ShardContext(self.config, self.groups, self.topics, stopwatch or (lambda: 0), self.group_configs,
                           type_settings=dict(type_settings or {}))
        self.types: dict[str, GroupType] = {}
        registrations: list[Registration] = []
        for make in group_types:
            group_type = make(ctx)
            registration = group_type.registration
            if registration.name in self.types:
                raise ValueError(f"group type {registration.name!r} registered twice")
            self.types[registration.name] = group_type
            registrations.append(registration)
        connect(ctx.bridges, registrations)  # the group types reach each other only through these
        simple = [r.simple_group for r in registrations if r.simple_group is not None]
        assert len(simple) == 1, "exactly one group type makes the groups of offset-only commits"
        self.offsets = OffsetManager(self.config, self.groups, simple[0], self.topics)
        self.admin = GroupAdmin(self.groups, self.offsets, frozenset(self.types))
        self.txn_offsets = TxnOffsets(self.groups)
        self.services: tuple[ShardService, ...] = tuple(services)
        self.publishers: tuple[ShardService, ...] = self.services
        """State the edges read that must change only once the entry carrying the change is
        durable: `mark()` after an entry is appended, `publish(mark)` when it is durable (the
        runtime's job, `ShardRuntime._settle`)."""
        registrations += [
            self.epoch.registration,
            self.offsets.registration,
            self.admin.registration,
            self.txn_offsets.registration,
            self.group_configs.registration,
            *(service.registration for service in self.services),
        ]
        self._handlers: dict[type, Callable[[Any, Effects], None]] = merged(registrations, "requests")
        self._error_responses: dict[type, Callable[[Any, Any], object]] = merged(registrations, "error_responses")
        assert set(self._error_responses) == set(self._handlers), "every request type needs its error response"
        self._timer_handlers: dict[str, Callable[[TimerKey, Effects], None]] = merged(registrations, "timers")
        self._replayers: dict[type, Callable[[Any, Any, bool], None]] = merged(registrations, "replayers")
        for registration in registrations:
            check_records(registration)
        self.codec = RecordCodec(decl for registration in registrations for decl in registration.record_types)
        """The record types of every registration: what this shard's log is written and read with."""
        self._replay_other = functools.partial(replay_encoded_record, self.codec.encoded_replayers(self._replayers))
        self._on_loaded: list[Callable[[Effects], None]] = hooks(registrations, "on_loaded")
        self._on_unloaded: list[Callable[[Effects], None]] = hooks(registrations, "on_unloaded")
        self._on_topics_changed: list[Callable[[TopicsChanged, frozenset[str], Effects], None]] = hooks(
            registrations, "on_topics_changed")
        self._after_apply: list[Callable[[Effects], None]] = hooks(registrations, "after_apply")
        self._has_waiting: Callable[[], bool] = _any_of(hooks(registrations, "waiting"))
        """Does some type hold work waiting for the batch's end? (Asked twice per event: one call.)"""
        self._before_event: list[Callable[[object, Effects], None]] = hooks(registrations, "before_event")
        self._end_of_batch: list[Callable[[Effects], None]] = hooks(registrations, "end_of_batch")
        self._abandon: list[Callable[[], Sequence[int]]] = hooks(registrations, "abandon")
        self.gauges: tuple[Gauge, ...] = tuple(gauge for r in registrations for gauge in r.gauges)
        """What the registrations' own state feeds to the metrics (read at scrape time)."""
        if len({gauge.name for gauge in self.gauges}) != len(self.gauges):
            raise ValueError("a gauge name declared twice")

    @property
    def consumer(self) -> consumer.ConsumerGroupType:
        """The KIP-848 group type (metrics read its member states)."""
        return cast(consumer.ConsumerGroupType, self.types["consumer"])

    @property
    def classic(self) -> classic.ClassicGroupManager:
        return cast(classic.ClassicGroupManager, self.types["classic"])

    # ---- operations --------------------------------------------------------------------------

    def handle_batch(self, events: Sequence[Event | TimerFired], now_ms: int) -> list[Result]:
        """Handle the runtime's batch: one Result (= one log entry) per event, in order."""
        if len(events) == 1:  # the common case (an idle runtime's in-place request)
            results = [self._handle_one(events[0], now_ms)]
        else:
            results = [self._handle_one(event, now_ms) for event in events]
        if results and self._has_waiting():
            results[-1] = results[-1].then(self._step(now_ms, self._end_of_batch_hooks))
        return results

    def handle(self, event: Event | TimerFired, now_ms: int) -> Result:
        """A batch of one. A core bug is raised here (its Result would be lost: tests only)."""
        result = self._handle_one(event, now_ms)
        if self._has_waiting():
            result = result.then(self._step(now_ms, self._end_of_batch_hooks))
        if result.failure is not None:
            raise result.failure
        return result

    def _handle_one(self, event: Event | TimerFired, now_ms: int) -> Result:
        if self._has_waiting():
            # Complete what the event could observe first: one entry, in this order.
            pre = self._step(now_ms, lambda fx: self._before_event_hooks(event, fx))
            return pre.then(self._step(now_ms, lambda fx: self._dispatch(event, fx), getattr(event, "ref", None)))
        # The usual case, ``_step`` inlined (the hot path of every steady heartbeat).
        fx = Effects(now_ms, self.timers)
        try:
            self._dispatch(event, fx)
        except Exception as exc:
            return self._failed(exc, getattr(event, "ref", None))
        records = fx.records
        if records:
            self._apply(records)
        for hook in self._after_apply:
            hook(fx)
        return Result(records, fx.replies, fx.timer_ops, fx.events)

    def _step(self, now_ms: int, work: Callable[[Effects], None], ref: int | None = None) -> Result:
        """Run ``work`` on fresh effects, apply its records, report; a core bug becomes a failed Result."""
        fx = Effects(now_ms, self.timers)
        try:
            work(fx)
        except Exception as exc:
            return self._failed(exc, ref)
        self._apply(fx.records)
        for hook in self._after_apply:
            hook(fx)
        return fx.to_result()

    def _failed(self, exc: Exception, ref: int | None) -> Result:
        """A core bug: drop the step's effects, let the types drop their waiting work, keep serving."""
        failed = [] if ref is None else [ref]
        for abandon in self._abandon:
            failed += abandon()
        return Result(failure=exc, failed=tuple(failed))

    def _before_event_hooks(self, event: object, fx: Effects) -> None:
        for hook in self._before_event:
            hook(event, fx)

    def error_response(self, request: Any, code: int) -> object:
        """The response refusing `request` whole with `code`, as a handler's `CoordinatorError`
        would (the runtime answers requests whose log entry the disk refused this way)."""
        return self._error_responses[type(request)](request, code)

    def _end_of_batch_hooks(self, fx: Effects) -> None:
        for hook in self._end_of_batch:
            hook(fx)

    def _dispatch(self, event: Event | TimerFired, fx: Effects) -> None:
        handler = self._handlers.get(type(event))  # a request: the common case, tested first
        if handler is not None:
            try:
                handler(event, fx)
            except CoordinatorError as exc:
                # Handlers validate before they mutate, so a raised error means nothing happened.
                assert not fx.records, "a handler raised after producing records"
                request: Any = event
                fx.reply(request.ref, self._error_responses[type(event)](event, exc.code))
        elif isinstance(event, TimerFired):
            if self.timers.is_current(event.key, event.deadline_ms):
                del self.timers.deadlines[event.key]
                self._timer_handlers[event.key[0]](event.key, fx)
        elif isinstance(event, TopicsChanged):
            names = self.topics.apply(event)
            for hook in self._on_topics_changed:
                hook(event, names, fx)
        else:
            raise KeyError(f"no handler registered for {type(event).__name__}")

    def on_loaded(self, now_ms: int, *, writer_id: str | None = None) -> Result:
        def load(fx: Effects) -> None:
            if writer_id is not None:
                fx.record(self.epoch.record(writer_id))
            for hook in self._on_loaded:
                hook(fx)

        return self._checked(self._step(now_ms, load))

    def on_unloaded(self, now_ms: int) -> Result:
        def unload(fx: Effects) -> None:
            for hook in self._on_unloaded:
                hook(fx)
            for key in list(self.timers.deadlines):
                fx.cancel(key)

        result = self._step(now_ms, unload)
        if self._has_waiting():  # never after a runtime batch; harmless otherwise
            result = self._step(now_ms, self._end_of_batch_hooks).then(result)
        return self._checked(result)

    @staticmethod
    def _checked(result: Result) -> Result:
        if result.failure is not None:
            raise result.failure
        return result

    # ---- replay --------------------------------------------------------------------------------

    def replay(self, record: Record) -> None:
        """Apply one record from the log (loading or standby tailing)."""
        self._replayers[type(record.key)](record.key, record.value, False)

    def replay_encoded(self, encoded: Iterable[tuple[bytes, bytes | None]], places: LoadPlaces | None = None) -> int:
        """``replay`` of encoded records as the record log loads them, in order (identity and value
        bytes, as ``records.replay_encoded_record`` reads them): how a loaded log is applied. Offset commits
        take ``OffsetManager.replay_loaded``'s inline path, everything else the registered
        replayers. Returns how many records were skipped as of an unknown type or version.
        ``places``: carried by the caller from one batch of a load to the next, during which
        nothing else changes the shard (``offsets.LoadPlaces``)."""
        return self.offsets.replay_loaded(encoded, self._replay_other, places)

    def _apply(self, records: list[Record]) -> None:
        replayers = self._replayers
        for record in records:
            replayers[type(record.key)](record.key, record.value, True)

    # ---- read-only views -------------------------------------------------------------------------

    @property
    def coordinator_epoch(self) -> CoordinatorEpochValue | None:
        """The last coordinator epoch the log holds."""
        return self.epoch.value

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
                gid: {(t, p): o for t, parts in (self.offsets.group_offsets(gid) or {}).items() for p, o in parts.items()}
                for gid in sorted(self.offsets.offsets)
            },
            "coordinator_epoch": self.coordinator_epoch,
            "offsets_upstream": sorted(self.txn_offsets.upstream),
            "group_configs": self.group_configs.durable_view(),
            **{service.registration.name: service.durable_view() for service in self.services},
        }
