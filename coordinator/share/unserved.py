"""Share groups' APIs where they cannot be served, answered in Kafka's words instead of left
unadvertised (a share consumer then waited forever): an embedded shard k >= 1 of a node of several
shards (``coordinator.shards`` above 1) that has no listener to reach shard 0 on.

Why: clients send ShareFetch and ShareAcknowledge to a partition's leader, and every embedded
partition is led by shard 0 (the data plane is one process's), while a group's state lives on the
shard its id hashes to. Shard k serves the share groups placed on it by reading shard 0's data
plane over the wire (``shard_zero``) while shard 0 forwards it their fetches (``forward``), both
over the forwarding listener (``inter.broker.listener.name``, by default the first PLAINTEXT one;
``node/shards.share_forwarding``). With no such listener (every listener secured and none named)
neither can happen, and such a group is refused, explicitly:

- ShareGroupHeartbeat, ShareGroupDescribe and the three share offsets APIs: a group placed on this
  shard is answered UNSUPPORTED_VERSION with a message naming the restriction, which is what a
  Kafka broker answers while share groups are off (clients stop with it rather than retry forever);
  a group of another shard NOT_COORDINATOR, as every group API here (the client asks
  FindCoordinator again and goes to that shard).
- ShareFetch and ShareAcknowledge: this node leads no partition, so each one is
  NOT_LEADER_OR_FOLLOWER with shard 0 as its current leader, as a Kafka follower answers (the client
  refreshes its metadata and sends them to shard 0).

Sidecar mode never refuses: every shard (and every instance sharing the log upstream) reads the
upstream itself, and without a forwarding listener a share request reaching a process that does
not hold its group is answered NOT_LEADER_OR_FOLLOWER (``share/forward.py``).

The gates come before any authorization check, as Kafka's share-groups-off gate does. A refused
group is logged once (``share_group_not_served``): librdkafka shows its application only the code.
"""

from __future__ import annotations

import functools
from typing import Any

from protocol.errors import ErrorCode

from ..api.authorization import NOT_REQUESTED, Unchecked
from ..api.declaration import ApiDeclaration, SidecarRoute
from ..api.placement import NoGroup
from ..api.registry import RequestContext
from ..api.respond import respond
from ..logging import get_logger
from ..runtime.apis.view import NodeView
from .apis import SHARE_GROUP_DESCRIBE, SHARE_GROUP_HEARTBEAT
from .fetch_apis import SHARE_ACKNOWLEDGE, SHARE_FETCH
from .offsets_apis import (
    ALTER_SHARE_GROUP_OFFSETS,
    DELETE_SHARE_GROUP_OFFSETS,
    DESCRIBE_SHARE_GROUP_OFFSETS,
)
from .refusals import refused_answer

_GATE = Unchecked("refused before any check: share groups are not served here (Kafka's share-groups-off gate, "
                  "or a follower's NOT_LEADER_OR_FOLLOWER)")


log = get_logger("coordinator.share")


class _Refusals:
    def __init__(self, view: NodeView) -> None:
        self.view = view

    @functools.lru_cache(maxsize=1024)  # noqa: B019 - one per node; bounds memory, a group logged again after eviction
    def _logged(self, group_id: str, shard: int) -> None:
        """librdkafka shows the client only the code: the operator gets why, once per group id."""
        log.warning("share_group_not_served", group=group_id, shard=shard,
                    reason="no forwarding listener: share groups are served by shard 0 only")

    def code(self, group_id: str) -> tuple[ErrorCode, str | None]:
        """UNSUPPORTED_VERSION for a group placed here (why, in the message); NOT_COORDINATOR otherwise."""
        shard = self.view.layout.shard_of_group(group_id)
        if shard != self.view.shard:
            return ErrorCode.NOT_COORDINATOR, None
        self._logged(group_id, shard)
        return ErrorCode.UNSUPPORTED_VERSION, (
            f"Share groups are served only for group ids placed on shard 0 when coordinator.shards is above 1 "
            f"and no listener can reach shard 0 (none PLAINTEXT, no inter.broker.listener.name); "
            f"group '{group_id}' is placed on shard {shard} of {self.view.layout.shards}.")

    def heartbeat(self, ctx: RequestContext, r: Any) -> Any:
        code, message = self.code(r.group_id or "")
        return respond(ctx, {"throttle_time": 0, "error_code": code, "error_message": message, "member_id": None,
                             "member_epoch": 0, "heartbeat_interval": 0, "assignment": None})

    def describe(self, ctx: RequestContext, r: Any) -> Any:
        groups = []
        for group_id in r.group_ids:
            code, message = self.code(group_id)
            groups.append({"error_code": code, "error_message": message, "group_id": group_id, "group_state": "",
                           "group_epoch": 0, "assignment_epoch": 0, "assignor_name": "", "members": [],
                           "authorized_operations": NOT_REQUESTED})
        return respond(ctx, {"throttle_time": 0, "groups": groups})

    def describe_offsets(self, ctx: RequestContext, r: Any) -> Any:
        groups = []
        for entry in r.groups:
            code, message = self.code(entry.group_id)
            groups.append({"group_id": entry.group_id, "error_code": code, "error_message": message, "topics": []})
        return respond(ctx, {"throttle_time": 0, "groups": groups})

    def alter_or_delete_offsets(self, ctx: RequestContext, r: Any) -> Any:
        code, message = self.code(r.group_id or "")
        return respond(ctx, {"throttle_time": 0, "error_code": code, "error_message": message, "responses": []})

    def fetch(self, ctx: RequestContext, r: Any) -> Any:
        return self._not_leader(ctx, r, acknowledge_only=False)

    def acknowledge(self, ctx: RequestContext, r: Any) -> Any:
        return self._not_leader(ctx, r, acknowledge_only=True)

    def _not_leader(self, ctx: RequestContext, r: Any, acknowledge_only: bool) -> Any:
        leader = self.view.data_node(ctx.listener)
        endpoints = [{"node_id": leader.node_id, "host": leader.host, "port": leader.port, "rack": None}]
        return respond(ctx, refused_answer(r.topics, ErrorCode.NOT_LEADER_OR_FOLLOWER,
                                           {"leader_id": leader.node_id, "leader_epoch": 0}, endpoints,
                                           acknowledge_only))


def unserved_share_apis(view: NodeView) -> list[ApiDeclaration]:
    """The share APIs of an embedded shard k >= 1 without a forwarding listener, each answering as
    the module says, with the
    versions shard 0 serves (so every node advertises the same)."""
    return _declared(_Refusals(view))


def _declared(refusals: _Refusals) -> list[ApiDeclaration]:

    def declared(api_key: int, low: int, high: int, handle: Any) -> ApiDeclaration:
        return ApiDeclaration(api_key, low, high, handle=handle, authorization=_GATE, placement=NoGroup(),
                              sidecar=SidecarRoute.FORWARDED)

    return [declared(SHARE_GROUP_HEARTBEAT, 1, 1, refusals.heartbeat),
            declared(SHARE_GROUP_DESCRIBE, 1, 1, refusals.describe),
            declared(DESCRIBE_SHARE_GROUP_OFFSETS, 0, 1, refusals.describe_offsets),
            declared(ALTER_SHARE_GROUP_OFFSETS, 0, 0, refusals.alter_or_delete_offsets),
            declared(DELETE_SHARE_GROUP_OFFSETS, 0, 0, refusals.alter_or_delete_offsets),
            declared(SHARE_FETCH, 1, 2, refusals.fetch),
            declared(SHARE_ACKNOWLEDGE, 1, 2, refusals.acknowledge)]
