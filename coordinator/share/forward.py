"""ShareFetch and ShareAcknowledge handed to the process that holds their share group.

A client sends ShareFetch and ShareAcknowledge to a partition's leader: in sidecar mode, to the
listener this node opens for an upstream broker. With several shards (``coordinator.shards``) or
several instances sharing the log upstream (``coordinator.log.storage=upstream``) every process
opens those listeners (SO_REUSEPORT, or one advertised host in front of all instances), so the
connection may land on a process that does not hold the group's share-partition state (the group
lives where its log partition is: its shard, or the instance the instance group gave the partition
to). That process forwards the request instead of answering it:

- **Where.** The holder is the group's coordinator as FindCoordinator names it
  (``NodeView.node_of_group`` on the forwarding listener, ``inter.broker.listener.name``, by default
  the first PLAINTEXT one): every process derives it, from the configuration (shards) or from the
  instance group's assignment (instances).
- **How.** The private ShareForward API (key 32765, ``protocol/private.py``), never advertised,
  sent to the holder's coordinator listener: the addressed broker's node id and the inner request
  frame as the client's version encodes it. The holder serves the inner request exactly as if it
  had arrived on its own listener for that broker (``RequestContext.node_id``: the share session
  is keyed per node, and the answer names that broker as leader) and sends the inner answer back;
  it is relayed to the client unchanged.
- **One forwarding connection per (client connection, holder).** The holder sees one connection
  per client connection, so its share sessions are that connection's; when the client's
  connection closes, the forwarding connections it used are closed, and the holder releases what
  that connection's sessions held (``fetch_apis``' release on close), as if the client had been
  connected to it.
- **Authorization where the client connected.** The forwarder checks READ on the group (else
  GROUP_AUTHORIZATION_FAILED) and READ on each topic (the refused topics are taken out of the
  forwarded request and answered TOPIC_AUTHORIZATION_FAILED here) with the client's principal; the
  holder trusts the forwarded request and checks only that the sender is a peer: CLUSTER_ACTION on
  the cluster, Kafka's permission for broker-to-broker requests (no authorizer: any sender). The
  forwarding connection is opened as the sidecar's upstream ones are (``UpstreamConnection.open``),
  with the forwarding listener's TLS and the node's own SASL credentials (``security/peers.py``),
  so the principal checked is the coordinator's user; over a PLAINTEXT listener it is
  ``User:ANONYMOUS``.
- **Ownership moving.** While the group has no holder (its partition between instances, or being
  loaded here), when the holder cannot be reached, or when the process asked no longer holds the
  group, every partition is answered NOT_LEADER_OR_FOLLOWER with the addressed broker as current
  leader: what a Kafka broker answers for a partition whose leadership is moving. librdkafka and
  the Java client refresh their metadata and send again (to the same address, which by then
  forwards to the new holder); acknowledgements of such a request are not applied, so their
  records come back after the lock (or at once: a new holder releases what nobody holds).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from typing import Any

from protocol.build import build
from protocol.client import ResponseDecodeError, decode_response, encode_request
from protocol.codec import EncodedResponse, RequestCodec, encode_response
from protocol.errors import ErrorCode, ProtocolError
from protocol.private import SHARE_FORWARD
from protocol.schemas import request_schema, response_schema

from ..api.authorization import (
    CLUSTER,
    CLUSTER_ACTION,
    CLUSTER_NAME,
    GROUP,
    READ,
    TOPIC,
    InHandler,
    allowed,
)
from ..api.declaration import ApiDeclaration, SidecarRoute
from ..api.placement import NoGroup, Owns
from ..api.registry import Handler, RequestContext, response_of
from ..api.respond import respond
from ..catalog import TopicSource
from ..logging import get_logger
from ..runtime.apis.view import Node
from ..security.upstream import UpstreamSecurity
from ..sidecar.lograte import RateLimitedLog
from ..sidecar.upstream import UpstreamConnection
from ..sidecar.wire import ForwardError
from .fetch_apis import SHARE_ACKNOWLEDGE, SHARE_FETCH, OnClose
from .refusals import refused_answer

log = get_logger("coordinator.share.forward")

CONNECT_TIMEOUT_S = 5.0
"""A holder that does not accept (and authenticate) a connection within this is answered as moving
(the client retries)."""
ANSWER_TIMEOUT_S = 10.0
"""How long past the fetch's own ``MaxWaitMs`` a holder may take to answer a forwarded request."""


@dataclasses.dataclass(frozen=True, slots=True)
class Holders:
    """What forwarding knows of where share groups are held."""

    holds: Owns
    """Whether this process serves the group now."""
    holder: Callable[[str], Node | None]
    """The group's coordinator on the forwarding listener (None while nobody holds it)."""
    node_id: Callable[[], int]
    """This process's own node id (a holder that is this process is not forwarded to)."""
    broker_endpoint: Callable[[int], tuple[str, int]]
    """The address of the listener standing for an upstream broker (the leader an answer names)."""
    security: UpstreamSecurity | None = None
    """TLS and SASL of a forwarding connection (the forwarding listener's; None: plain TCP)."""
    leader: Callable[[str], Node] | None = None
    """Embedded mode: every partition's leader (shard 0) on a listener. The holder knows the request
    only as the forwarding listener's, so a relayed answer's endpoints are renamed to the client's
    listener's address of that node."""


class ShareForwarding:
    """Wraps the share fetch APIs of a process that may be asked for groups it does not hold, and
    serves ShareForward for its peers."""

    def __init__(self, holders: Holders, catalog: TopicSource, on_close: OnClose | None) -> None:
        self.holders = holders
        self.catalog = catalog
        self._on_close = on_close
        self._links: dict[int, dict[int, asyncio.Future[UpstreamConnection]]] = {}
        """client connection id -> holder node id -> its forwarding connection (being opened)."""
        self._codec = RequestCodec({SHARE_FETCH: (1, 2), SHARE_ACKNOWLEDGE: (1, 2)})
        self._local: dict[int, Handler] = {}
        self._failures = RateLimitedLog(log)

    def wrap(self, declared: list[ApiDeclaration]) -> list[ApiDeclaration]:
        """The declared APIs with ShareFetch and ShareAcknowledge forwarding a group held
        elsewhere, and ShareForward added (served here on every listener, never advertised)."""
        out: list[ApiDeclaration] = []
        for d in declared:
            if d.api_key in (SHARE_FETCH, SHARE_ACKNOWLEDGE):
                self._local[d.api_key] = d.handle
                d = dataclasses.replace(d, handle=self._handler(d.handle))
            out.append(d)
        out.append(ApiDeclaration(
            SHARE_FORWARD, 0, 0, handle=self.serve_forwarded, placement=NoGroup(), sidecar=SidecarRoute.SERVED,
            authorization=InHandler("CLUSTER_ACTION on the cluster: only a peer shard or instance forwards")))
        return out

    # ---- the client's side ---------------------------------------------------------------------------

    def _handler(self, local: Handler) -> Handler:
        holds = self.holders.holds

        def handle(ctx: RequestContext, r: Any) -> Any:
            group_id = r.group_id or ""
            if not group_id or holds(group_id):
                return local(ctx, r)
            return self._forward(ctx, r)

        return handle

    async def _forward(self, ctx: RequestContext, r: Any) -> Any:
        group_id = r.group_id or ""
        acknowledge_only = ctx.api_key == SHARE_ACKNOWLEDGE
        if not allowed(ctx, READ, GROUP, group_id):
            return respond(ctx, {"throttle_time": 0, "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED,
                                 "error_message": None, "acquisition_lock_timeout": 0, "responses": [],
                                 "node_endpoints": []})
        denied = [t for t in r.topics if not self._readable(ctx, t.topic_id)]
        inner = dataclasses.replace(r, topics=tuple(t for t in r.topics if t not in denied)) if denied else r
        holder = self.holders.holder(group_id)
        if holder is None or holder.node_id == self.holders.node_id():
            return self._moving(ctx, r, acknowledge_only)
        frame = encode_request(ctx.api_key, ctx.correlation_id, ctx.client_id, inner)
        request = build(request_schema(SHARE_FORWARD, 0), {"node_id": -1 if ctx.node_id is None else ctx.node_id,
                                                           "request": frame})
        try:
            link = await self._link(ctx.connection_id, holder)
            # A holder that stops answering must not hold the client's fetch forever: the fetch's own
            # wait plus ANSWER_TIMEOUT_S, then the link is dropped and the client told to look again.
            waited = getattr(r, "max_wait", None)  # ShareFetch's MaxWaitMs (a timedelta in kio); none in ShareAcknowledge
            wait_s = (max(waited.total_seconds(), 0.0) if waited is not None else 0.0) + ANSWER_TIMEOUT_S
            try:
                answer = await asyncio.wait_for(link.call(SHARE_FORWARD, request), wait_s)
            except TimeoutError as exc:
                raise ForwardError(f"no answer within {wait_s:.1f} s") from exc
            if answer.error_code != ErrorCode.NONE:
                raise ForwardError(f"refused with {ErrorCode(int(answer.error_code)).name}")
            _, response = decode_response(ctx.api_key, ctx.api_version, memoryview(answer.response)[4:])
        except (ForwardError, ResponseDecodeError) as exc:
            # Repeats while a holder is away (or refuses us: CLUSTER_ACTION missing): rate-limited.
            self._failures.warning("share_forward_failed", group=group_id, holder=holder.node_id, error=str(exc))
            self._drop(ctx.connection_id, holder.node_id)
            return self._moving(ctx, r, acknowledge_only)
        if self.holders.leader is not None and response.node_endpoints:
            response = _naming(response, self.holders.leader(ctx.listener))
        if denied:  # the topics refused here, answered beside the holder's
            refused = self._refused_topics(ctx, denied, acknowledge_only)
            response = dataclasses.replace(response, responses=(*response.responses, *refused.responses))
        return response

    def _readable(self, ctx: RequestContext, topic_id: Any) -> bool:
        if ctx.authz is None:
            return True
        info = self.catalog.by_id(topic_id) if topic_id is not None else None
        return info is None or allowed(ctx, READ, TOPIC, info.name)  # an unknown id: the holder's UNKNOWN_TOPIC_ID

    async def _link(self, connection_id: int, holder: Node) -> UpstreamConnection:
        if self._on_close is not None:
            self._on_close(self.connection_closed)  # once: the node's connection table exists by now
            self._on_close = None
        links = self._links.setdefault(connection_id, {})
        opening = links.get(holder.node_id)
        if opening is not None and opening.done() and (opening.exception() is not None or opening.result().closed):
            opening = None
        if opening is None:
            opening = asyncio.ensure_future(UpstreamConnection.open(holder.host, holder.port, CONNECT_TIMEOUT_S,
                                                                         self.holders.security))
            opening.add_done_callback(_retrieved)
            links[holder.node_id] = opening
        return await asyncio.shield(opening)

    def _drop(self, connection_id: int, node_id: int) -> None:
        opening = self._links.get(connection_id, {}).pop(node_id, None)
        if opening is not None:
            _close(opening)

    def connection_closed(self, connection_id: int) -> None:
        """The client's connection closed: so do its forwarding connections, and each holder
        releases that connection's share sessions (never raises: called in ``connection_lost``)."""
        for opening in self._links.pop(connection_id, {}).values():
            _close(opening)

    def close(self) -> None:
        for connection_id in list(self._links):
            self.connection_closed(connection_id)

    # ---- the holder's side -----------------------------------------------------------------------------

    async def serve_forwarded(self, ctx: RequestContext, r: Any) -> Any:
        if not allowed(ctx, CLUSTER_ACTION, CLUSTER, CLUSTER_NAME):
            return respond(ctx, {"error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "response": b""})
        try:
            inner = self._codec.decode(bytes(r.request)[4:])
        except ProtocolError as exc:
            log.info("share_forward_refused", error=str(exc))
            return respond(ctx, {"error_code": ErrorCode.INVALID_REQUEST, "response": b""})
        node_id = int(r.node_id)
        ictx = RequestContext(ctx.connection_id, inner.client_id, ctx.client_host, inner.api_key, inner.api_version,
                              inner.correlation_id, ctx.listener, ctx.principal, None,
                              node_id if node_id >= 0 else None)
        group_id = inner.body.group_id or ""
        if group_id and not self.holders.holds(group_id):  # moved since the sender looked: it must not chain
            answer = self._moving(ictx, inner.body, inner.api_key == SHARE_ACKNOWLEDGE)
        else:
            answer = await response_of(self._local[inner.api_key](ictx, inner.body))
        frame = answer.data if isinstance(answer, EncodedResponse) else encode_response(inner.correlation_id, answer)
        return respond(ctx, {"error_code": ErrorCode.NONE, "response": frame})

    # ---- answers ------------------------------------------------------------------------------------------

    def _moving(self, ctx: RequestContext, r: Any, acknowledge_only: bool) -> Any:
        """Every partition NOT_LEADER_OR_FOLLOWER, the addressed broker as its leader (see the module)."""
        return respond(ctx, self._partitions_answer(ctx, r.topics, ErrorCode.NOT_LEADER_OR_FOLLOWER, acknowledge_only))

    def _refused_topics(self, ctx: RequestContext, topics: list[Any], acknowledge_only: bool) -> Any:
        """The refused topics as a response entity, to be joined to the holder's decoded answer
        (``respond`` may hand back encoded bytes, which cannot be joined)."""
        return build(response_schema(ctx.api_key, ctx.api_version),
                     self._partitions_answer(ctx, topics, ErrorCode.TOPIC_AUTHORIZATION_FAILED, acknowledge_only))

    def _partitions_answer(self, ctx: RequestContext, topics: Any, code: ErrorCode,
                           acknowledge_only: bool) -> dict[str, Any]:
        node_id = -1 if ctx.node_id is None else ctx.node_id
        endpoints = []
        if ctx.node_id is not None:
            host, port = self.holders.broker_endpoint(ctx.node_id)
            endpoints.append({"node_id": ctx.node_id, "host": host, "port": port, "rack": None})
        return refused_answer(topics, code, {"leader_id": node_id, "leader_epoch": 0}, endpoints, acknowledge_only)


def _naming(response: Any, leader: Node) -> Any:
    """``response`` with ``leader``'s endpoint at ``leader``'s address (the client's listener's)."""
    endpoints = tuple(dataclasses.replace(e, host=leader.host, port=leader.port) if e.node_id == leader.node_id
                      else e for e in response.node_endpoints)
    return dataclasses.replace(response, node_endpoints=endpoints)


def _close(opening: asyncio.Future[UpstreamConnection]) -> None:
    if not opening.done():
        opening.cancel()
    elif not opening.cancelled() and opening.exception() is None:
        opening.result().close()


def _retrieved(future: asyncio.Future[UpstreamConnection]) -> None:
    if not future.cancelled():
        future.exception()  # a failed open is answered to the request that waited for it
