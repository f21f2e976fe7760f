"""The shape every group API adapter shares: wire request -> core request -> shard -> wire response.

The shard's one submit contract (`ShardRuntime.submit`) answers with a completion, already done when
the reply may leave at once; then the wire response is built in place, otherwise when it resolves.

An adapter is two pure functions: `to_core(ctx, request, ref)` builds the version-free core request
(filling version defaults) and `to_wire(ctx, request, response)` describes the wire response for
`protocol.build`. While the shard is still replaying its log the adapter answers without the core,
through `on_error(ctx, request, code)`, with ErrorCode.COORDINATOR_LOAD_IN_PROGRESS.

Authorization is one table (`security/checks.py`, by api key), asked only when an authorizer is
configured (`ctx.authz`): the request may be refused whole (through `on_error`), trimmed to what
the principal may touch (the refusals merged into the wire description), or answered outright.

Topic existence (`known`, OffsetCommit only) comes after authorization, as in Kafka's KafkaApis:
partitions of a topic the node's metadata does not know are refused UNKNOWN_TOPIC_OR_PARTITION by the
same trim/merge mechanism, so the core never stores an offset of a topic that does not exist (or a
name Kafka would refuse: the catalog holds only legal names).

Group ownership (several shards: `owns` given) is a second table of the same shape
(`group_owner.py`): groups of another node are refused with NOT_COORDINATOR, whole or per group.
It is asked first, before the load check (Kafka answers NOT_COORDINATOR for a partition it does
not own, COORDINATOR_LOAD_IN_PROGRESS only for one it is loading), and its refusals are merged
into whatever the rest answers. With one shard `owns` is None and nothing is asked.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from protocol.errors import ErrorCode

from ...api.registry import ApiHandler, Deferred, RequestContext
from ...api.respond import respond
from ...security.checks import CHECKS, Check, Merge
from ...security.checks import Answered as AnsweredByCheck
from ..shard import Answered, ShardRuntime
from .group_owner import Owns, ownership_checks

ToCore = Callable[[RequestContext, Any, int], Any]
ToWire = Callable[[RequestContext, Any, Any], dict[str, Any]]
OnError = Callable[[RequestContext, Any, int], dict[str, Any]]


def group_api(shard: Callable[[], ShardRuntime | None], api_key: int, min_version: int, max_version: int,
              to_core: ToCore, to_wire: ToWire, on_error: OnError,
              precheck: Callable[[RequestContext, Any], int | None] | None = None,
              owns: Owns | None = None, known: Check | None = None) -> ApiHandler:
    """`precheck` returns an error code for requests the wire layer itself must refuse; `owns`
    (several shards only) says whether this node coordinates a group; `known` trims what names
    topics or partitions the metadata does not know (a check of the authorization checks' shape,
    asked whether or not an authorizer is configured)."""
    check = CHECKS.get(api_key)
    placed = ownership_checks(owns).get(api_key) if owns is not None else None

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
        return Deferred(pending, functools.partial(_wire_response, to_wire, ctx, request, merge))

    def refuse(ctx: RequestContext, request: Any, code: int) -> Any:
        return respond(ctx, on_error(ctx, request, code))

    return ApiHandler(api_key, min_version, max_version, handle, refuse)


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
