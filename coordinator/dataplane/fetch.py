"""Fetch: versions 4-17, with long polling and incremental fetch sessions.

- With an authorizer: READ on each topic, else TOPIC_AUTHORIZATION_FAILED on its partitions.

Version notes (FetchRequest/Response.json):
- v4: isolation_level, last_stable_offset, aborted_transactions; v5: log_start_offset (KIP-107);
  v7: fetch sessions (KIP-227, see `session.py`), forgotten_topics_data, top-level error_code;
  v9: current_leader_epoch (KIP-320): > our epoch (0) -> UNKNOWN_LEADER_EPOCH, < -> FENCED;
  v11: rack_id and preferred_read_replica (always -1 here); v12: flexible, last_fetched_epoch
  (divergence never arises with a single epoch); v13: topic ids instead of names (KIP-516): an
  unknown id -> UNKNOWN_TOPIC_ID; v15: replica_state (brokers only, ignored); v16-v17: KIP-951
  leader tags, left default.
- Every partition answers the high watermark, last stable offset (= high watermark: no
  transactions) and log start offset; `aborted_transactions` is null for READ_UNCOMMITTED and empty
  for READ_COMMITTED. Errors answer -1 for all three and empty records (never null records:
  librdkafka rejects a null record set).
- OFFSET_OUT_OF_RANGE when the fetch offset is below the log start offset or above the log end.
- A read from disk that fails (EIO, a segment cut short under us) answers KAFKA_STORAGE_ERROR for
  that partition, as Kafka does for a partition on a failed log directory; the others are served.
- Limits (KIP-74): whole batches only, from the batch holding the fetch offset; each partition at
  most `partition_max_bytes`, the response at most min(`max_bytes`, `fetch.max.bytes`), except that
  the first partition returning data always gets its first batch, however large. (Kafka may end a
  partition with a truncated batch; clients skip those, so sending whole batches only is
  equivalent.)
- Long polling: answer at once when `max_wait_ms` <= 0, nothing is fetched, any partition has an
  error, or the bytes available (per partition capped at its max bytes) reach `min_bytes`;
  otherwise park on the logs until an append makes that true or `max_wait_ms` passes, then read.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from coordinator.api.registry import RequestContext
from coordinator.catalog.catalog import Topic, TopicCatalog
from coordinator.security.authorizer import READ, TOPIC
from coordinator.storage_errors import StorageLog
from protocol.build import build
from protocol.errors import ErrorCode
from protocol.schemas import response_schema

from . import metrics
from .config import DataPlaneConfig
from .log import LEADER_EPOCH, PartitionStore
from .partition import PartitionLog
from .session import (
    FINAL_EPOCH,
    FetchContext,
    FetchPartitionRequest,
    FetchSessionCache,
    PartitionKey,
    PartitionResult,
    TopicRef,
    new_context,
    respond,
)

API_KEY = 1
MIN_VERSION = 4
MAX_VERSION = 17

READ_COMMITTED = 1

_storage = StorageLog("coordinator.dataplane")


class FetchHandler:
    def __init__(
        self,
        catalog: TopicCatalog,
        store: PartitionStore,
        config: DataPlaneConfig,
        sessions: FetchSessionCache | None = None,
    ) -> None:
        self.catalog = catalog
        self.store = store
        self.config = config
        self.sessions = sessions if sessions is not None else FetchSessionCache(
            config.max_incremental_fetch_session_cache_slots, config.fetch_session_eviction_ms
        )

    async def __call__(self, ctx: RequestContext, request: Any) -> Any:
        version = ctx.api_version
        uses_topic_ids = version >= 13
        requested = [
            FetchPartitionRequest(
                _topic_ref(topic, uses_topic_ids),
                int(p.partition),
                int(p.fetch_offset),
                int(p.partition_max_bytes),
                int(getattr(p, "current_leader_epoch", -1)),
            )
            for topic in request.topics
            for p in topic.partitions
        ]
        forgotten: list[PartitionKey] = [
            (_topic_ref(topic, uses_topic_ids), int(index))
            for topic in getattr(request, "forgotten_topics_data", ())
            for index in topic.partitions
        ]
        if version >= 7:
            session_id, epoch = int(request.session_id), int(request.session_epoch)
        else:
            session_id, epoch = 0, FINAL_EPOCH
        context = new_context(
            self.sessions,
            session_id=session_id,
            epoch=epoch,
            uses_topic_ids=uses_topic_ids,
            requested=requested,
            forgotten=forgotten,
            now_ms=self.store.clock_ms(),
        )
        results: list[PartitionResult] = []
        if context.kind != "error":
            await self._wait(context, request, ctx)
            results = self._read(context, request, ctx)
        error_code, response_session_id, selected = respond(
            self.sessions, context, results, self.store.clock_ms()
        )
        return self._response(ctx, request, error_code, response_session_id, selected)

    # -- resolution --------------------------------------------------------------------------
    def _resolve(self, req: FetchPartitionRequest, ctx: RequestContext) -> tuple[Topic | None, int]:
        """The catalog topic and NONE, or None and the partition's error code."""
        authz = ctx.authz
        if isinstance(req.topic, uuid.UUID):
            topic = self.catalog.by_id(req.topic)
            missing = ErrorCode.UNKNOWN_TOPIC_ID
        else:
            if authz is not None and not authz.allowed(ctx, READ, TOPIC, req.topic):
                return None, ErrorCode.TOPIC_AUTHORIZATION_FAILED
            topic = self.catalog.get(req.topic)
            missing = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if topic is None:
            return None, missing
        if authz is not None and not authz.allowed(ctx, READ, TOPIC, topic.name):
            return None, ErrorCode.TOPIC_AUTHORIZATION_FAILED
        if not 0 <= req.partition < topic.num_partitions:
            return None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if req.current_leader_epoch >= 0:
            if req.current_leader_epoch > LEADER_EPOCH:
                return None, ErrorCode.UNKNOWN_LEADER_EPOCH
            if req.current_leader_epoch < LEADER_EPOCH:
                return None, ErrorCode.FENCED_LEADER_EPOCH
        return topic, ErrorCode.NONE

    def _log(self, req: FetchPartitionRequest, ctx: RequestContext) -> tuple[Topic | None, PartitionLog | None, int]:
        topic, code = self._resolve(req, ctx)
        if topic is None:
            return None, None, code
        log = self.store.log(topic, req.partition)
        if not log.log_start_offset <= req.fetch_offset <= log.log_end_offset:
            return topic, log, ErrorCode.OFFSET_OUT_OF_RANGE
        return topic, log, ErrorCode.NONE

    # -- long polling ------------------------------------------------------------------------
    async def _wait(self, context: FetchContext, request: Any, ctx: RequestContext) -> None:
        max_wait_ms = round(request.max_wait.total_seconds() * 1000)
        min_bytes = int(request.min_bytes)
        if max_wait_ms <= 0 or not context.partitions:
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max_wait_ms / 1000
        while True:
            available = 0
            logs: list[PartitionLog] = []
            for req in context.partitions:
                _, log, code = self._log(req, ctx)
                if code != ErrorCode.NONE or log is None:
                    return
                logs.append(log)
                available += min(log.bytes_from(req.fetch_offset), max(req.partition_max_bytes, 0))
            if available >= min_bytes:
                return
            remaining = deadline - loop.time()
            if remaining <= 0:
                return
            waiter: asyncio.Future[None] = loop.create_future()
            for log in logs:
                log.add_waiter(waiter)
            try:
                await asyncio.wait((waiter,), timeout=remaining)
            finally:
                for log in logs:
                    log.discard_waiter(waiter)
                if not waiter.done():
                    waiter.cancel()

    # -- reading -----------------------------------------------------------------------------
    def _read(self, context: FetchContext, request: Any, ctx: RequestContext) -> list[PartitionResult]:
        budget = min(int(request.max_bytes), self.config.fetch_max_bytes)
        min_one = True
        results = []
        for req in context.partitions:
            topic, log, code = self._log(req, ctx)
            if code != ErrorCode.NONE or log is None or topic is None:
                results.append(PartitionResult(req, code, topic_name=topic.name if topic else None))
                continue
            try:
                records, count = log.read_records(req.fetch_offset, min(req.partition_max_bytes, budget), min_one)
            except OSError as exc:  # a failing disk (EIO) or a segment cut short under us
                _storage.failed("fetch_read_failed", "fetch", exc, topic=topic.name, partition=req.partition)
                results.append(PartitionResult(req, ErrorCode.KAFKA_STORAGE_ERROR, topic_name=topic.name))
                continue
            if records:
                min_one = False
                budget = max(0, budget - len(records))
                metrics.BYTES_OUT.labels(topic.name).inc(len(records))
                metrics.MESSAGES_OUT.labels(topic.name).inc(count)
            results.append(
                PartitionResult(
                    req,
                    ErrorCode.NONE,
                    log.high_watermark,
                    log.last_stable_offset,
                    log.log_start_offset,
                    records,
                    topic.name,
                )
            )
        return results

    # -- response ----------------------------------------------------------------------------
    def _response(
        self,
        ctx: RequestContext,
        request: Any,
        error_code: int,
        session_id: int,
        results: list[PartitionResult],
    ) -> Any:
        read_committed = int(getattr(request, "isolation_level", 0)) == READ_COMMITTED
        topics: list[dict[str, Any]] = []
        current: TopicRef | None = None
        for result in results:
            ref = result.request.topic
            if current is None or ref != current or not topics:
                topics.append(
                    {
                        "topic": result.topic_name or (ref if isinstance(ref, str) else ""),
                        "topic_id": ref if isinstance(ref, uuid.UUID) else _ZERO_UUID,
                        "partitions": [],
                    }
                )
                current = ref
            ok = result.error_code == ErrorCode.NONE
            topics[-1]["partitions"].append(
                {
                    "partition_index": result.request.partition,
                    "error_code": result.error_code,
                    "high_watermark": result.high_watermark,
                    "last_stable_offset": result.last_stable_offset,
                    "log_start_offset": result.log_start_offset,
                    "aborted_transactions": () if read_committed and ok else None,
                    "preferred_read_replica": -1,
                    "records": result.records,
                }
            )
        cls = response_schema(API_KEY, ctx.api_version)
        return build(
            cls,
            {
                "throttle_time": 0,
                "error_code": error_code,
                "session_id": session_id,
                "responses": topics,
            },
        )


_ZERO_UUID = uuid.UUID(int=0)


def _topic_ref(topic: Any, uses_topic_ids: bool) -> TopicRef:
    if uses_topic_ids:
        topic_id = topic.topic_id
        return topic_id if topic_id is not None else _ZERO_UUID
    return str(topic.topic)
