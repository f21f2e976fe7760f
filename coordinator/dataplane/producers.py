"""Idempotent producer state of one partition: producer ids, epochs, sequences, duplicates.

Kafka's rules (`ProducerStateManager`, `ProducerStateEntry`, `ProducerAppendInfo` and
`UnifiedLog.analyzeAndValidateProducerState`, Kafka 4.x), for batches from clients with a producer
id (non-transactional; transactional batches never get here, see `batch.py`):

1. Duplicate: if the producer's entry has the batch's epoch and one of its last 5 batches has the
   same first and last sequence, the batch is not appended; Produce answers success with that
   batch's original base offset (no DUPLICATE_SEQUENCE_NUMBER error since Kafka 2.x clients).
2. Epoch: a batch whose epoch is below the entry's -> INVALID_PRODUCER_EPOCH (Kafka 2.7+ answers
   this, not PRODUCER_FENCED, to Produce).
3. Sequence: a new (higher) epoch must start at sequence 0 unless the producer had no epoch yet;
   within the epoch the first sequence must follow the last one (wrapping after Int32 max), else
   OUT_OF_ORDER_SEQUENCE_NUMBER. A producer with no entry (new, or all its batches removed by
   retention) may start at any sequence, as in Kafka.
4. On append, a new epoch clears the entry's batches; the entry keeps its last 5 batches.

State is rebuilt at start-up by feeding every retained batch to `update` in offset order, as Kafka
rebuilds it from the log (no snapshots: the headers are read during recovery anyway). Entries whose
last batch timestamp is older than `producer.id.expiration.ms` (Kafka's default, one day) are
removed by `expire`.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from protocol.errors import ErrorCode

from .batch import BatchHeader

NUM_BATCHES_TO_RETAIN = 5
INT32_MAX = 2**31 - 1
NO_PRODUCER_EPOCH = -1
PRODUCER_ID_EXPIRATION_MS = 86_400_000


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


class ProducerEntry:
    __slots__ = ("batches", "epoch")

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch
        self.batches: deque[BatchMetadata] = deque(maxlen=NUM_BATCHES_TO_RETAIN)

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    @property
    def last_timestamp(self) -> int:
        return self.batches[-1].timestamp if self.batches else -1


class ProducerError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def last_sequence(header: BatchHeader) -> int:
    """Kafka's `DefaultRecordBatch.incrementSequence(baseSequence, lastOffsetDelta)`."""
    base, delta = header.base_sequence, header.last_offset_delta
    if base > INT32_MAX - delta:
        return delta - (INT32_MAX - base) - 1
    return base + delta


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


class ProducerStates:
    """Producer entries of one partition."""

    def __init__(self) -> None:
        self.entries: dict[int, ProducerEntry] = {}

    def __len__(self) -> int:
        return len(self.entries)

    def check(self, header: BatchHeader) -> BatchMetadata | None:
        """Validate a client batch before it is appended: the original batch if it is a duplicate,
        None if it may be appended; raises `ProducerError` with Kafka's code otherwise."""
        producer_id = header.producer_id
        if producer_id < 0:
            return None
        entry = self.entries.get(producer_id)
        if entry is None:
            return None  # unknown producer: any epoch and sequence (rule 3)
        epoch, first_seq = header.producer_epoch, header.base_sequence
        if epoch == entry.epoch:
            last_seq = last_sequence(header)
            for batch in entry.batches:
                if batch.first_seq == first_seq and batch.last_seq == last_seq:
                    return batch
        if epoch < entry.epoch:
            raise ProducerError(
                ErrorCode.INVALID_PRODUCER_EPOCH,
                f"Epoch of producer {producer_id} is {epoch}, which is smaller than the last seen epoch {entry.epoch}",
            )
        if epoch != entry.epoch:
            if first_seq != 0 and entry.epoch != NO_PRODUCER_EPOCH:
                raise ProducerError(
                    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"Invalid sequence number for new epoch of producer {producer_id}: {epoch} (request epoch), "
                    f"{first_seq} (seq. number), {entry.epoch} (current producer epoch)",
                )
        elif entry.batches and not _in_sequence(entry.last_seq, first_seq):
            raise ProducerError(
                ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"Out of order sequence number for producer {producer_id}: {first_seq} (incoming seq. number), "
                f"{entry.last_seq} (current end sequence number)",
            )
        return None

    def update(self, header: BatchHeader, base_offset: int, timestamp: int) -> None:
        """Record an appended batch (live, or replayed at recovery)."""
        producer_id = header.producer_id
        if producer_id < 0:
            return
        entry = self.entries.get(producer_id)
        if entry is None:
            entry = self.entries[producer_id] = ProducerEntry(header.producer_epoch)
        elif entry.epoch != header.producer_epoch:
            entry.epoch = header.producer_epoch
            entry.batches.clear()
        entry.batches.append(
            BatchMetadata(
                header.base_sequence,
                last_sequence(header),
                base_offset,
                base_offset + header.last_offset_delta,
                timestamp,
            )
        )

    def expire(self, now_ms: int, expiration_ms: int = PRODUCER_ID_EXPIRATION_MS) -> int:
        """Forget producers whose last batch is older than `expiration_ms`; how many went."""
        stale = [pid for pid, entry in self.entries.items() if now_ms - entry.last_timestamp >= expiration_ms]
        for pid in stale:
            del self.entries[pid]
        return len(stale)
