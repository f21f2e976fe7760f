"""InitProducerId (key 22): versions 0-5, for idempotent producers only.

With an authorizer (KIP-679, as Kafka 3+): IDEMPOTENT_WRITE on the cluster or WRITE on some topic
the principal may write, else CLUSTER_AUTHORIZATION_FAILED.

Kafka 4 answers a request without a transactional id from `TransactionCoordinator
.handleInitProducerId`: a fresh producer id (from `ProducerIdManager`) with epoch 0, whatever
`producer_id`/`producer_epoch` (v3+, KIP-360) say. That is what happens here (ids from
`producer_ids.py`), so `enable.idempotence=true` works against the embedded data plane.

Transactions are not supported: this server runs no transaction coordinator, and the transactional
APIs (AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit, WriteTxnMarkers) are not
advertised, so clients see UNSUPPORTED_VERSION for them. InitProducerId with a transactional id is
answered UNSUPPORTED_VERSION too (Kafka's code for "this broker does not serve this"; clients treat
it as fatal rather than retrying), and the refusal is logged once per transactional id.

When the next block of ids cannot be persisted (a full disk), no id is handed out and the answer
is COORDINATOR_LOAD_IN_PROGRESS, retriable: Kafka's when its producer id manager has no block yet.
"""

from __future__ import annotations

from typing import Any

from coordinator.api.registry import RequestContext
from coordinator.logging import get_logger
from coordinator.security.authorizer import CLUSTER, CLUSTER_NAME, IDEMPOTENT_WRITE, TOPIC, WRITE
from coordinator.storage_errors import StorageLog
from protocol.build import build
from protocol.errors import ErrorCode
from protocol.schemas import response_schema

from .log import PartitionStore

API_KEY = 22
MIN_VERSION = 0
MAX_VERSION = 5

log = get_logger("coordinator.dataplane")
_storage = StorageLog("coordinator.dataplane")

_REFUSALS_LOGGED = 1024


class InitProducerIdHandler:
    def __init__(self, store: PartitionStore) -> None:
        self.store = store
        self._logged: set[str] = set()

    def _may_write(self, ctx: RequestContext) -> bool:
        authz = ctx.authz
        return bool(authz.allowed(ctx, IDEMPOTENT_WRITE, CLUSTER, CLUSTER_NAME)) or any(
            authz.allowed(ctx, WRITE, TOPIC, topic.name) for topic in self.store.catalog)

    def __call__(self, ctx: RequestContext, request: Any) -> Any:
        cls = response_schema(API_KEY, ctx.api_version)
        transactional_id = request.transactional_id
        allocator = self.store.producer_ids
        if transactional_id is not None or allocator is None:
            if transactional_id is not None and transactional_id not in self._logged and len(self._logged) < _REFUSALS_LOGGED:
                self._logged.add(transactional_id)
                log.warning(
                    "transactions_not_supported", transactional_id=transactional_id, client_id=ctx.client_id,
                    detail="the embedded data plane serves idempotent producers, not transactions",
                )
            return build(cls, {"throttle_time": 0, "error_code": ErrorCode.UNSUPPORTED_VERSION, "producer_id": -1, "producer_epoch": -1})
        if ctx.authz is not None and not self._may_write(ctx):
            return build(cls, {"throttle_time": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                               "producer_id": -1, "producer_epoch": -1})
        try:
            producer_id = allocator.allocate()
        except OSError as exc:  # the next block could not be persisted (a full disk): nothing handed out
            _storage.failed("producer_ids_write_refused", "producer_ids", exc)
            return build(cls, {"throttle_time": 0, "error_code": ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                               "producer_id": -1, "producer_epoch": -1})
        return build(cls, {"throttle_time": 0, "error_code": ErrorCode.NONE, "producer_id": producer_id, "producer_epoch": 0})
