"""Transactional offset commits through the sidecar (exactly-once consume-transform-produce).

The transaction is the upstream's: InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn and EndTxn
are forwarded to the upstream broker the client's listener stands for, FindCoordinator for a
transactional id is answered with the sidecar's listener of the upstream's transaction coordinator
(`apis.locate_transaction_coordinators`), and the upstream writes the commit or abort markers into
its own `__consumer_offsets`. So a transactional commit's offsets must be upstream for the markers
to decide them. The mechanism (DESIGN §3, design (a)):

1. TxnOffsetCommit is validated here as Kafka's group coordinator validates it
   (`core/txn_offsets.py`: member id, generation or member epoch; KIP-447 fences a producer that
   speaks for a member of an old generation), since the upstream never sees this group's members.
2. Before a group's first forward, its offsets committed here are copied upstream (the mirror's
   simple commit, now) and an `OffsetsUpstream` record makes the upstream the home of the group's
   offsets, durably (a restart or a standby taking over knows it from the log).
3. The request is forwarded, at the client's version, to the upstream's group coordinator for the
   group, with member id "", generation -1 and no instance id (Kafka accepts that for a group it
   sees as empty and checks only the producer: its epoch, and under TV2 the partition's addition).
   Its answer (INVALID_PRODUCER_EPOCH, TRANSACTION_ABORTABLE, ...) goes back as the upstream gave it;
   NOT_COORDINATOR and loading errors are retried against the coordinator found again, within
   `FORWARD_DEADLINE_S`; an upstream that cannot be reached is COORDINATOR_NOT_AVAILABLE (clients
   find the coordinator again and retry).
4. For a group whose home is upstream, OffsetFetch is answered from the upstream (after every
   TxnOffsetCommit of the group still in flight has its answer; `upstream_fetch`: at the highest
   version both sides speak, answered at the client's), with the client's RequireStable:
   UNSTABLE_OFFSET_COMMIT while a transaction holding offsets of the partition is open, the
   committed offsets once its commit marker is written, never an aborted one. The request is first
   answered here (authorization, the member's epoch, ownership) and only groups that passed are
   asked upstream. A plain OffsetCommit of such a group is validated and stored here and then also
   committed upstream (generation -1) before it is answered; the mirror never sends such a group's
   offsets again, so it never overwrites what a transaction committed.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from protocol.build import build
from protocol.errors import ErrorCode
from protocol.schemas import response_schema

from ..api.authorization import InHandler
from ..api.declaration import SidecarRoute
from ..api.placement import OneGroup
from ..api.registry import ApiHandler, RequestContext, response_of
from ..api.respond import respond
from ..core.requests import OffsetsUpstreamQuery, TxnOffsetCommitCheck
from ..logging import get_logger
from ..runtime.shard import ShardRuntime
from ..security.authorizer import DESCRIBE, GROUP, READ, TOPIC, TRANSACTIONAL_ID, WRITE, allowed
from . import upstream_fetch
from .lograte import RateLimitedLog

if TYPE_CHECKING:
    from .cluster import UpstreamCluster
    from .offsets import OffsetBridge

log = get_logger("coordinator.sidecar.txn_offsets")
limited = RateLimitedLog(log)

OFFSET_COMMIT, OFFSET_FETCH, TXN_OFFSET_COMMIT = 8, 9, 28
MEMBER_FIELDS = 3
"""TxnOffsetCommit carries member id, generation and instance id from this version on (KIP-447)."""
RETRIED = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                     ErrorCode.COORDINATOR_LOAD_IN_PROGRESS})
FORWARD_DEADLINE_S = 5.0
"""How long a forward retries an upstream coordinator that moved or loads (Kafka's
`offsets.commit.timeout.ms` default), before the client is told to retry."""
BACKOFF_S = 0.05


class TxnOffsetCommits:
    """Which groups keep their offsets upstream, TxnOffsetCommit, and the offset APIs of those groups."""

    def __init__(self, cluster: UpstreamCluster, bridge: OffsetBridge, shard: Callable[[], ShardRuntime | None],
                 owns: Callable[[str], bool] | None = None) -> None:
        self._cluster = cluster
        self._bridge = bridge
        self._shard = shard
        self._owns = owns
        self._homes: set[str] | None = None
        """Groups whose offsets live upstream (None: not read from the core yet)."""
        self._reading: asyncio.Task[set[str]] | None = None
        self._first: dict[str, asyncio.Lock] = {}
        self._in_flight: dict[str, int] = {}
        self._settled: dict[str, asyncio.Event] = {}
        bridge.homes = self.homes

    # -- which groups -----------------------------------------------------------------------------
    async def homes(self, shard: ShardRuntime) -> set[str]:
        """The groups whose offsets live upstream: read from the core once (after a start or a
        takeover, from the replayed log), then kept here as this process marks more."""
        if self._homes is not None:
            return self._homes
        if self._reading is None:
            self._reading = asyncio.ensure_future(self._read_homes(shard))
        return await asyncio.shield(self._reading)

    async def _read_homes(self, shard: ShardRuntime) -> set[str]:
        try:
            response = await shard.submit(OffsetsUpstreamQuery(shard.new_ref()))
        except BaseException:
            self._reading = None  # the next caller asks again
            raise
        if response.error_code:
            self._reading = None
            raise _Unavailable(f"offsets home query: error {response.error_code}")
        self._homes = set(response.groups)
        return self._homes

    # -- TxnOffsetCommit --------------------------------------------------------------------------
    def handler(self, low: int, high: int) -> ApiHandler:
        def handle(ctx: RequestContext, request: Any) -> Any:
            shard = self._shard()
            if self._owns is not None and not self._owns(request.group_id):
                return _txn_error(ctx, request, ErrorCode.NOT_COORDINATOR)
            if shard is None or not shard.loaded:
                return _txn_error(ctx, request, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if ctx.api_version >= 2
                                  else ErrorCode.COORDINATOR_NOT_AVAILABLE)
            refused: list[Any] = []
            if ctx.authz is not None:
                # Kafka's KafkaApis: WRITE on the transactional id, READ on the group, READ on each
                # topic (a refused topic's partitions only). The upstream then authorizes the
                # forward as the sidecar's principal.
                if not allowed(ctx, WRITE, TRANSACTIONAL_ID, request.transactional_id):
                    return _txn_error(ctx, request, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
                if not allowed(ctx, READ, GROUP, request.group_id):
                    return _txn_error(ctx, request, ErrorCode.GROUP_AUTHORIZATION_FAILED)
                refused = [t for t in request.topics if not allowed(ctx, READ, TOPIC, t.name)]
                if refused:
                    request = dataclasses.replace(request, topics=tuple(t for t in request.topics if t not in refused))
            unknown = [t for t in request.topics if not self._known(t)]
            if unknown:
                request = dataclasses.replace(request, topics=tuple(t for t in request.topics if t not in unknown))
            if refused or unknown:
                answered = [*_error_topics(refused, ErrorCode.TOPIC_AUTHORIZATION_FAILED),
                            *_error_topics(unknown, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
                if not request.topics:
                    return _txn_answer(ctx, answered)
                return self._then_add(ctx, self._commit(ctx, request, shard), answered)
            return self._commit(ctx, request, shard)

        return ApiHandler(TXN_OFFSET_COMMIT, low, high, handle,
                          lambda ctx, request, code: _txn_error(ctx, request, code),
                          authorization=InHandler("WRITE on the transactional id, READ on the group, READ on "
                                                  "each topic, as Kafka's KafkaApis"),
                          placement=OneGroup(),  # the handler refuses a group of another node itself
                          sidecar=SidecarRoute.SERVED)

    def _known(self, topic: Any) -> bool:
        """Kafka answers UNKNOWN_TOPIC_OR_PARTITION for a topic its metadata does not have (the
        upstream's: our catalog is read from it)."""
        info = self._cluster.catalog.get(topic.name)
        if info is None:
            self._cluster.request_refresh()  # it may be new: the client's retry finds it
            return False
        return all(0 <= p.partition_index < info.num_partitions for p in topic.partitions)

    async def _then_add(self, ctx: RequestContext, pending: Any, answered: list[dict[str, Any]]) -> Any:
        response = await pending
        return _txn_answer(ctx, [*_described_topics(response), *answered])

    async def _commit(self, ctx: RequestContext, request: Any, shard: ShardRuntime) -> Any:
        group_id = request.group_id
        try:
            checked = await self._check(ctx, request, shard, mark=False)
            if checked.error_code:
                return _txn_error(ctx, request, checked.error_code)
            if not checked.upstream:
                lock = self._first.setdefault(group_id, asyncio.Lock())
                async with lock:
                    checked = await self._make_home(ctx, request, shard)
                if not checked.error_code:
                    self._first.pop(group_id, None)  # a later waiter finds the group home already
                if checked.error_code:
                    return _txn_error(ctx, request, checked.error_code)
            return await self._forward(ctx, request)
        except Exception as exc:  # whatever the upstream did (or sent): the client retries
            limited.warning("txn_offset_commit_unavailable", group_id=group_id, upstream=self._cluster.names,
                            error=str(exc) or type(exc).__name__)
            return _txn_error(ctx, request, ErrorCode.COORDINATOR_NOT_AVAILABLE)

    async def _check(self, ctx: RequestContext, request: Any, shard: ShardRuntime, mark: bool) -> Any:
        members = ctx.api_version >= MEMBER_FIELDS
        return await shard.submit(TxnOffsetCommitCheck(
            ref=shard.new_ref(), group_id=request.group_id,
            member_id=request.member_id if members else "",
            generation_id=request.generation_id if members else -1,
            group_instance_id=request.group_instance_id if members else None,
            topics=tuple((t.name, tuple(p.partition_index for p in t.partitions)) for t in request.topics),
            mark=mark))

    async def _make_home(self, ctx: RequestContext, request: Any, shard: ShardRuntime) -> Any:
        """The group's first transactional commit: what was committed here goes upstream first,
        then the durable mark, then what a plain commit may have added meanwhile."""
        group_id = request.group_id
        homes = await self.homes(shard)
        if group_id in homes:
            return await self._check(ctx, request, shard, mark=False)
        await self._bridge.flush(shard, group_id)
        checked = await self._check(ctx, request, shard, mark=True)
        if checked.error_code:
            return checked
        homes.add(group_id)
        await self._bridge.flush(shard, group_id)
        log.info("offsets_home_upstream", group_id=group_id, upstream=self._cluster.names,
                 reason="first transactional offset commit")
        return checked

    async def _forward(self, ctx: RequestContext, request: Any) -> Any:
        group_id = request.group_id
        if ctx.api_version >= MEMBER_FIELDS:
            request = dataclasses.replace(request, member_id="", generation_id=-1, group_instance_id=None)
        self._in_flight[group_id] = self._in_flight.get(group_id, 0) + 1
        try:
            response = await self._call_coordinator(group_id, TXN_OFFSET_COMMIT, request)
            codes = {int(p.error_code) for t in response.topics for p in t.partitions}
            if codes & RETRIED:
                self._bridge.forget_coordinator(group_id)
            return response
        finally:
            left = self._in_flight[group_id] - 1
            if left:
                self._in_flight[group_id] = left
            else:
                del self._in_flight[group_id]
                event = self._settled.pop(group_id, None)
                if event is not None:
                    event.set()

    async def _settle(self, group_id: str) -> None:
        """Wait until no TxnOffsetCommit of the group is on its way upstream (Kafka orders a
        RequireStable fetch behind the group's pending writes)."""
        while group_id in self._in_flight:
            await self._settled.setdefault(group_id, asyncio.Event()).wait()

    # -- OffsetFetch and OffsetCommit of groups whose home is upstream -------------------------
    def wrap(self, handler: ApiHandler) -> ApiHandler:
        if handler.api_key == OFFSET_FETCH:
            return self._wrap(handler, self._fetch)
        if handler.api_key == OFFSET_COMMIT:
            return self._wrap(handler, self._plain_commit)
        return handler

    def _wrap(self, handler: ApiHandler, then: Callable[..., Any]) -> ApiHandler:
        inner = handler.handle

        def handle(ctx: RequestContext, request: Any) -> Any:
            names = _group_ids(ctx, request)
            if self._homes is not None and not any(g in self._homes for g in names):
                return inner(ctx, request)  # the common case: nothing upstream, no detour
            return then(ctx, request, inner, handler)

        return dataclasses.replace(handler, handle=handle)

    async def _homes_of(self, ctx: RequestContext, request: Any) -> set[str] | None:
        shard = self._shard()
        if shard is None or not shard.loaded:
            return None
        homes = await self.homes(shard)
        return {g for g in _group_ids(ctx, request) if g in homes}

    async def _fetch(self, ctx: RequestContext, request: Any, inner: Any, handler: ApiHandler) -> Any:
        try:
            ours = await self._homes_of(ctx, request)
        except _Unavailable:
            ours = None
        answer = await response_of(inner(ctx, request))
        if not ours:
            return answer
        catalog, version = self._cluster.catalog, ctx.api_version
        here = _described(answer)
        try:
            if version < 8:
                if int(here.get("error_code", 0) or 0) or _partition_errors(here):
                    return answer  # refused here (authorization, loading): that is the answer
                (ask,) = upstream_fetch.asks(version, request, ours, catalog)
                await self._settle(ask.group_id)
                single = self._visible(ctx, await self._ask_upstream(ctx, ask))
                return respond(ctx, upstream_fetch.response_description(version, single, catalog, request))
            passed = {g["group_id"] for g in here["groups"] if g["group_id"] in ours and not g["error_code"]}
            if not passed:
                return answer
            for group_id in passed:
                await self._settle(group_id)
            got = {ask.group_id: self._visible(ctx, await self._ask_upstream(ctx, ask))
                   for ask in upstream_fetch.asks(version, request, passed, catalog)}
            return respond(ctx, {"throttle_time": 0, "groups": [
                upstream_fetch.group_description(version, g["group_id"], got[g["group_id"]], catalog)
                if g["group_id"] in got else g for g in here["groups"]]})
        except Exception as exc:  # whatever the upstream did (or sent): the client retries
            limited.warning("offset_fetch_upstream_unavailable", groups=sorted(ours), upstream=self._cluster.names,
                            error=str(exc) or type(exc).__name__)
            refuse = handler.refuse
            assert refuse is not None
            return refuse(ctx, request, ErrorCode.COORDINATOR_NOT_AVAILABLE)

    async def _ask_upstream(self, ctx: RequestContext, ask: upstream_fetch.Ask) -> upstream_fetch.Answer:
        """At the client's version, or the upstream's highest if that is older."""
        version = self._cluster.version_for(OFFSET_FETCH, min(ctx.api_version, upstream_fetch.HIGHEST))
        if version is None:
            raise _Unavailable("the upstream serves no OffsetFetch version we speak")
        catalog = self._cluster.catalog
        request = (upstream_fetch.request_by_id(ask, catalog) if version >= upstream_fetch.TOPIC_IDS
                   else upstream_fetch.request_at(version, ask))
        response = await self._call_coordinator(ask.group_id, OFFSET_FETCH, request)
        return upstream_fetch.answer_of(version, response, catalog)

    def _visible(self, ctx: RequestContext, answer: upstream_fetch.Answer) -> upstream_fetch.Answer:
        """Under an authorizer, only the topics the principal may DESCRIBE, as Kafka filters an
        all-topics fetch (the upstream authorized the sidecar's principal, not the client's)."""
        if ctx.authz is None:
            return answer
        return dataclasses.replace(answer, topics=tuple(t for t in answer.topics if allowed(ctx, DESCRIBE, TOPIC, t[0])))

    async def _call_coordinator(self, group_id: str, api_key: int, request: Any) -> Any:
        """`request` to the upstream's group coordinator for the group; a coordinator that moved,
        loads or cannot be reached is found again and asked again until `FORWARD_DEADLINE_S`, then
        its last answer (or `_Unavailable`) is the caller's."""
        deadline = time.monotonic() + FORWARD_DEADLINE_S
        while True:
            try:
                node_id = await self._bridge.coordinator_of(group_id)
                response = await self._cluster.client.call_node(node_id, api_key, request)
            except Exception as exc:  # whatever the upstream did (or sent): never crash on it
                self._bridge.forget_coordinator(group_id)
                if time.monotonic() >= deadline:
                    raise _Unavailable(str(exc) or type(exc).__name__) from exc
                await asyncio.sleep(BACKOFF_S)
                continue
            if _retried(api_key, response) and time.monotonic() < deadline:
                self._bridge.forget_coordinator(group_id)
                await asyncio.sleep(BACKOFF_S)
                continue
            return response

    async def _plain_commit(self, ctx: RequestContext, request: Any, inner: Any, handler: ApiHandler) -> Any:
        try:
            ours = await self._homes_of(ctx, request)
        except _Unavailable:
            ours = None
        answer = await response_of(inner(ctx, request))
        if not ours:
            return answer
        by_id = ctx.api_version >= 10  # topics named by id: the upstream commit names them

        def key(topic: Any) -> Any:
            if isinstance(topic, dict):
                return topic["topic_id"] if by_id else topic["name"]
            return topic.topic_id if by_id else topic.name

        description = getattr(answer, "description", None)
        topics = description["topics"] if description is not None else [
            {"name" if not by_id else "topic_id": key(t), "partitions": [
                {"partition_index": p.partition_index, "error_code": p.error_code} for p in t.partitions]}
            for t in answer.topics]
        accepted = {(key(t), p["partition_index"]) for t in topics for p in t["partitions"] if not p["error_code"]}
        if not accepted:
            return answer
        offsets = []
        for t in request.topics:
            name = t.name if not by_id else getattr(self._cluster.catalog.by_id(t.topic_id), "name", None)
            if name is not None:
                offsets += [(name, p) for p in t.partitions if (key(t), p.partition_index) in accepted]
        if not offsets:
            return answer
        try:
            await self._bridge.commit_upstream(request.group_id, offsets)
        except Exception as exc:  # whatever the upstream did: the client retries its commit
            limited.warning("offset_commit_upstream_failed", group_id=request.group_id, upstream=self._cluster.names,
                            error=str(exc) or type(exc).__name__)
            refuse = handler.refuse
            assert refuse is not None
            return refuse(ctx, request, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        return answer


def _retried(api_key: int, response: Any) -> bool:
    """The answer says the coordinator moved or is loading (a group or a partition error)."""
    if api_key == TXN_OFFSET_COMMIT:
        return any(int(p.error_code) in RETRIED for t in response.topics for p in t.partitions)
    groups = getattr(response, "groups", None)
    if groups:
        return any(int(g.error_code) in RETRIED for g in groups)
    return int(getattr(response, "error_code", 0) or 0) in RETRIED


def _group_ids(ctx: RequestContext, request: Any) -> list[str]:
    if getattr(request, "groups", None) is not None and ctx.api_key == OFFSET_FETCH and ctx.api_version >= 8:
        return [g.group_id for g in request.groups]
    return [request.group_id]


def _described(answer: Any) -> dict[str, Any]:
    """An OffsetFetch response made here as a version-free description: the one it was encoded
    from, or the entity's fields (the entity's attribute names are the description's keys)."""
    description = getattr(answer, "description", None)
    if isinstance(description, dict):
        return description
    described: dict[str, Any] = upstream_fetch.described(answer)
    return described


def _partition_errors(answer: dict[str, Any]) -> bool:
    """An OffsetFetch v0-1 answer refused here carries its error in every partition."""
    return any(p["error_code"] for t in answer.get("topics") or () for p in t["partitions"])


def _error_topics(topics: Any, code: int) -> list[dict[str, Any]]:
    return [{"name": t.name, "partitions": [{"partition_index": p.partition_index, "error_code": code}
                                            for p in t.partitions]} for t in topics]


def _described_topics(response: Any) -> list[dict[str, Any]]:
    return [{"name": t.name, "partitions": [{"partition_index": p.partition_index, "error_code": p.error_code}
                                            for p in t.partitions]} for t in response.topics]


def _txn_answer(ctx: RequestContext, topics: list[dict[str, Any]]) -> Any:
    return build(response_schema(TXN_OFFSET_COMMIT, ctx.api_version), {"throttle_time": 0, "topics": topics})


def _txn_error(ctx: RequestContext, request: Any, code: int) -> Any:
    return _txn_answer(ctx, _error_topics(request.topics, code))


class _Unavailable(Exception):
    pass
