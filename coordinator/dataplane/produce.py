"""Produce: versions 3-11.

- With an authorizer: WRITE on each topic, else TOPIC_AUTHORIZATION_FAILED on its partitions.

Version notes (ProduceRequest/Response.json):
- v3: record batches (magic 2) only, transactional_id; v5: log_start_offset in the response
  (KIP-107); v7: ZStandard allowed (KIP-110); v8: record_errors and error_message (KIP-467);
  v9: flexible versions; v10-v11: current_leader / node_endpoints tags (KIP-951), left default
  because this node always leads.
- acks 0 gets no response: the handler returns None, which the connection layer must read as
  "send nothing" (Kafka also closes the connection when an acks=0 produce fails; we do not).
- acks other than 0, 1, -1 -> INVALID_REQUIRED_ACKS on every partition, nothing appended.
- Produce never creates topics (Kafka 4 creates them from Metadata only): unknown topic or partition
  -> UNKNOWN_TOPIC_OR_PARTITION; Kafka's internal topics -> INVALID_TOPIC_EXCEPTION.
- Batch validation and its error codes: see `batch.py`; idempotent producer checks (duplicates
  answered with their original offsets, OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH): see
  `producers.py`. A refused partition answers base_offset -1, log_append_time -1, log_start_offset -1
  and, from v8, the error message.
- Storage: a write the disk refuses (full: ENOSPC) is undone and answers KAFKA_STORAGE_ERROR (56)
  for that partition, as Kafka answers a produce to a failed log directory; the producer retries.
  One warning line per failure kind per interval (`storage_errors.StorageLog`).
- Durability: with acks 1 or -1 the response waits until every appended batch is below its
  partition's high watermark (on disk per `log.flush.policy`, see `flusher.py`); acks 0 waits for
  nothing, as in Kafka.
"""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Awaitable
from typing import Any

from coordinator.api.registry import RequestContext
from coordinator.catalog.catalog import TopicCatalog
from coordinator.recordlog import WriteRefused
from coordinator.security.authorizer import TOPIC, WRITE
from coordinator.storage_errors import StorageLog, error_kind
from protocol.build import build
from protocol.errors import ErrorCode
from protocol.schemas import response_schema

from . import metrics
from .batch import InvalidBatch, validate_produce
from .log import PartitionStore, TopicSettings
from .producers import ProducerError

API_KEY = 0
MIN_VERSION = 3
MAX_VERSION = 11

_storage = StorageLog("coordinator.dataplane")

KAFKA_INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})


class ProduceHandler:
    def __init__(self, catalog: TopicCatalog, store: PartitionStore) -> None:
        self.catalog = catalog
        self.store = store

    def __call__(self, ctx: RequestContext, request: Any) -> Any | Awaitable[Any] | None:
        acks = int(request.acks)
        valid_acks = acks in (0, 1, -1)
        topics = []
        waits: list[asyncio.Future[None]] = []
        for topic_data in request.topic_data:
            topic = self.catalog.get(topic_data.name)
            settings = TopicSettings.of(topic, self.store.config) if topic is not None else None
            denied = ctx.authz is not None and not ctx.authz.allowed(ctx, WRITE, TOPIC, topic_data.name)
            partitions = []
            for partition_data in topic_data.partition_data:
                index = int(partition_data.index)
                if not valid_acks:
                    partitions.append(_refused(index, ErrorCode.INVALID_REQUIRED_ACKS, None))
                elif denied:
                    partitions.append(_refused(index, ErrorCode.TOPIC_AUTHORIZATION_FAILED, None))
                elif topic is None or settings is None or not 0 <= index < topic.num_partitions:
                    partitions.append(
                        _refused(
                            index,
                            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                            "This server does not host this topic-partition.",
                        )
                    )
                elif topic.name in KAFKA_INTERNAL_TOPICS:
                    partitions.append(
                        _refused(index, ErrorCode.INVALID_TOPIC_EXCEPTION, "Cannot append to internal topic")
                    )
                else:
                    try:
                        batch, header = validate_produce(
                            partition_data.records,
                            api_version=ctx.api_version,
                            max_message_bytes=settings.max_message_bytes,
                        )
                    except InvalidBatch as exc:
                        partitions.append(_refused(index, exc.code, exc.message))
                        continue
                    try:
                        result = self.store.append(topic, index, batch, header, settings)
                    except ProducerError as exc:
                        partitions.append(_refused(index, exc.code, exc.message))
                        continue
                    except WriteRefused as exc:  # a full disk: nothing was appended
                        cause = exc.__cause__ if exc.__cause__ is not None else exc
                        _storage.failed("produce_write_refused", "produce", cause, topic=topic.name, partition=index)
                        partitions.append(_refused(index, ErrorCode.KAFKA_STORAGE_ERROR,
                                                   f"the disk refused the write ({error_kind(cause)})"))
                        continue
                    wait = self.store.log(topic, index).wait_durable(result.end_offset)
                    if wait is not None:
                        waits.append(wait)
                    partitions.append(
                        {
                            "index": index,
                            "error_code": ErrorCode.NONE,
                            "base_offset": result.base_offset,
                            "log_append_time": _datetime(result.log_append_time_ms),
                            "log_start_offset": result.log_start_offset,
                        }
                    )
            topics.append({"name": topic_data.name, "partition_responses": partitions})
        if acks == 0:
            return None
        cls = response_schema(API_KEY, ctx.api_version)
        if waits:
            return _after(waits, cls, topics)
        return build(cls, {"responses": topics})


async def _after(waits: list[asyncio.Future[None]], cls: type, topics: list[dict[str, Any]]) -> Any:
    """The response, once every batch it acknowledges is durable."""
    for wait in waits:
        await wait
    return build(cls, {"responses": topics})


def _refused(index: int, code: int, message: str | None) -> dict[str, Any]:
    metrics.PRODUCE_ERRORS.labels(ErrorCode(code).name).inc()
    return {
        "index": index,
        "error_code": code,
        "base_offset": -1,
        "log_append_time": None,
        "log_start_offset": -1,
        "error_message": message,
    }


def _datetime(ms: int) -> datetime.datetime | None:
    """kio's `log_append_time` is a nullable datetime; None encodes Kafka's -1 (CreateTime)."""
    if ms < 0:
        return None
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC)
