"""ListOffsets: versions 1-10.

- With an authorizer: DESCRIBE on each topic, else TOPIC_AUTHORIZATION_FAILED on its partitions.

Version notes (ListOffsetsRequest/Response.json):
- v1: one timestamp -> one offset (the v0 offsets array is not served); v2: isolation_level
  (READ_COMMITTED latest = last stable offset, which equals the high watermark here); v4:
  current_leader_epoch and leader_epoch (KIP-320); v6: flexible; v7: MAX_TIMESTAMP (-3, KIP-734);
  v8: EARLIEST_LOCAL_TIMESTAMP (-4, KIP-405: the log start offset, nothing is tiered); v9:
  LATEST_TIERED_TIMESTAMP (-5: offset -1, nothing is tiered); v10: timeout (KIP-1075, ignored).
- Special timestamps: -2 earliest = log start offset, -1 latest = high watermark, both with
  timestamp -1 and leader epoch 0. Any other timestamp: the first record whose timestamp is >= it
  (Kafka's rule; see `PartitionLog.offset_for_timestamp`), or offset -1 / timestamp -1 when none.
- The leader epoch is 0 everywhere (`log.LEADER_EPOCH`); a current_leader_epoch above it ->
  UNKNOWN_LEADER_EPOCH, below it (and >= 0) -> FENCED_LEADER_EPOCH.
- Unknown topic or partition -> UNKNOWN_TOPIC_OR_PARTITION; a partition listed twice ->
  INVALID_REQUEST for each listing, as Kafka does.
- A timestamp lookup whose read from disk fails (EIO) -> KAFKA_STORAGE_ERROR for that partition.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from coordinator.api.registry import RequestContext
from coordinator.catalog.catalog import TopicCatalog
from coordinator.security.authorizer import DESCRIBE, TOPIC
from coordinator.storage_errors import StorageLog
from protocol.build import build
from protocol.errors import ErrorCode
from protocol.schemas import response_schema

from .log import LEADER_EPOCH, NO_TIMESTAMP, PartitionStore
from .partition import PartitionLog

API_KEY = 2
MIN_VERSION = 1
MAX_VERSION = 10

_storage = StorageLog("coordinator.dataplane")

LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5


class ListOffsetsHandler:
    def __init__(self, catalog: TopicCatalog, store: PartitionStore) -> None:
        self.catalog = catalog
        self.store = store

    def __call__(self, ctx: RequestContext, request: Any) -> Any:
        seen = Counter((t.name, int(p.partition_index)) for t in request.topics for p in t.partitions)
        topics = []
        for topic_req in request.topics:
            topic = self.catalog.get(topic_req.name)
            denied = ctx.authz is not None and not ctx.authz.allowed(ctx, DESCRIBE, TOPIC, topic_req.name)
            partitions = []
            for p in topic_req.partitions:
                index = int(p.partition_index)
                if denied:
                    partitions.append(_error(index, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                elif seen[(topic_req.name, index)] > 1:
                    partitions.append(_error(index, ErrorCode.INVALID_REQUEST))
                elif topic is None or not 0 <= index < topic.num_partitions:
                    partitions.append(_error(index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                else:
                    epoch = int(getattr(p, "current_leader_epoch", -1))
                    if epoch > LEADER_EPOCH:
                        partitions.append(_error(index, ErrorCode.UNKNOWN_LEADER_EPOCH))
                    elif 0 <= epoch < LEADER_EPOCH:
                        partitions.append(_error(index, ErrorCode.FENCED_LEADER_EPOCH))
                    else:
                        log = self.store.log(topic, index)
                        try:
                            partitions.append(_lookup(index, log, int(p.timestamp)))
                        except OSError as exc:  # a timestamp lookup reads batches from a failing disk
                            _storage.failed("list_offsets_read_failed", "list_offsets", exc, topic=topic.name,
                                            partition=index)
                            partitions.append(_error(index, ErrorCode.KAFKA_STORAGE_ERROR))
            topics.append({"name": topic_req.name, "partitions": partitions})
        cls = response_schema(API_KEY, ctx.api_version)
        return build(cls, {"throttle_time": 0, "topics": topics})


def _error(index: int, code: int) -> dict[str, Any]:
    return {"partition_index": index, "error_code": code, "timestamp": -1, "offset": -1, "leader_epoch": -1}


def _found(index: int, timestamp: int, offset: int) -> dict[str, Any]:
    return {
        "partition_index": index,
        "error_code": ErrorCode.NONE,
        "timestamp": timestamp,
        "offset": offset,
        "leader_epoch": LEADER_EPOCH,
    }


def _lookup(index: int, log: PartitionLog, timestamp: int) -> dict[str, Any]:
    if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
        return _found(index, NO_TIMESTAMP, log.log_start_offset)
    if timestamp == LATEST_TIMESTAMP:
        return _found(index, NO_TIMESTAMP, log.high_watermark)
    if timestamp == LATEST_TIERED_TIMESTAMP:
        return _error(index, ErrorCode.NONE)
    found = log.max_timestamp() if timestamp == MAX_TIMESTAMP else log.offset_for_timestamp(timestamp)
    if found is None:
        return _error(index, ErrorCode.NONE)
    return _found(index, found[0], found[1])
