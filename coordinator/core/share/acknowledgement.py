"""Acknowledgement: accept, release, reject, gap and renew (Kafka's ``SharePartition.acknowledge``).

Theory of operation
-------------------
A member acknowledges ranges of offsets it holds, piggy-backed on a ShareFetch or in a
ShareAcknowledge. First the shape of the request's batches is checked the way Kafka's
``KafkaApis.validateAcknowledgementBatches`` does (:func:`validate_batches`, INVALID_REQUEST for
the partition). Then, per partition and atomically (the first bad offset fails the partition and
nothing of it changes, as Kafka rolls back the transitions it started):

- a range wholly below the start offset is skipped: those records are finished already;
- a partition with nothing in flight answers INVALID_RECORD_STATE ("batch record not found"), a
  range reaching past the last acquired offset INVALID_REQUEST (records never delivered);
- each offset must be ACQUIRED by this member with its lock still running, else
  INVALID_RECORD_STATE: already acknowledged, released, owned by someone else, or the lock
  expired (even if the expiry timer has not fired yet: the deadline is what counts);
- then GAP and REJECT archive, ACCEPT acknowledges, RELEASE makes the record AVAILABLE again
  (ARCHIVED if it was delivered ``share.delivery.count.limit`` times), RENEW (v2) restarts the
  lock and changes nothing else (INVALID_RECORD_STATE when ``share.renew.acknowledge.enable`` is
  off).

The change is written as records before the answer (the caller's log entry). A RENEW is written
too, unlike Kafka's, because the lock deadline is part of our records: a restart must not shorten
it below what the client was told.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import groupby

from coordinator.core.errors import ErrorCode

from .config import ShareConfig
from .partition import Change, SharePartition, commit
from .records import ShareRecord, StateRun
from .runs import ACKNOWLEDGED, ACQUIRED, ARCHIVED, AVAILABLE, Runs, run_index


class AckType(enum.IntEnum):
    """Acknowledgement types on the wire (Kafka's ``AcknowledgeType`` plus ``GAP``)."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4  # ShareFetch / ShareAcknowledge v2 (KIP-1222)


@dataclass(frozen=True, slots=True)
class AckBatch:
    """One ``AcknowledgementBatches`` entry: one type for the whole range, or one per offset."""

    first_offset: int
    last_offset: int
    types: tuple[int, ...]

    def type_at(self, offset: int) -> int:
        return self.types[0] if len(self.types) == 1 else self.types[offset - self.first_offset]


@dataclass(frozen=True, slots=True)
class AckResult:
    error: ErrorCode
    message: str | None
    records: list[ShareRecord]


def validate_batches(batches: Sequence[AckBatch], api_version: int, is_renew_ack: bool) -> str | None:
    """Why a partition's batches are malformed (answered INVALID_REQUEST), or None."""
    highest = AckType.RENEW if api_version >= 2 else AckType.REJECT
    previous_last: int | None = None
    for batch in batches:
        if batch.first_offset < 0 or batch.last_offset < batch.first_offset:
            return "first offset must be >= 0 and <= last offset"
        # Kafka's check is against the previous batch's last offset itself, so two batches may
        # share that one offset; acknowledging it twice then fails on its state, atomically.
        if previous_last is not None and batch.first_offset < previous_last:
            return "acknowledgement batches must be ascending and must not overlap"
        previous_last = batch.last_offset
        size = batch.last_offset - batch.first_offset + 1
        if not batch.types or (len(batch.types) != 1 and len(batch.types) != size):
            return "acknowledge types must be one for the batch or one per offset"
        for t in batch.types:
            if not 0 <= t <= highest:
                return f"invalid acknowledge type {t}"
            if t == AckType.RENEW and not is_renew_ack:
                return "a RENEW acknowledgement needs IsRenewAck"
    return None


def acknowledge(
    p: SharePartition, member_id: str, batches: Sequence[AckBatch], now_ms: int, config: ShareConfig
) -> AckResult:
    """Acknowledge for ``member_id``; on success replay the records (the caller logs them).

    Checked and moved per run of the state (the offsets of one acquisition are one run), each
    share batch the range crosses at a time; a refusal names the first offset refused."""
    change = Change()
    # The new states per share batch, set at the end: one overlay per batch however many ranges
    # the request acknowledges in it (a redelivery of scattered offsets is one range each).
    pending: dict[int, Runs] = {}
    for batch in batches:
        if batch.last_offset < p.start_offset:
            continue
        if not p.batches:
            return _refused(ErrorCode.INVALID_RECORD_STATE, "batch record not found: nothing is in flight")
        if batch.last_offset >= p.next_offset:
            return _refused(ErrorCode.INVALID_REQUEST, "the batch reaches past the acquired records")
        offset = max(batch.first_offset, p.start_offset)
        while offset <= batch.last_offset:
            first = p.batch_of(offset)
            if first is None:
                return _refused(ErrorCode.INVALID_RECORD_STATE, f"offset {offset} is not acquired")
            last = min(batch.last_offset, p.batches[first])
            held = pending.get(first)
            if held is not None and held[-1].last >= offset:  # acknowledged again in this request
                change.set(p, first, pending.pop(first))
            moved = _moved(change.runs_of(p, first), offset, last, member_id, batch, now_ms, config)
            if isinstance(moved, AckResult):
                return moved
            pending.setdefault(first, []).extend(moved)
            offset = last + 1
    for first, moved in pending.items():
        change.set(p, first, moved)
    # Its only ACQUIRED states are renewals (RENEW keeps the record), not deliveries.
    return AckResult(ErrorCode.NONE, None, commit(p, change, delivers=False))


def _moved(runs: Runs, lo: int, hi: int, member_id: str, batch: AckBatch, now_ms: int,
           config: ShareConfig) -> Runs | AckResult:
    """The new states of ``lo..hi`` (within one share batch whose runs are ``runs``), or the refusal."""
    moved: Runs = []
    expected = lo
    for i in range(run_index(runs, lo), len(runs)):  # from the run holding lo, without copying the rest
        r = runs[i]
        if r.first > hi:
            break
        if r.first > expected:
            break  # offsets without a state: refused below
        a, b = max(r.first, lo), min(r.last, hi)
        if r.state != ACQUIRED:
            return _refused(ErrorCode.INVALID_RECORD_STATE, f"offset {a} is not acquired")
        if r.member_id != member_id:
            return _refused(ErrorCode.INVALID_RECORD_STATE, f"offset {a} is acquired by another member")
        if r.lock_deadline <= now_ms:
            return _refused(ErrorCode.INVALID_RECORD_STATE, f"the lock on offset {a} expired")
        if len(batch.types) == 1:
            spans = [(batch.types[0], a, b)]
        else:  # one type per offset: consecutive equal types move together
            spans = []
            at = a
            for ack, same in groupby(batch.types[a - batch.first_offset:b - batch.first_offset + 1]):
                n = len(list(same))
                spans.append((ack, at, at + n - 1))
                at += n
        for ack, x, y in spans:
            if ack == AckType.RENEW and not config.renew_enabled:
                return _refused(ErrorCode.INVALID_RECORD_STATE, "share.renew.acknowledge.enable is false")
            moved.append(_after(r, x, y, ack, now_ms, config))
        expected = b + 1
    if expected <= hi:
        return _refused(ErrorCode.INVALID_RECORD_STATE, f"offset {expected} is not acquired")
    return moved


def _after(current: StateRun, first: int, last: int, ack: int, now_ms: int, config: ShareConfig) -> StateRun:
    if ack == AckType.ACCEPT:
        return StateRun(first, last, ACKNOWLEDGED, current.delivery_count)
    if ack == AckType.RELEASE:
        return released(current, first, last, config)
    if ack == AckType.RENEW:
        return StateRun(first, last, ACQUIRED, current.delivery_count, current.member_id,
                        now_ms + config.lock_duration_ms)
    return StateRun(first, last, ARCHIVED, current.delivery_count)  # GAP, REJECT


def released(current: StateRun, first: int, last: int, config: ShareConfig) -> StateRun:
    """Acquired offsets given back: AVAILABLE, or ARCHIVED once delivered the limit's times."""
    if current.delivery_count >= config.delivery_count_limit:
        return StateRun(first, last, ARCHIVED, current.delivery_count)
    return StateRun(first, last, AVAILABLE, current.delivery_count)


def _refused(code: ErrorCode, message: str) -> AckResult:
    return AckResult(code, message, [])
