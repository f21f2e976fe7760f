"""Registrations: how a group type (or a shard-wide service) plugs into ``CoordinatorShard``.

Every part of the core that serves requests, owns timers or replays records hands the shard one
:class:`Registration`; the shard builds its dispatch tables and its record codec from them and from
nothing else (``CoordinatorShard.__init__``). A group type is a package with a
``register(ctx) -> GroupType`` function (a :data:`GroupTypeFactory`); the built-in ones are listed
once in ``shard.GROUP_TYPES``, and ``CoordinatorShard(group_types=...)`` takes any others
(the node passes the ones it was given: a group type may live outside ``coordinator/``, in
``tests/`` for one). The shard-wide services (offsets, group administration, the coordinator epoch)
register the same way, and so do the node's services (``security/store.py``).

What a registration declares
============================

``record_types``
    the record types it owns (``record_codec.RecordTypeDecl``: id, key struct, value structs by
    version). The shard's codec is built from every registration's; an id, key struct or value
    struct declared twice stops construction. Exactly these key structs have a replayer.

``requests``
    core request type -> handler ``(request, fx)``. Handlers validate before they mutate: a
    :class:`~coordinator.core.errors.CoordinatorError` raised by a handler means "nothing happened"
    and the shard answers with ``error_responses[type(request)](request, code)``.
``error_responses``
    core request type -> ``(request, code) -> response``: the whole request refused with one code.
``timers``
    timer kind (the first element of a :data:`~coordinator.core.effects.TimerKey`) -> handler
    ``(key, fx)``. Only a timer whose deadline is still the current one for its key is delivered.
``replayers``
    record KEY type -> ``(key, value, live)``. The record types a type owns are exactly these keys;
    ``live`` is True when the record was just produced by a handler of this shard (a type whose
    handlers mutate in memory, like classic groups, then only remembers it as persisted).
``on_loaded`` / ``on_unloaded``
    ``(fx)`` once the log is replayed (arm timers for what the log holds) / when the shard is given
    up (answer parked requests NOT_COORDINATOR).
``on_topics_changed``
    ``(event, names, fx)`` after the shard's topic image took a ``TopicsChanged``; ``names`` are the
    topic names it concerned (every name for a snapshot).
``after_apply``
    ``(fx)`` after each step's records were replayed (report state transitions as events).

Work that waits for the end of the runtime's batch (KIP-848: one target assignment per group and
batch, see ``consumer/heartbeat.py``) uses four more hooks, all optional:

``waiting``
    ``() -> bool``: the type holds such work now. The shard calls the three below only then, so an
    idle type costs one call per event.
``before_event``
    ``(event, fx)`` before each event: finish the waiting work the event could observe.
``end_of_batch``
    ``(fx)`` after the last event of a batch: finish everything still waiting.
``abandon``
    ``() -> refs``: drop the waiting work after a core bug interrupted it; the refs get no reply
    from the core (the runtime fails them).

``gauges``
    :class:`Gauge` s the type's own state feeds (read at scrape time by the runtime's collector,
    which names no group type): a type-specific view such as the KIP-848 members by
    reconciliation state. The counts every type shares (groups by type and state, members by type)
    come through the ``Group`` contract and need no declaration.

And ``simple_group``: the one type whose groups an offset commit creates for an unknown group id
(Kafka: an Empty classic group without protocol type).

The online migration between protocols (``migration.py``) adds, all optional:

``hosted_requests``
    request type -> ``(group, request, fx)``: requests of ANOTHER type's protocol that this type
    serves for its own groups (the consumer type serves JoinGroup/SyncGroup/Heartbeat/LeaveGroup of
    classic members inside a consumer group). The request's own type finds the group is not one of
    its own and hands it over through ``ShardContext.bridges``.
``classic_view`` / ``release_classic`` / ``adopt_classic``
    the type whose groups speak the classic protocol natively describes one (upgrade), gives one up
    (upgrade) and takes one in (downgrade); see ``migration.Bridges``.
``replayed_downgrade``
    the type that downgrades its groups recognises, while the log is replayed, a classic group
    record a downgrade wrote together with the rebalance it owes (``migration.Bridges``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from coordinator.core.config import GroupConfig
from coordinator.core.effects import Effects, TimerKey
from coordinator.core.errors import ErrorCode
from coordinator.core.groups import Group
from coordinator.core.migration import Bridges, ClassicGroupView, HostedHandler
from coordinator.core.record_codec import RecordTypeDecl
from coordinator.core.requests import TopicsChanged
from coordinator.core.topics import TopicsImage

if TYPE_CHECKING:
    from coordinator.core.group_configs import GroupConfigs

Handler = Callable[[Any, Effects], None]
ErrorResponse = Callable[[Any, ErrorCode], object]
TimerHandler = Callable[[TimerKey, Effects], None]
Replayer = Callable[[Any, Any, bool], None]
Hook = Callable[[Effects], None]
S = TypeVar("S")


@dataclass(frozen=True, slots=True)
class ShardContext:
    """What the shard shares with every registration: one namespace of groups, one topic image,
    the per-group configs."""

    config: GroupConfig
    groups: dict[str, Group]
    topics: TopicsImage
    stopwatch: Callable[[], int]
    """Nanoseconds, for metrics only (assignor durations); never affects state."""
    group_configs: GroupConfigs
    """Each group's effective values (its per-group configs over the broker-wide settings)."""
    bridges: Bridges = field(default_factory=Bridges)
    """Filled by the shard once every registration is built (the online migration)."""
    type_settings: Mapping[type[Any], Any] = field(default_factory=dict)
    """The settings of the types ``config`` does not hold (a plug-in's config struct, declared in
    its ``GroupTypeDeclaration``), built by the node from the resolved configuration."""

    def settings(self, struct: type[S]) -> S:
        """A plug-in type's settings: the struct the node built from the configuration, or the
        struct's defaults when the shard was built without it (a bare shard in a test)."""
        value = self.type_settings.get(struct)
        return value if value is not None else struct()


@dataclass(frozen=True, slots=True)
class Gauge:
    """A gauge a registration declares: its Prometheus name, help line and label names, and what
    it reads (``samples()``: label values -> value, at scrape time; pure reads of the state)."""

    name: str
    doc: str
    labels: tuple[str, ...]
    samples: Callable[[], Mapping[tuple[str, ...], float]]


@dataclass(frozen=True, slots=True)
class Registration:
    name: str
    record_types: Sequence[RecordTypeDecl] = ()
    requests: Mapping[type, Handler] = field(default_factory=dict)
    error_responses: Mapping[type, ErrorResponse] = field(default_factory=dict)
    timers: Mapping[str, TimerHandler] = field(default_factory=dict)
    replayers: Mapping[type, Replayer] = field(default_factory=dict)
    on_loaded: Hook | None = None
    on_unloaded: Hook | None = None
    on_topics_changed: Callable[[TopicsChanged, frozenset[str], Effects], None] | None = None
    after_apply: Hook | None = None
    waiting: Callable[[], bool] | None = None
    before_event: Callable[[object, Effects], None] | None = None
    end_of_batch: Hook | None = None
    abandon: Callable[[], Sequence[int]] | None = None
    simple_group: Callable[[str], Group] | None = None
    """The group an offset commit creates when none exists (one registration: classic, as Kafka)."""
    hosted_requests: Mapping[type, HostedHandler] = field(default_factory=dict)
    classic_view: Callable[[Group], ClassicGroupView | None] | None = None
    release_classic: Callable[[Group, Effects], None] | None = None
    adopt_classic: Callable[[ClassicGroupView, str | None, Effects], None] | None = None
    replayed_downgrade: Callable[[Group], str | None] | None = None
    gauges: Sequence[Gauge] = ()


class GroupType(Protocol):
    """What ``register(ctx)`` of a group type package returns (its state lives on it)."""

    @property
    def registration(self) -> Registration: ...


GroupTypeFactory = Callable[[ShardContext], GroupType]
"""A group type as the shard takes it: ``register(ctx)``, called once per shard."""


@dataclass(frozen=True, slots=True)
class GroupTypeDeclaration:
    """A group type as the node knows it before any shard exists: its name (what
    ``group.coordinator.rebalance.protocols`` and ListGroups call it), its ``register``, and its
    config struct, whose ``setting(...)`` fields are its settings. A built-in type's are in the
    registry (``coordinator/config.py``, README's table included) and ``GroupConfig`` inherits its
    struct; a plug-in's (its module's ``GROUP_TYPE``) are added to the configuration that names the
    plug-in, and the type reads the struct through ``ShardContext.settings``."""

    name: str
    register: GroupTypeFactory
    settings: type[Any] | None = None


def check_records(registration: Registration) -> None:
    """A registration replays exactly the record types it declares (no record without an owner)."""
    declared = {decl.key for decl in registration.record_types}
    replayed = set(registration.replayers)
    if declared != replayed:
        missing = sorted(k.__name__ for k in declared - replayed)
        undeclared = sorted(k.__name__ for k in replayed - declared)
        raise ValueError(f"{registration.name}: record types declared without a replayer {missing}, "
                         f"replayed without a declaration {undeclared}")


def connect(bridges: Bridges, registrations: Sequence[Registration]) -> None:
    """Fill ``bridges`` from the registrations (each capability offered by at most one type)."""
    for registration in registrations:
        for request_type, handler in registration.hosted_requests.items():
            key = (registration.name, request_type)
            if key in bridges.hosted:
                raise ValueError(f"hosted request {key!r} registered twice")
            bridges.hosted[key] = handler
        for attribute in ("classic_view", "release_classic", "adopt_classic", "replayed_downgrade"):
            value = getattr(registration, attribute)
            if value is None:
                continue
            if getattr(bridges, attribute) is not None:
                raise ValueError(f"{attribute} offered twice (by {registration.name})")
            setattr(bridges, attribute, value)


def merged(registrations: Sequence[Registration], attribute: str) -> dict[Any, Any]:
    """One dispatch table from every registration's ``attribute``; a key registered twice is a bug."""
    table: dict[Any, Any] = {}
    for registration in registrations:
        for key, value in getattr(registration, attribute).items():
            if key in table:
                raise ValueError(f"{attribute}: {key!r} registered twice (by {registration.name})")
            table[key] = value
    return table


def hooks(registrations: Sequence[Registration], attribute: str) -> list[Any]:
    """Every registration's ``attribute`` hook that is set, in registration order."""
    return [hook for r in registrations if (hook := getattr(r, attribute)) is not None]
