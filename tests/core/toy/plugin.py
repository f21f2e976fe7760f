"""The toy group type as a plug-in (``coordinator.plugins=tests.core.toy.plugin``): its one
declaration (``GROUP_TYPE``: its name, ``register`` from ``group_type.py`` and its settings from
``settings.py``) and its one API declaration (``declarations``):
ToyJoin, private key 30000 v0, served by the shard, placed by its ``group_id``, authorized as READ
on that group (as JoinGroup is). Its schema is declared here, in the entity form of
``protocol.private``, when the module is imported. Nothing in ``coordinator/`` or ``protocol/``
names any of it."""

# No `from __future__ import annotations`: kio reads the entity classes' field types at runtime.

from collections.abc import Callable, Sequence
from typing import Any

from kio.static.constants import EntityType
from kio.static.primitive import i32

from coordinator.api.authorization import READ, GroupMember
from coordinator.api.declaration import ApiDeclaration, SidecarRoute
from coordinator.api.placement import OneGroup
from coordinator.api.registry import RequestContext
from coordinator.core.registry import GroupTypeDeclaration
from coordinator.runtime.apis.group_api import group_api
from coordinator.runtime.shard import ShardRuntime
from protocol.private import declare, entity, error_code, int32, string
from tests.core.toy.group_type import TYPE_NAME, ToyJoin, ToyJoinResponse, register
from tests.core.toy.settings import ToySettings

__all__ = ["GROUP_TYPE", "TOY_JOIN", "declarations"]

TOY_JOIN = 30000

GROUP_TYPE = GroupTypeDeclaration(TYPE_NAME, register, ToySettings)


@entity(TOY_JOIN, 0, EntityType.request)
class ToyJoinRequestV0:
    group_id: str = string()
    member_id: str = string()


@entity(TOY_JOIN, 0, EntityType.response)
class ToyJoinResponseV0:
    error_code: Any = error_code()
    epoch: i32 = int32()
    members: tuple[str, ...] = string()


declare(TOY_JOIN, "ToyJoin", "toy_join", {0: ToyJoinRequestV0}, {0: ToyJoinResponseV0})


def declarations(shard: Callable[[], ShardRuntime | None]) -> Sequence[ApiDeclaration]:
    def to_core(ctx: RequestContext, r: Any, ref: int) -> ToyJoin:
        return ToyJoin(ref, r.group_id, r.member_id)

    def to_wire(ctx: RequestContext, r: Any, resp: ToyJoinResponse) -> dict[str, Any]:
        return {"error_code": resp.error_code, "epoch": resp.epoch, "members": list(resp.members)}

    def on_error(ctx: RequestContext, r: Any, code: int) -> dict[str, Any]:
        return {"error_code": code, "epoch": -1, "members": []}

    return [group_api(shard, TOY_JOIN, 0, 0, to_core, to_wire, on_error, authorization=GroupMember(READ),
                      placement=OneGroup("group_id"), sidecar=SidecarRoute.SERVED)]
