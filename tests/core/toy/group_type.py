"""A group type that exists only in the tests: the proof that a type plugs in by registration alone.

"toy" groups are as small as a group type can be: one request (``ToyJoin``: a member joins or
stays), one record type (``ToyGroup``, type 4242: the group's epoch and members), one timer (the
group's session: when it fires, every member is dropped, as a session expiry would; its length is
the type's one setting, ``toy.session.timeout.ms``, ``settings.py``), one gauge (members per group). Nothing in
``coordinator/`` names it: a shard hosts it when given ``GROUP_TYPES + (register,)``, and a node
when given it as an extra group type. Its request reaches the core as any request does; serving it
over a socket needs an API declaration (the API side).
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from coordinator.core.effects import Effects, TimerKey
from coordinator.core.errors import CoordinatorError, ErrorCode
from coordinator.core.groups import (
    DEAD,
    CommitValidator,
    ExpirationBase,
    OwnedPartitions,
    commit_timestamp,
)
from coordinator.core.record_codec import Record, RecordStruct, RecordTypeDecl
from coordinator.core.registry import Gauge, Registration, ShardContext
from coordinator.core.requests import OffsetCommit
from coordinator.core.responses import DescribedGroup, ListedGroup

from .settings import ToySettings

TYPE_NAME = "toy"
TOY_GROUP = 4242
SESSION_TIMER = "toy-session"


# ---- the record ----------------------------------------------------------------------------------


class ToyGroupKey(RecordStruct, frozen=True):
    group_id: str


class ToyGroupValue(RecordStruct, frozen=True):
    epoch: int
    members: tuple[str, ...] = ()  # sorted


RECORD_TYPES = (RecordTypeDecl(TOY_GROUP, "ToyGroup", ToyGroupKey, {0: ToyGroupValue}),)


# ---- the request -------------------------------------------------------------------------------


class ToyJoin(msgspec.Struct, frozen=True, gc=False):
    ref: int
    group_id: str
    member_id: str


class ToyJoinResponse(msgspec.Struct, frozen=True, gc=False):
    error_code: ErrorCode
    epoch: int = -1
    members: tuple[str, ...] = ()


# ---- the group -----------------------------------------------------------------------------------


class ToyGroup:
    """A toy group: an epoch bumped by every membership change, and its members."""

    def __init__(self, group_id: str, value: ToyGroupValue) -> None:
        self._group_id = group_id
        self.value = value

    group_type = TYPE_NAME
    protocol_type = TYPE_NAME
    revokes_all_on_rebalance = False

    @property
    def group_id(self) -> str:
        return self._group_id

    @property
    def state_name(self) -> str:
        return "Stable" if self.value.members else "Empty"

    @property
    def members(self) -> Mapping[str, object]:
        return dict.fromkeys(self.value.members)

    @property
    def is_empty(self) -> bool:
        return not self.value.members

    @property
    def persisted(self) -> object:
        return self.value  # every change is a record: the live group IS its last record

    def list_row(self) -> ListedGroup:
        return ListedGroup(self._group_id, TYPE_NAME, self.state_name, TYPE_NAME)

    def describe_row(self) -> DescribedGroup:
        return DescribedGroup(self._group_id, ErrorCode.NONE, DEAD, exists=False)  # not a classic group

    def validate_offset_commit(self, req: OffsetCommit, fx: Effects) -> CommitValidator | None:
        if req.member_id not in self.value.members:
            raise CoordinatorError(ErrorCode.UNKNOWN_MEMBER_ID)
        return None

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> None:
        return None

    def validate_offset_delete(self) -> None:
        if self.value.members:
            raise CoordinatorError(ErrorCode.NON_EMPTY_GROUP)

    def validate_delete_group(self) -> None:
        if self.value.members:
            raise CoordinatorError(ErrorCode.NON_EMPTY_GROUP)

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return False

    def offset_expiration_base(self) -> ExpirationBase | None:
        return commit_timestamp if not self.value.members else None

    def tombstones(self) -> list[Record]:
        return [Record(ToyGroupKey(self._group_id), None)]

    def owned_partitions(self) -> dict[str, OwnedPartitions]:
        return {}

    def member_partitions(self, member_id: str) -> OwnedPartitions | None:
        return None


# ---- the type ------------------------------------------------------------------------------------


class ToyGroupType:
    def __init__(self, ctx: ShardContext) -> None:
        self.groups = ctx.groups  # the shard's one namespace, shared with every other type
        self.session_ms = ctx.settings(ToySettings).toy_session_timeout_ms
        self.registration = Registration(
            name=TYPE_NAME,
            record_types=RECORD_TYPES,
            requests={ToyJoin: self.join},
            error_responses={ToyJoin: lambda req, code: ToyJoinResponse(code)},
            timers={SESSION_TIMER: self.session_expired},
            replayers={ToyGroupKey: self.replay},
            on_loaded=self.loaded,
            gauges=(Gauge("coordinator_toy_members", "Members of toy groups, by group.", ("group",), self.members),),
        )

    def members(self) -> dict[tuple[str, ...], float]:
        return {(g.group_id,): len(g.members) for g in self.groups.values() if isinstance(g, ToyGroup)}

    def join(self, req: ToyJoin, fx: Effects) -> None:
        if not req.group_id or not req.member_id:
            raise CoordinatorError(ErrorCode.INVALID_REQUEST)
        group = self.groups.get(req.group_id)
        if group is not None and not isinstance(group, ToyGroup):
            raise CoordinatorError(ErrorCode.GROUP_ID_NOT_FOUND)  # the id names a group of another type
        value = group.value if group is not None else ToyGroupValue(0)
        if req.member_id not in value.members:
            value = ToyGroupValue(value.epoch + 1, tuple(sorted((*value.members, req.member_id))))
            fx.record(Record(ToyGroupKey(req.group_id), value))
        fx.schedule(_session_key(req.group_id), self.session_ms)
        fx.reply(req.ref, ToyJoinResponse(ErrorCode.NONE, value.epoch, value.members))

    def session_expired(self, key: TimerKey, fx: Effects) -> None:
        group = self.groups.get(key[1])
        if isinstance(group, ToyGroup) and group.value.members:
            fx.record(Record(ToyGroupKey(group.group_id), ToyGroupValue(group.value.epoch + 1)))

    def loaded(self, fx: Effects) -> None:
        for group in self.groups.values():  # a fresh session for every group the log holds members of
            if isinstance(group, ToyGroup) and group.value.members:
                fx.schedule(_session_key(group.group_id), self.session_ms)

    def replay(self, key: ToyGroupKey, value: ToyGroupValue | None, live: bool) -> None:
        if value is None:
            self.groups.pop(key.group_id, None)
            return
        group = self.groups.get(key.group_id)
        if isinstance(group, ToyGroup):
            group.value = value
        else:
            self.groups[key.group_id] = ToyGroup(key.group_id, value)


def _session_key(group_id: str) -> TimerKey:
    return (SESSION_TIMER, group_id)


def register(ctx: ShardContext) -> ToyGroupType:
    return ToyGroupType(ctx)
