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
   the acquired offsets, whole.

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
from ..api.registry import RequestContext
from ..api.respond import respond
from ..catalog import TopicSource
from ..core.share.acquisition import AcquiredRange
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
from .acquire import batches_holding, bytes_per_offset, read_bound, read_for
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
    request sent there is answered as coming from."""

    catalog: TopicSource
    reader: RecordSource
    wait_for_append: WaitForAppend
    broker_endpoint: Callable[[int], tuple[str, int]] | None = None


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

    async def _serve(self, ctx: RequestContext, r: Any, acknowledge_only: bool) -> Any:
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
        node = "" if ctx.node_id is None else str(ctx.node_id)  # a session per node, as per broker

        reads: dict[tuple[UUID, int], tuple[PartitionRef, PartitionRead | None, ErrorCode]] = {}
        wanted: set[tuple[UUID, int]] = set()
        if not acknowledge_only and epoch != -1:
            wanted = set(added)
            if epoch != 0:
                session = share.sessions.get(group_id, member_id, node)
                wanted |= set(session.partitions) if session is not None else set()
            wanted -= set(forgotten)
        max_records = int(getattr(r, "max_records", 0) or 0) if not acknowledge_only else 0
        fetching = [(group_id, *tp) for tp in wanted]
        self._fetching.update(fetching)
        try:
            if not acknowledge_only and epoch != -1:
                max_bytes = int(r.max_bytes) if r.max_bytes > 0 else 1 << 20
                order = sorted(wanted, key=lambda tp: (str(tp[0]), tp[1]))
                max_wait_s = r.max_wait.total_seconds() if hasattr(r.max_wait, "total_seconds") else r.max_wait / 1000
                if not acks and max_wait_s > 0:
                    await self._until_acquirable(share, group_id, order, max_wait_s)
                reads = await self._read(share, group_id, order, max_bytes, max_records)
                if (not acks and reads and max_wait_s > 0
                        and not any(read and read.batches for _, read, _ in reads.values())):
                    await self.path.wait_for_append([ref for ref, _, _ in reads.values()], max_wait_s)
                    reads = await self._read(share, group_id, list(reads), max_bytes, max_records)

            request = ShareFetch(
                runtime.new_ref(), group_id, member_id, epoch, str(ctx.connection_id), ctx.api_version,
                max_records=max_records,
                acquire_mode=int(getattr(r, "share_acquire_mode", 0)),
                is_renew_ack=bool(getattr(r, "is_renew_ack", False)),
                added=tuple(added), forgotten=tuple(forgotten), acks=tuple(acks),
                reads=tuple(_read_partition(tp, read, code) for tp, (_, read, code) in reads.items()),
                acknowledge_only=acknowledge_only, node=node)
            pending = runtime.submit(request)
            response: ShareFetchResponse = await pending if isinstance(pending, asyncio.Future) else pending.response
            if acks or epoch == -1:
                self._wake()  # acknowledged or released records: a full partition may have room again
        finally:
            self._fetching.subtract(fetching)
            for key in fetching:
                if self._fetching[key] <= 0:
                    self._fetching.pop(key, None)
        return respond(ctx, self._describe(ctx, response, reads, denied, acknowledge_only))

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
        limit = share.share_config(group_id).max_in_flight_records
        while partitions and all(_full(share.partitions.get(group_id, *tp), limit) for tp in partitions):
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

    async def _read(self, share: ShareGroupType, group_id: str, partitions: list[tuple[UUID, int]], max_bytes: int,
                    max_records: int) -> dict[tuple[UUID, int], tuple[PartitionRef, PartitionRead | None, ErrorCode]]:
        out: dict[tuple[UUID, int], tuple[PartitionRef, PartitionRead | None, ErrorCode]] = {}
        per_partition = max(1, max_bytes // max(1, len(partitions)))
        reading: list[tuple[tuple[UUID, int], PartitionRef, SharePartition]] = []
        for topic_id, index in partitions:
            info = self.path.catalog.by_id(topic_id)
            ref = PartitionRef(topic_id, info.name if info is not None else "", index)
            if info is None or not 0 <= index < info.num_partitions:
                out[(topic_id, index)] = (ref, None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                continue
            p = share.partitions.get(group_id, topic_id, index)
            if p is None or not p.initialized:
                out[(topic_id, index)] = (ref, None, ErrorCode.NONE)  # not started yet: nothing to give
                continue
            out[(topic_id, index)] = (ref, None, ErrorCode.NONE)  # its place in the answer's order
            reading.append(((topic_id, index), ref, p))
        # The partitions are read at once (in sidecar mode, one round trip to their leaders, not one each).
        bounds = [read_bound(p, max_records, self._fetching[(group_id, *tp)]) for tp, _, p in reading]
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
        if (per_offset := bytes_per_offset(read)) is not None:
            self._offset_bytes[ref] = per_offset
        return read, ErrorCode.NONE

    def _describe(self, ctx: RequestContext, response: ShareFetchResponse,
                  reads: dict[tuple[UUID, int], tuple[PartitionRef, PartitionRead | None, ErrorCode]],
                  denied: list[tuple[UUID, int, ErrorCode]], acknowledge_only: bool) -> dict[str, Any]:
        node = self.view.node_for(ctx.listener)
        if ctx.node_id is not None and self.path.broker_endpoint is not None:
            node = Node(ctx.node_id, *self.path.broker_endpoint(ctx.node_id))
        leader = {"leader_id": node.node_id, "leader_epoch": 0}
        topics: dict[UUID, list[dict[str, Any]]] = {}
        for a in response.partitions:
            row: dict[str, Any] = {"partition_index": a.partition, "error_code": a.error_code,
                                   "error_message": a.error_message, "current_leader": leader}
            if acknowledge_only:
                row["error_code"] = a.ack_error_code or a.error_code
                row["error_message"] = a.ack_error_message or a.error_message
            else:
                read = reads.get((a.topic_id, a.partition), (None, None, ErrorCode.NONE))[1]
                acquired = [AcquiredRange(*x) for x in a.acquired]
                data = b"".join(b.data for b in batches_holding(read.batches, acquired)) if read and acquired else b""
                row.update(acknowledge_error_code=a.ack_error_code, acknowledge_error_message=a.ack_error_message,
                           records=data,
                           acquired_records=[{"first_offset": f, "last_offset": last, "delivery_count": c}
                                             for f, last, c in a.acquired])
            topics.setdefault(a.topic_id, []).append(row)
        for topic_id, index, code in denied:
            row = {"partition_index": index, "error_code": code, "error_message": None, "current_leader": leader}
            if not acknowledge_only:
                row.update(acknowledge_error_code=code, acknowledge_error_message=None, records=b"",
                           acquired_records=[])
            topics.setdefault(topic_id, []).append(row)
        return {"throttle_time": 0, "error_code": response.error_code, "error_message": response.error_message,
                "acquisition_lock_timeout": response.lock_timeout_ms,
                "responses": [{"topic_id": t, "partitions": ps} for t, ps in topics.items()],
                "node_endpoints": [{"node_id": node.node_id, "host": node.host, "port": node.port, "rack": None}]}

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
