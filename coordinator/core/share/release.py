"""Records coming back without an acknowledgement: lock expiry, a member's session ending, the log start moving.

- :func:`expire_locks` (Kafka's ``releaseAcquisitionLockOnTimeout``): every ACQUIRED offset whose
  lock deadline has passed becomes AVAILABLE again, or ARCHIVED once delivered
  ``share.delivery.count.limit`` times. The runtime calls it when the timer armed at
  :meth:`SharePartition.next_lock_deadline` fires; an acknowledgement that arrives after the
  deadline is refused whether or not this ran yet.
- :func:`release_member` (Kafka's ``releaseAcquiredRecords``): the member's share session ended
  (ShareFetch/ShareAcknowledge epoch -1, its connection closed) and what it held comes back the
  same way; the delivery count is kept (KAFKA-19972). A coordinator taking over after a crash
  has no sessions: calling it for every holder (:func:`release_all`) hands their records out
  again at once instead of after the locks.
- :func:`advance_log_start` (Kafka's ``updateCacheAndOffsets`` after OFFSET_OUT_OF_RANGE): the log
  no longer has the records below ``log_start``; the start offset jumps there and what was in
  flight below it is forgotten (an acknowledgement for it is then skipped, as Kafka skips
  acknowledgements below the start offset).

Each returns the records of the change, already replayed into the partition.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from .acknowledgement import released
from .config import ShareConfig
from .partition import Change, SharePartition, commit
from .records import ShareRecord, StateRun
from .runs import ACQUIRED, Runs


def expire_locks(p: SharePartition, now_ms: int, config: ShareConfig) -> list[ShareRecord]:
    # Only the batches whose earliest deadline has passed hold an expired lock.
    due = p.batches_locked_until(now_ms)
    return _release(p, due, lambda r: r.lock_deadline <= now_ms, config, lock_expired=True)


def release_member(p: SharePartition, member_id: str, config: ShareConfig) -> list[ShareRecord]:
    return _release(p, list(p.batches), lambda r: r.member_id == member_id, config)


def release_all(p: SharePartition, config: ShareConfig) -> list[ShareRecord]:
    return _release(p, list(p.batches), lambda r: True, config)


def _release(p: SharePartition, firsts: Iterable[int], which: Callable[[StateRun], bool], config: ShareConfig,
             lock_expired: bool = False) -> list[ShareRecord]:
    """Every ACQUIRED run ``which`` picks in the batches at ``firsts`` given back, run by run."""
    change = Change()
    for first in firsts:
        moved: Runs = [released(r, r.first, r.last, config) for r in p.runs[first] if r.state == ACQUIRED and which(r)]
        if moved:
            change.set(p, first, moved)
    return commit(p, change, lock_expired=lock_expired)


def advance_log_start(p: SharePartition, log_start: int) -> list[ShareRecord]:
    if not p.initialized or log_start <= p.start_offset:
        return []
    return commit(p, Change(start_offset=log_start))
