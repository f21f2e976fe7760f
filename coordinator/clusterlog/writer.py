"""A log partition's writer: a transactional producer that belongs to the partition.

Theory of operation. The writer of partition p uses `transactional.id` = the instance group's id and
p, so whichever instance owns p uses the same id. `claim()` is InitProducerId without a producer id:
the transaction coordinator bumps the id's epoch, aborts a transaction the previous owner left open
(its records are then never visible to a `read_committed` reader), and answers only once every
marker of the previous owner is written. From then on the previous owner's AddPartitionsToTxn,
Produce or EndTxn fails with PRODUCER_FENCED or INVALID_PRODUCER_EPOCH: it is fenced, and `Fenced`
is raised to it. A transaction that outlives `transaction.timeout.ms` is aborted and fenced by the
coordinator in the same way, though nobody took over; the owner then claims again if the partition
is still its own (as Kafka Connect's leader reclaims its config-topic writer).

States: unclaimed → claimed (no transaction) → open (partition added, records written) → claimed
(committed or aborted). Any failure other than fencing leaves the writer broken: the transaction's
outcome is not known to be a commit, so nothing written in it may be acknowledged, and the next
`write()` needs a new `claim()` (which also aborts what was left open). Many requests' entries share
one transaction: `write()` them, then one `commit()` (group commit, as the local log shares one
fsync). Replies wait for `commit()` to return.

Versions: InitProducerId v4, AddPartitionsToTxn v3, Produce v9, EndTxn v3: the client flow of
transaction protocol 1, which Kafka 4.x serves beside protocol 2 (it infers the protocol from the
request versions).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import Any

from protocol.errors import ErrorCode

from .batch import encode_batch
from .cluster import LogCluster, LogUnavailable

PRODUCE, INIT_PRODUCER_ID, ADD_PARTITIONS_TO_TXN, END_TXN = 0, 22, 24, 26
_STEP_NAMES = {PRODUCE: "Produce", INIT_PRODUCER_ID: "InitProducerId", ADD_PARTITIONS_TO_TXN: "AddPartitionsToTxn",
               END_TXN: "EndTxn"}

FENCING = frozenset({ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH,
                     ErrorCode.INVALID_PRODUCER_ID_MAPPING, ErrorCode.TRANSACTIONAL_ID_NOT_FOUND})
"""Our producer id or epoch is no longer the transactional id's: someone claimed it, or the
coordinator aborted our transaction on its timeout."""
COORDINATOR_MOVED = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE})
RETRIABLE = frozenset({ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS}) | COORDINATOR_MOVED

PRODUCE_RETRIABLE = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE,
                               ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS,
                               ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.REQUEST_TIMED_OUT})
"""A leader moving (or not yet known after the topic's creation) or too few in-sync replicas: the
producer's retriable errors."""


class Fenced(Exception):
    """Another owner claimed the partition's transactional id (or our transaction timed out)."""


def transactional_id(instance_group: str, partition: int) -> str:
    return f"{instance_group}-log-{partition}"


class PartitionWriter:
    def __init__(self, cluster: LogCluster, topic: str, partition: int, transactional_id: str,
                 transaction_timeout_ms: int = 60_000, retry_for_s: float = 30.0,
                 clock_ms: Callable[[], int] = lambda: int(time.time() * 1000)) -> None:
        self.cluster = cluster
        self.topic = topic
        self.partition = partition
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self.retry_for_s = retry_for_s
        self._clock_ms = clock_ms
        self.producer_id = -1
        self.producer_epoch = -1
        self._sequence = 0
        self._open = False
        self._usable = False

    @property
    def claimed(self) -> bool:
        return self._usable

    async def claim(self) -> None:
        """Take the partition's transactional id: fences the previous holder and settles its open
        transaction (aborted) before returning."""
        self._usable = False
        response = await self._coordinator_call(INIT_PRODUCER_ID, 4, {
            "transactional_id": self.transactional_id, "transaction_timeout": self.transaction_timeout_ms,
            "producer_id": -1, "producer_epoch": -1})
        self.producer_id, self.producer_epoch = int(response.producer_id), int(response.producer_epoch)
        self._sequence = 0
        self._open = False
        self._usable = True

    async def write(self, entries: Sequence[tuple[bytes | None, bytes | None]]) -> int:
        """Write (key, value) entries into the open transaction (opening one if needed); returns the
        offset of the first. Nothing written is visible to readers before `commit()`."""
        self._require_usable()
        try:
            if not self._open:
                await self._add_partition()
                self._open = True
            batch = encode_batch(entries, producer_id=self.producer_id, producer_epoch=self.producer_epoch,
                                 base_sequence=self._sequence, transactional=True, timestamp_ms=self._clock_ms())
            base_offset = await self._produce(batch)
            self._sequence += len(entries)
            return base_offset
        except LogUnavailable:
            self._usable = False
            raise

    async def _produce(self, batch: bytes) -> int:
        # A retry sends the same batch with the same sequence: the partition leader keeps the first
        # copy and answers a duplicate with its offset (idempotence), so retrying is never a
        # double write.
        deadline = time.monotonic() + self.retry_for_s
        delay = 0.02
        while True:
            response = await self.cluster.call_leader(self.topic, self.partition, PRODUCE, 9, {
                "transactional_id": self.transactional_id, "acks": -1, "timeout": 30_000,
                "topic_data": [{"name": self.topic, "partition_data": [{"index": self.partition, "records": batch}]}]})
            result = response.responses[0].partition_responses[0]
            code = ErrorCode(int(result.error_code))
            if code == ErrorCode.NONE:
                return int(result.base_offset)
            if code in PRODUCE_RETRIABLE and time.monotonic() < deadline:
                self.cluster.forget_leader(self.topic, self.partition)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 0.5)
                continue
            self._fail(code, "Produce")

    async def commit(self) -> None:
        """Commit the open transaction: when this returns, every entry written since the last commit
        is durable and will be visible to `read_committed` readers."""
        await self._end(True)

    async def abort(self) -> None:
        await self._end(False)

    async def append(self, entries: Sequence[tuple[bytes | None, bytes | None]]) -> int:
        """`write` and `commit` in one: the offset of the first entry, once committed."""
        offset = await self.write(entries)
        await self.commit()
        return offset

    async def _end(self, committed: bool) -> None:
        self._require_usable()
        if not self._open:
            return
        try:
            await self._coordinator_call(END_TXN, 3, {
                "transactional_id": self.transactional_id, "producer_id": self.producer_id,
                "producer_epoch": self.producer_epoch, "committed": committed})
        except LogUnavailable:
            self._usable = False  # the outcome is unknown: a new claim settles it
            raise
        self._open = False

    async def _add_partition(self) -> None:
        # CONCURRENT_TRANSACTIONS here: the markers of our previous transaction are still being written.
        await self._coordinator_call(ADD_PARTITIONS_TO_TXN, 3, {
            "v3_and_below_transactional_id": self.transactional_id,
            "v3_and_below_producer_id": self.producer_id, "v3_and_below_producer_epoch": self.producer_epoch,
            "v3_and_below_topics": [{"name": self.topic, "partitions": [self.partition]}]},
            error_of=lambda r: r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code)

    async def _coordinator_call(self, api_key: int, version: int, fields: dict[str, object],
                                error_of: Callable[[Any], int] = lambda r: int(r.error_code)) -> Any:
        """A call to the transaction coordinator, retried while its answer is retriable (the
        coordinator moving or loading, a transaction still completing) for up to `retry_for_s`."""
        deadline = time.monotonic() + self.retry_for_s
        delay = 0.02
        while True:
            response = await self.cluster.call_coordinator(self.transactional_id, api_key, version, dict(fields))
            code = ErrorCode(int(error_of(response)))
            if code == ErrorCode.NONE:
                return response
            if code in RETRIABLE and time.monotonic() < deadline:
                if code in COORDINATOR_MOVED:
                    self.cluster.forget_coordinator(self.transactional_id)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 0.5)
                continue
            self._fail(code, _STEP_NAMES[api_key])

    def _fail(self, code: ErrorCode, step: str) -> None:
        self._usable = False
        if code in FENCING:
            raise Fenced(f"{self.topic}-{self.partition}: {step} answered {code.name}: "
                         f"{self.transactional_id} belongs to a newer owner")
        raise LogUnavailable(f"{self.topic}-{self.partition}: {step} answered {code.name}")

    def _require_usable(self) -> None:
        if not self._usable:
            raise LogUnavailable(f"{self.topic}-{self.partition}: the writer must claim the partition first")
