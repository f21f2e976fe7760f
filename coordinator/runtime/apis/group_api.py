"""The shape every group API adapter shares: wire request -> core request -> shard -> wire response.

A group API is declared by `group_api(...)`: an `ApiDeclaration` whose `GroupConversion` holds its
pure functions, `to_core(ctx, request, ref)` (the version-free core request, version defaults
filled) and `to_wire(ctx, request, response)` (the wire description for `protocol.build`), and
`on_error(ctx, request, code)` (the whole request answered with one code), with its authorization
rule, placement and sidecar route. At start-up the node binds each one (`bind`) to the checks the
features derived from those rules: no table is looked up per request.

The shard's one submit contract (`ShardRuntime.submit`) answers with a completion, already done when
the reply may leave at once; then the wire response is built in place, otherwise when it resolves.
While the shard is still replaying its log the adapter answers without the core, through
`on_error`, with ErrorCode.COORDINATOR_LOAD_IN_PROGRESS.

Authorization (`check`, security's interpretation of the declared rule) is asked only when an
authorizer is configured (`ctx.authz`): the request may be refused whole (through `on_error`),
trimmed to what the principal may touch (the refusals merged into the wire description), or
answered outright (`api/decision.py`).

Topic existence (`known`, OffsetCommit only) comes after authorization, as in Kafka's KafkaApis:
partitions of a topic the node's metadata does not know are refused UNKNOWN_TOPIC_OR_PARTITION by the
same trim/merge mechanism, so the core never stores an offset of a topic that does not exist (or a
name Kafka would refuse: the catalog holds only legal names).

Group ownership (`placed`, several shards only: the shards feature's interpretation of the declared
placement) has the same shape: groups of another node are refused with NOT_COORDINATOR, whole or
per group. It is asked first, before the load check (Kafka answers NOT_COORDINATOR for a partition
it does not own, COORDINATOR_LOAD_IN_PROGRESS only for one it is loading), and its refusals are
merged into whatever the rest answers. With one shard there is no `placed` and nothing is asked.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

from protocol.errors import ErrorCode

from ...api.authorization import Rule
from ...api.decision import Answered as AnsweredByCheck
from ...api.decision import Check, Merge, PlacementCheck
from ...api.declaration import GroupConversion, OnError, Precheck, SidecarRoute, ToCore, ToWire
from ...api.placement import Placement
from ...api.registry import ApiHandler, Deferred, RequestContext
from ...api.respond import respond
from ..shard import ShardRuntime
from ..shard_contract import Answered


def group_api(shard: Callable[[], ShardRuntime | None], api_key: int, min_version: int, max_version: int,
              to_core: ToCore, to_wire: ToWire, on_error: OnError, precheck: Precheck | None = None, *,
              authorization: Rule | None, placement: Placement | None, sidecar: SidecarRoute | None,
              known: Check | None = None) -> ApiHandler:
    """The declaration of an API served by the shard. `precheck` returns an error code for requests
    the wire layer itself must refuse; `known` trims what names topics or partitions the metadata
    does not know (a check of the authorization checks' shape, asked whether or not an authorizer is
    configured). Served once bound (`bind`)."""
    conversion = GroupConversion(shard, to_core, to_wire, on_error, precheck, known)
    return ApiHandler(api_key, min_version, max_version, authorization=authorization, placement=placement,
                      sidecar=sidecar, conversion=conversion)


def bind(declaration: ApiHandler, check: Check | None, placed: PlacementCheck | None) -> ApiHandler:
    """The declaration served: `check` is its authorization check (None: the rule asks nothing
    before the shard), `placed` its ownership check (None: one shard)."""
    conversion = declaration.conversion
    assert conversion is not None
    shard: Callable[[], ShardRuntime | None] = conversion.shard
    to_core, to_wire, on_error = conversion.to_core, conversion.to_wire, conversion.on_error
    precheck, known = conversion.precheck, conversion.known

    def handle(ctx: RequestContext, request: Any) -> Any:
        if precheck is not None and (code := precheck(ctx, request)) is not None:
            return respond(ctx, on_error(ctx, request, code))
        merge: Merge | None = None
        if placed is not None and (decision := placed(ctx, request)) is not None:
            if isinstance(decision, int):
                return respond(ctx, on_error(ctx, request, decision))
            if isinstance(decision, AnsweredByCheck):
                return respond(ctx, decision.description)
            request, merge = decision
        runtime = shard()
        if runtime is None or not runtime.loaded:
            return respond(ctx, _merged(on_error(ctx, request, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS), merge))
        if ctx.authz is not None and check is not None and (decision := check(ctx, request, runtime.core.topics)) is not None:
            if isinstance(decision, int):
                return respond(ctx, _merged(on_error(ctx, request, decision), merge))
            if isinstance(decision, AnsweredByCheck):
                return respond(ctx, _merged(decision.description, merge))
            request, authorized = decision
            merge = authorized if merge is None else _chained(authorized, merge)
        if known is not None and (decision := known(ctx, request, runtime.core.topics)) is not None:
            if isinstance(decision, AnsweredByCheck):
                return respond(ctx, _merged(decision.description, merge))
            if isinstance(decision, int):
                return respond(ctx, _merged(on_error(ctx, request, decision), merge))
            request, existing = decision
            merge = existing if merge is None else _chained(existing, merge)
        pending = runtime.submit(to_core(ctx, request, runtime.new_ref()))
        if isinstance(pending, Answered):  # answered at once: no loop turn
            description = to_wire(ctx, request, pending.response)
            return respond(ctx, description if merge is None else merge(description))
        return Deferred(pending, functools.partial(_wire_response, to_wire, ctx, request, merge), runtime.written)

    def refuse(ctx: RequestContext, request: Any, code: int) -> Any:
        return respond(ctx, on_error(ctx, request, code))

    return dataclasses.replace(declaration, handle=handle, refuse=refuse)


def _wire_response(to_wire: ToWire, ctx: RequestContext, request: Any, merge: Merge | None, response: Any) -> Any:
    description = to_wire(ctx, request, response)
    return respond(ctx, description if merge is None else merge(description))


def _merged(description: dict[str, Any], merge: Merge | None) -> dict[str, Any]:
    return description if merge is None else merge(description)


def _chained(first: Merge, then: Merge) -> Merge:
    return lambda description: then(first(description))


def ms(value: Any) -> int:
    """kio timedeltas to int milliseconds (the core works in ints)."""
    if value is None:
        return -1
    if isinstance(value, int):
        return value
    return int(value.total_seconds() * 1000)
