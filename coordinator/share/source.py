"""The record source of share partitions: what a ShareFetch reads from the log, in either mode.

A share partition's records live in a log the coordinator does not own in sidecar mode (the
upstream's) and does own in embedded mode (the data plane's); the acquisition needs the same
thing from both, which is :class:`PartitionRead`:

- the record batches from the one holding the asked offset, whole, as the wire carries them
  (Kafka's ShareFetch sends the fetched batches as they are and lists the acquired ranges beside
  them, so a batch's bytes are never re-encoded);
- per batch its base and last offset, whether it is a control batch (a transaction marker: its
  offset is acquired with the rest and the client acknowledges it as GAP, as Kafka's does) and
  whether it belongs to an aborted transaction (read ``read_committed``: Kafka's share partition
  archives those offsets instead of delivering them, ``maybeFilterAbortedTransactionalAcquiredRecords``);
- the partition's log start offset, high watermark and last stable offset at the time of the read
  (nothing at or past the last stable offset is returned).

A source reads in one of two ways, the same read either way: ``read_now`` answers at once where
the records are in this process (embedded mode's logs; a cached batch), None where they are not
and ``read`` must be awaited (an upstream round trip). A ShareFetch whose reads all answer at once
is served without a task or a loop turn of its own (``fetch_apis``).

A source refuses in two ways only: :class:`SourceUnavailable` carrying Kafka's code for the
partition (no leader, the leader moved or is down, a failing disk: retriable, the partition is
answered with that code and the client fetches again; an upstream too old to be read at all:
UNSUPPORTED_VERSION) and :class:`OffsetOutOfRange` (the records are gone: it carries the log
start offset, where the share partition's start offset must jump, Kafka's
``updateCacheAndOffsets``).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from protocol.errors import ErrorCode

_HEADER = struct.Struct(">qiibIhiqqqhii")  # baseOffset .. recordsCount: 61 bytes
_TRANSACTIONAL = 0x10
_CONTROL = 0x20


@dataclass(frozen=True, slots=True)
class PartitionRef:
    """A log partition: the topic by id (what share-partition state is keyed by) and by name
    (what an upstream Fetch below v13 and the data plane's catalog speak)."""

    topic_id: uuid.UUID
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class FetchedBatch:
    """One record batch of the log, as its bytes and what acquisition needs of its header."""

    base_offset: int
    last_offset: int
    data: bytes
    producer_id: int = -1
    transactional: bool = False
    control: bool = False
    aborted: bool = False
    """A data batch of a transaction that was aborted (known only from a ``read_committed`` read)."""

    @property
    def size(self) -> int:
        return len(self.data)


@dataclass(frozen=True, slots=True)
class PartitionRead:
    batches: list[FetchedBatch]
    log_start_offset: int
    high_watermark: int
    last_stable_offset: int

    @property
    def end_offset(self) -> int:
        """The offset after the last batch read (the asked offset when none was)."""
        return self.batches[-1].last_offset + 1 if self.batches else -1

    def offsets(self) -> list[tuple[int, int]]:
        """(base offset, last offset) of each batch, ascending: what the core's acquisition reads."""
        return [(b.base_offset, b.last_offset) for b in self.batches]

    def aborted_ranges(self) -> list[tuple[int, int]]:
        """(first, last) offsets of the batches of aborted transactions."""
        return [(b.base_offset, b.last_offset) for b in self.batches if b.aborted]

    def size(self) -> int:
        return sum(b.size for b in self.batches)


class SourceUnavailable(Exception):
    """The partition cannot be read now (retriable): ``code`` is Kafka's error for the partition."""

    def __init__(self, code: ErrorCode, detail: str) -> None:
        super().__init__(f"{code.name}: {detail}")
        self.code = code


class OffsetOutOfRange(Exception):
    """The asked offset is outside the log (the records were deleted): ``log_start_offset`` is where it begins."""

    def __init__(self, offset: int, log_start_offset: int) -> None:
        super().__init__(f"offset {offset} is out of range (log start offset {log_start_offset})")
        self.offset = offset
        self.log_start_offset = log_start_offset


class RecordSource(Protocol):
    async def read(self, ref: PartitionRef, offset: int, max_bytes: int) -> PartitionRead:
        """Whole batches from the one holding ``offset``, up to ``max_bytes`` in total but always
        the first one (KIP-74), only below the last stable offset; none when there is nothing yet."""
        ...

    def read_now(self, ref: PartitionRef, offset: int, max_bytes: int) -> PartitionRead | None:
        """The same read when it needs no waiting, else None (then ``read`` is awaited); it
        refuses as ``read`` does."""
        ...


class CorruptBatch(Exception):
    """Bytes that are not a sequence of magic-2 batches (a source never returns those to a caller)."""


def split_batches(data: bytes | bytearray | memoryview) -> Iterator[tuple[int, int, int, int, bytes]]:
    """(base offset, last offset, attributes, producer id, bytes) of each complete batch in
    ``data``; a partial last batch (a broker may cut one at its byte limit) is left out. Only
    headers are read: the records stay as they are, compressed or not."""
    view = memoryview(data)
    pos = 0
    while pos + _HEADER.size <= len(view):
        base, length, _, magic, _, attributes, last_delta, _, _, producer_id, _, _, _ = _HEADER.unpack_from(view, pos)
        end = pos + 12 + length
        if end > len(view):
            return
        if magic != 2 or length < _HEADER.size - 12 or last_delta < 0:
            raise CorruptBatch(f"batch at offset {base}: magic {magic}, length {length}")
        # A buffer that is one whole batch (the data plane stores batch by batch) is passed on as it
        # is: bytes are immutable, so no copy is needed to keep it.
        batch = data if isinstance(data, bytes) and pos == 0 and end == len(view) else bytes(view[pos:end])
        yield base, base + last_delta, attributes, producer_id, batch
        pos = end


def batch_of(raw: tuple[int, int, int, int, bytes], aborted: bool = False) -> FetchedBatch:
    base, last, attributes, producer_id, data = raw
    return FetchedBatch(base, last, data, producer_id, bool(attributes & _TRANSACTIONAL),
                        bool(attributes & _CONTROL), aborted)


def mark_aborted(raws: Sequence[tuple[int, int, int, int, bytes]],
                 aborted_transactions: Sequence[tuple[int, int]]) -> list[FetchedBatch]:
    """Batches with their aborted flag from a ``read_committed`` Fetch's aborted transactions
    ((producer id, first offset) each), the way Kafka's consumer filters them (``CompletedFetch``):
    a producer's transactional data batches are aborted from its aborted transaction's first offset
    until its ABORT marker (a control batch of that producer)."""
    pending = sorted((first, pid) for pid, first in aborted_transactions)
    aborting: set[int] = set()
    out: list[FetchedBatch] = []
    for raw in raws:
        _, last, attributes, producer_id, _ = raw
        while pending and pending[0][0] <= last:
            aborting.add(pending.pop(0)[1])
        if attributes & _CONTROL:
            out.append(batch_of(raw))
            aborting.discard(producer_id)  # its marker ends the transaction, commit or abort alike
            continue
        out.append(batch_of(raw, bool(attributes & _TRANSACTIONAL) and producer_id in aborting))
    return out
