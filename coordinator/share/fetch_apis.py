"""ShareFetch (78) and ShareAcknowledge (79) v1-v2, served in either mode over the share data path.

Version notes: v1 is Kafka 4.1's first served version; v2 (Kafka 4.3, KIP-1206/KIP-1222) adds
``ShareAcquireMode`` (0 batch-optimized, 1 record-limit) and ``IsRenewAck`` (acknowledge type 4,
RENEW). Both are flexible.

A request is served in three steps:

1. here, off the shard: the partitions the member's session will fetch (the session's own,
   read from the core, plus the request's, minus the forgotten ones) are read from where each
   share partition's next delivery starts, through the byte-bounded batch cache
   (``share.acquire.read_for``), as far as the fetch can acquire past the fetches of the partition
   in flight (``share.acquire.read_bound``);
2. ``MaxWaitMs``: a request without acknowledgements whose partitions are all full (the in-flight
   limit reached, nothing available) first waits for a request that acknowledged or released
   records; one whose reads found nothing waits for an append to one of its partitions; both at
   most ``MaxWaitMs`` (a bounded wait, as the data plane's Fetch parks; a record whose lock
   expires meanwhile is found by the next request);
3. the shard (``core.share.fetch``): session, acknowledgements, acquisition, one log entry; the
   answer leaves once it is durable (the one release rule), carrying the batches read that hold
   the acquired offsets, whole, as the buffers they are stored in.

When step 1's reads all answer at once (embedded mode's data plane, cached batches) and step 2
has nothing to wait for (the request acknowledges, or a partition has records to give), the three
steps run in the handler's own call and its reply is the shard's completion (a ``Deferred``): a
steady fetch costs no task and no loop turn of its own. Otherwise the same steps run as a
coroutine that awaits where it must (``_Serving._serve_waiting``).

A connection that closes ends the share sessions it opened (Kafka's ``ShareSessionCache``
connection listener): the node tells :meth:`_Serving.connection_closed` (through ``on_close``,
registered at the first request served), and for a connection that ever carried a ShareFetch or
ShareAcknowledge the shard is handed one ``ShareConnectionClosed``, whose releases are records
like any other release.

Authorization: READ on the group (else GROUP_AUTHORIZATION_FAILED for the whole request) and READ on
each topic (its partitions TOPIC_AUTHORIZATION_FAILED), as Kafka's ``handleShareFetchRequest``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from protocol.errors import ErrorCode

from ..api.authorization import GROUP, READ, TOPIC, InHandler, allowed
from ..api.declaration import ApiDeclaration, SidecarRoute
from ..api.registry import Deferred, RequestContext
from ..api.respond import respond
from ..catalog import TopicSource
from ..core.share.partition import SharePartition
from ..core.share.registration import ShareGroupType
from ..core.share.requests import (
    ShareAckPartition,
    ShareConnectionClosed,
    ShareFetch,
    ShareFetchResponse,
    ShareReadPartition,
)
from ..logging import get_logger
from ..runtime.apis.view import Node, NodeView
from ..runtime.shard import ShardRuntime
from .acquire import batches_holding, bytes_per_offset, read_bound, read_for, read_for_now
from .refusals import refused_partition
from .source import PartitionRead, PartitionRef, RecordSource, SourceUnavailable

SHARE_FETCH = 78
SHARE_ACKNOWLEDGE = 79

WaitForAppend = Callable[[list[PartitionRef], float], Awaitable[None]]
OnClose = Callable[[Callable[[int], None]], None]
"""Registers a listener the node calls with the id of every connection that closes."""

log = get_logger("coordinator.share")


@dataclass(frozen=True, slots=True)
class ShareDataPath:
    """What the share fetch APIs read through: the catalog (topic ids to names), the record
    source behind the batch cache, and the wait for an append (``MaxWaitMs``); in sidecar mode
    the address of the listener standing for an upstream broker (``broker_endpoint``), which a
    request sent there is answered as coming from; on an embedded shard k >= 1 the leader of every
    partition on a listener (``leader``: shard 0, where the client sent the request shard 0 forwarded)."""

    catalog: TopicSource
    reader: RecordSource
    wait_for_append: WaitForAppend
    broker_endpoint: Callable[[int], tuple[str, int]] | None = None
    leader: Callable[[str], Node] | None = None


def share_fetch_handlers(shard: Callable[[], ShardRuntime | None], view: NodeView,
                         path: ShareDataPath, on_close: OnClose | None = None) -> list[ApiDeclaration]:
    fetch = _Serving(shard, view, path, on_close)
    rule = InHandler("READ on the group, then READ on each topic (Kafka's handleShareFetchRequest)")
    return [
        ApiDeclaration(SHARE_FETCH, 1, 2, handle=fetch.share_fetch, authorization=rule,
                       sidecar=SidecarRoute.FORWARDED),
        ApiDeclaration(SHARE_ACKNOWLEDGE, 1, 2, handle=fetch.share_acknowledge, authorization=rule,
                       sidecar=SidecarRoute.FORWARDED),
    ]


_Reads = dict[tuple[UUID, int], tuple[PartitionRef, PartitionRead | None, ErrorCode]]
"""Per partition of a fetch, in the answer's order: its log partition, what was read, the read's error."""


class _Fetch:
    """One ShareFetch or ShareAcknowledge between its decoding and its answer."""

    __slots__ = ("acknowledge_only", "acks", "added", "ctx", "denied", "epoch", "fetching", "forgotten",
                 "group_id", "max_bytes", "max_records", "max_wait_s", "member_id", "node", "order", "r")

    def __init__(self, ctx: RequestContext, r: Any, group_id: str, member_id: str, epoch: int, acknowledge_only: bool,
                 added: list[tuple[UUID, int]], forgotten: list[tuple[UUID, int]], acks: list[ShareAckPartition],
                 denied: list[tuple[UUID, int, ErrorCode]], node: str) -> None:
        self.ctx = ctx
        self.r = r
        self.group_id = group_id
        self.member_id = member_id
        self.epoch = epoch
        self.acknowledge_only = acknowledge_only
        self.added = added
        self.forgotten = forgotten
        self.acks = acks
        self.denied = denied
        self.node = node
        self.order: list[tuple[UUID, int]] = []
        """The partitions read, in the answer's order (none for an acknowledgement or a closing session)."""
        self.max_records = 0
        self.max_bytes = 0
        self.max_wait_s = 0.0
        self.fetching: list[tuple[str, UUID, int]] = []
        """Its keys in ``_Serving._fetching`` until it is answered."""


class _Serving:
    def __init__(self, shard: Callable[[], ShardRuntime | None], view: NodeView, path: ShareDataPath,
                 on_close: OnClose | None = None) -> None:
        self.shard = shard
        self.view = view
        self.path = path
        self._on_close = on_close
        self._connections: set[int] = set()
        """Connections that carried a share request: only their closing concerns the shard."""
        self._fetching: Counter[tuple[str, UUID, int]] = Counter()
        """Fetches of each share partition read but not yet answered (see :func:`.acquire.read_bound`)."""
        self._leaders: dict[tuple[str, int | None], tuple[dict[str, int], list[dict[str, Any]]]] = {}
        self._refs: dict[tuple[UUID, int], PartitionRef] = {}
        """Each partition's log partition, made once (a topic id names one topic for good)."""
        self._offset_bytes: dict[PartitionRef, float] = {}
        """Each partition's bytes per offset in its last read, to ask a read for about what a fetch can use."""
        self._released: asyncio.Future[None] | None = None
        """Resolved (and replaced) when a request that may have freed share records was answered."""

    # ---- connections ---------------------------------------------------------------------------------

    def _watch(self, connection_id: int) -> None:
        if connection_id in self._connections:
            return
        if self._on_close is not None:
            self._on_close(self.connection_closed)  # once: the node's connection table exists by now
            self._on_close = None
        self._connections.add(connection_id)

    def connection_closed(self, connection_id: int) -> None:
        """Called by the node as the connection closes (never raises: it runs in ``connection_lost``)."""
        if connection_id not in self._connections:
            return
        self._connections.discard(connection_id)
        runtime = self.shard()
        if runtime is None or not runtime.loaded:
            return  # no sessions: a shard that loads releases everything acquired anyway
        try:
            pending = runtime.submit(ShareConnectionClosed(runtime.new_ref(), str(connection_id)))
        except Exception as exc:  # the shard gave up its log: its sessions are gone with it
            log.info("share_sessions_not_released", connection=connection_id, error=str(exc))
            return
        if isinstance(pending, asyncio.Future):
            pending.add_done_callback(_retrieved)
            pending.add_done_callback(lambda _: self._wake())

    # ---- the two APIs ------------------------------------------------------------------------------

    def share_fetch(self, ctx: RequestContext, r: Any) -> Any:
        return self._serve(ctx, r, acknowledge_only=False)

    def share_acknowledge(self, ctx: RequestContext, r: Any) -> Any:
        return self._serve(ctx, r, acknowledge_only=True)

    def _serve(self, ctx: RequestContext, r: Any, acknowledge_only: bool) -> Any:
        """The request's answer, served in place when it waits for nothing but its log entry: its
        reads all answer at once (``RecordSource.read_now``) and ``MaxWaitMs`` has nothing to wait
        for; then the reply is the shard's completion itself (a ``Deferred``: no task, no loop turn
        of its own). Otherwise the same steps run in :meth:`_serve_waiting`, awaiting where they must."""
        runtime = self.shard()
        if runtime is None or not runtime.loaded:
            return self._refused(ctx, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        group_id, member_id = r.group_id or "", r.member_id or ""
        if not group_id or not member_id:
            return self._refused(ctx, ErrorCode.INVALID_REQUEST, "GroupId and MemberId must be set")
        if not allowed(ctx, READ, GROUP, group_id):
            return self._refused(ctx, ErrorCode.GROUP_AUTHORIZATION_FAILED)
        share = runtime.core.types["share"]
        assert isinstance(share, ShareGroupType)
        self._watch(ctx.connection_id)

        denied: list[tuple[UUID, int, ErrorCode]] = []
        added: list[tuple[UUID, int]] = []
        acks: list[ShareAckPartition] = []
        for topic in r.topics:
            info = self.path.catalog.by_id(topic.topic_id) if topic.topic_id is not None else None
            refusal = (ErrorCode.UNKNOWN_TOPIC_ID if info is None
                       else None if allowed(ctx, READ, TOPIC, info.name) else ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            for part in topic.partitions:
                tp = (topic.topic_id, int(part.partition_index))
                if refusal is not None:
                    denied.append((*tp, refusal))
                    continue
                added.append(tp)
                if part.acknowledgement_batches:
                    acks.append(ShareAckPartition(*tp, tuple(
                        (int(b.first_offset), int(b.last_offset), tuple(int(t) for t in b.acknowledge_types))
                        for b in part.acknowledgement_batches)))
        forgotten = [] if acknowledge_only else [
            (t.topic_id, int(p)) for t in r.forgotten_topics_data for p in t.partitions]
        epoch = int(r.share_session_epoch)
        fetch = _Fetch(ctx, r, group_id, member_id, epoch, acknowledge_only, added, forgotten, acks, denied,
                       "" if ctx.node_id is None else str(ctx.node_id))  # a session per node, as per broker
        if not acknowledge_only and epoch != -1:
            wanted = set(added)
            if epoch != 0:
                session = share.sessions.get(group_id, member_id, fetch.node)
                if session is not None:
                    wanted |= session.partitions  # read, never kept: the core owns the session
            if forgotten:
                wanted.difference_update(forgotten)
            fetch.order = list(wanted) if len(wanted) < 2 else sorted(wanted, key=lambda tp: (str(tp[0]), tp[1]))
            fetch.max_records = int(getattr(r, "max_records", 0) or 0)
            fetch.max_bytes = int(r.max_bytes) if r.max_bytes > 0 else 1 << 20
            fetch.max_wait_s = r.max_wait.total_seconds() if hasattr(r.max_wait, "total_seconds") else r.max_wait / 1000
        fetching = fetch.fetching = [(group_id, *tp) for tp in fetch.order]
        self._fetching.update(fetching)
        try:
            reads: _Reads = {}
            if fetch.order:
                waits = not acks and fetch.max_wait_s > 0
                now = None if waits and self._all_full(share, group_id, fetch.order) else self._read_now(
                    share, group_id, fetch)
                if now is None or (waits and now and not any(read and read.batches for _, read, _ in now.values())):
                    return self._serve_waiting(runtime, share, fetch)  # it owns `fetching` from here
                reads = now
            pending = runtime.submit(self._request(runtime, fetch, reads))
        except BaseException:
            self._answered(fetch)
            raise
        if isinstance(pending, asyncio.Future):
            pending.add_done_callback(lambda _: self._answered(fetch))  # first: before the reply converts
            return Deferred(pending, lambda response: self._describe(fetch, response, reads))
        self._answered(fetch)
        return self._describe(fetch, pending.response, reads)

    async def _serve_waiting(self, runtime: ShardRuntime, share: ShareGroupType, fetch: _Fetch) -> Any:
        """:meth:`_serve`'s steps for a fetch that waits: for an acquirable partition or an append
        (``MaxWaitMs``), or for a source that must be awaited (sidecar mode's upstream)."""
        try:
            if not fetch.acks and fetch.max_wait_s > 0:
                await self._until_acquirable(share, fetch.group_id, fetch.order, fetch.max_wait_s)
            reads = await self._read(share, fetch.group_id, fetch)
            if (not fetch.acks and reads and fetch.max_wait_s > 0
                    and not any(read and read.batches for _, read, _ in reads.values())):
                await self.path.wait_for_append([ref for ref, _, _ in reads.values()], fetch.max_wait_s)
                fetch.order = list(reads)
                reads = await self._read(share, fetch.group_id, fetch)
            pending = runtime.submit(self._request(runtime, fetch, reads))
            response: ShareFetchResponse = await pending if isinstance(pending, asyncio.Future) else pending.response
        finally:
            self._answered(fetch)
        return self._describe(fetch, response, reads)

    def _request(self, runtime: ShardRuntime, fetch: _Fetch, reads: _Reads) -> ShareFetch:
        r = fetch.r
        return ShareFetch(
            runtime.new_ref(), fetch.group_id, fetch.member_id, fetch.epoch, str(fetch.ctx.connection_id),
            fetch.ctx.api_version, max_records=fetch.max_records,
            acquire_mode=int(getattr(r, "share_acquire_mode", 0)),
            is_renew_ack=bool(getattr(r, "is_renew_ack", False)),
            added=tuple(fetch.added), forgotten=tuple(fetch.forgotten), acks=tuple(fetch.acks),
            reads=tuple(_read_partition(tp, read, code) for tp, (_, read, code) in reads.items()),
            acknowledge_only=fetch.acknowledge_only, node=fetch.node)

    def _answered(self, fetch: _Fetch) -> None:
        """The fetch's change is made (or it failed): its partitions are no longer being fetched,
        and if it acknowledged or released records a full partition may have room again."""
        counts = self._fetching
        for key in fetch.fetching:
            left = counts[key] - 1
            if left > 0:
                counts[key] = left
            else:
                counts.pop(key, None)
        fetch.fetching = []
        if fetch.acks or fetch.epoch == -1:
            self._wake()

    # ---- helpers -----------------------------------------------------------------------------------

    async def _until_acquirable(self, share: ShareGroupType, group_id: str, partitions: list[tuple[UUID, int]],
                                timeout_s: float) -> None:
        """Wait, at most ``timeout_s`` (``MaxWaitMs``), while every partition of a fetch without
        acknowledgements is full: nothing AVAILABLE and ``share.partition.max.record.locks``
        records in flight, so nothing could be acquired (Kafka's ``DelayedShareFetch`` waits for an
        acquirable partition the same way). Answering at once instead has every member of a busy
        partition fetch again and again for nothing while the others hold its locks."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while partitions and self._all_full(share, group_id, partitions):
            remaining = deadline - loop.time()
            if remaining <= 0:
                return
            if self._released is None:
                self._released = loop.create_future()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._released), remaining)

    def _wake(self) -> None:
        released, self._released = self._released, None
        if released is not None and not released.done():
            released.set_result(None)

    def _plan(self, share: ShareGroupType, group_id: str, partitions: list[tuple[UUID, int]]
              ) -> tuple[_Reads, list[tuple[tuple[UUID, int], PartitionRef, SharePartition]]]:
        """Each partition's place in the answer (an error, or nothing to give yet) and those to read."""
        out: _Reads = {}
        reading: list[tuple[tuple[UUID, int], PartitionRef, SharePartition]] = []
        for tp in partitions:
            topic_id, index = tp
            info = self.path.catalog.by_id(topic_id)
            ref = self._refs.get(tp)
            if ref is None or info is None or ref.topic != info.name:
                ref = PartitionRef(topic_id, info.name if info is not None else "", index)
                if info is not None:
                    self._refs[tp] = ref
            if info is None or not 0 <= index < info.num_partitions:
                out[tp] = (ref, None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                continue
            p = share.partitions.get(group_id, topic_id, index)
            out[tp] = (ref, None, ErrorCode.NONE)  # its place in the answer's order (not started: nothing to give)
            if p is not None and p.initialized:
                reading.append((tp, ref, p))
        return out, reading

    def _read_now(self, share: ShareGroupType, group_id: str, fetch: _Fetch) -> _Reads | None:
        """The reads of the fetch's partitions if every one answers at once, else None."""
        out, reading = self._plan(share, group_id, fetch.order)
        per_partition = max(1, fetch.max_bytes // max(1, len(fetch.order)))
        counts = self._fetching
        for tp, ref, p in reading:
            bound = read_bound(p, fetch.max_records, counts[(group_id, *tp)])
            try:
                read = read_for_now(self.path.reader, p, ref, per_partition, bound, self._offset_bytes.get(ref))
            except SourceUnavailable as exc:
                out[tp] = (ref, None, ErrorCode(exc.code))
                continue
            if read is None:
                return None
            self._note(ref, read)
            out[tp] = (ref, read, ErrorCode.NONE)
        return out

    async def _read(self, share: ShareGroupType, group_id: str, fetch: _Fetch) -> _Reads:
        out, reading = self._plan(share, group_id, fetch.order)
        per_partition = max(1, fetch.max_bytes // max(1, len(fetch.order)))
        # The partitions are read at once (in sidecar mode, one round trip to their leaders, not one each).
        bounds = [read_bound(p, fetch.max_records, self._fetching[(group_id, *tp)]) for tp, _, p in reading]
        reads = await asyncio.gather(*(self._read_one(p, ref, per_partition, bound)
                                       for (_, ref, p), bound in zip(reading, bounds, strict=True)))
        for (tp, ref, _), (read, code) in zip(reading, reads, strict=True):
            out[tp] = (ref, read, code)
        return out

    async def _read_one(self, p: SharePartition, ref: PartitionRef, max_bytes: int,
                        bound: int | None) -> tuple[PartitionRead | None, ErrorCode]:
        try:
            read = await read_for(self.path.reader, p, ref, max_bytes, bound, self._offset_bytes.get(ref))
        except SourceUnavailable as exc:
            return None, ErrorCode(exc.code)
        self._note(ref, read)
        return read, ErrorCode.NONE

    def _note(self, ref: PartitionRef, read: PartitionRead) -> None:
        if (per_offset := bytes_per_offset(read)) is not None:
            self._offset_bytes[ref] = per_offset

    def _describe(self, fetch: _Fetch, response: ShareFetchResponse, reads: _Reads) -> Any:
        ctx, acknowledge_only = fetch.ctx, fetch.acknowledge_only
        leader, endpoints = self._leader(ctx)
        topics: dict[UUID, list[dict[str, Any]]] = {}
        for a in response.partitions:
            row: dict[str, Any] = {"partition_index": a.partition, "error_code": a.error_code,
                                   "error_message": a.error_message, "current_leader": leader}
            if acknowledge_only:
                row["error_code"] = a.ack_error_code or a.error_code
                row["error_message"] = a.ack_error_message or a.error_message
            else:
                acquired = a.acquired
                entry = reads.get((a.topic_id, a.partition)) if acquired else None
                read = entry[1] if entry is not None else None
                # The batches go out as the buffers they are stored in, joined once into the frame
                # (``protocol.fastencode``), never re-encoded.
                row.update(acknowledge_error_code=a.ack_error_code, acknowledge_error_message=a.ack_error_message,
                           records=[b.data for b in batches_holding(read.batches, acquired)] if read is not None else b"",
                           acquired_records=[{"first_offset": f, "last_offset": last, "delivery_count": c}
                                             for f, last, c in acquired])
            topics.setdefault(a.topic_id, []).append(row)
        for topic_id, index, code in fetch.denied:
            topics.setdefault(topic_id, []).append(refused_partition(index, code, leader, acknowledge_only))
        return respond(ctx, {
            "throttle_time": 0, "error_code": response.error_code, "error_message": response.error_message,
            "acquisition_lock_timeout": response.lock_timeout_ms,
            "responses": [{"topic_id": t, "partitions": ps} for t, ps in topics.items()],
            "node_endpoints": endpoints})

    def _leader(self, ctx: RequestContext) -> tuple[dict[str, int], list[dict[str, Any]]]:
        """The answer's leader of every partition (this node, as the request's listener names it;
        in sidecar mode the upstream broker it was sent to) and its ``NodeEndpoints``: described
        once per listener and node (the encoder only reads them)."""
        key = (ctx.listener, ctx.node_id)
        known = self._leaders.get(key)
        if known is None:
            node = self.view.node_for(ctx.listener) if self.path.leader is None else self.path.leader(ctx.listener)
            if ctx.node_id is not None and self.path.broker_endpoint is not None:
                node = Node(ctx.node_id, *self.path.broker_endpoint(ctx.node_id))
            known = ({"leader_id": node.node_id, "leader_epoch": 0},
                     [{"node_id": node.node_id, "host": node.host, "port": node.port, "rack": None}])
            if len(self._leaders) < 1024:  # listeners x upstream brokers: few, but never unbounded
                self._leaders[key] = known
        return known

    def _all_full(self, share: ShareGroupType, group_id: str, partitions: list[tuple[UUID, int]]) -> bool:
        limit = share.share_config(group_id).max_in_flight_records
        return all(_full(share.partitions.get(group_id, *tp), limit) for tp in partitions)

    def _refused(self, ctx: RequestContext, code: ErrorCode, message: str | None = None) -> Any:
        return respond(ctx, {"throttle_time": 0, "error_code": code, "error_message": message,
                             "acquisition_lock_timeout": 0, "responses": [], "node_endpoints": []})


def _full(p: SharePartition | None, limit: int) -> bool:
    """Nothing can be acquired in the share partition until a record is finished or released."""
    return (p is not None and p.initialized and p.in_flight_window() >= limit
            and p.next_fetch_offset() == p.next_offset)


def _retrieved(future: asyncio.Future[object]) -> None:
    if not future.cancelled() and (exc := future.exception()) is not None:
        log.info("share_sessions_not_released", error=str(exc))


def _read_partition(tp: tuple[UUID, int], read: PartitionRead | None, code: ErrorCode) -> ShareReadPartition:
    if read is None:
        return ShareReadPartition(tp[0], tp[1], error_code=code)
    return ShareReadPartition(tp[0], tp[1], read.log_start_offset, tuple(read.offsets()),
                              tuple(read.aborted_ranges()))
