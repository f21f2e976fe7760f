"""Incremental fetch sessions (KIP-227): the cache and the per-request fetch context.

Theory of operation
-------------------
A fetch session lets a consumer stop re-sending every partition on every Fetch. The broker keeps,
per session, the partitions being fetched with the request parameters last sent for each (fetch
offset, partition max bytes, leader epoch) and the partition state last *returned* for each (high
watermark, last stable offset, log start offset). A request names its session with
`(session_id, session_epoch)`:

    session_id  epoch   meaning
    0           -1      sessionless full fetch: fetch exactly the listed partitions, keep nothing
    0           0       full fetch that asks for a new session (created if the cache has room)
    S != 0      -1      close session S, then sessionless full fetch
    S != 0      0       close session S, then full fetch asking for a new session
    S != 0      e > 0   incremental fetch in session S at epoch e

Rules (Kafka's `FetchManager.newContext` and `FetchSessionCache`):
- A new session starts at epoch 1; each accepted incremental request must carry the session's
  current epoch, and bumps it (wrapping from 2^31-1 to 1). Unknown S -> FETCH_SESSION_ID_NOT_FOUND
  (70); wrong epoch -> INVALID_FETCH_SESSION_EPOCH (71); a session created with topic ids (Fetch
  v13+) used by a request without them, or the reverse -> FETCH_SESSION_TOPIC_ID_ERROR (106). Such
  errors are top-level, with session id 0 and no partitions.
- An incremental request adds the partitions it lists (or updates their request parameters) and
  removes those in `forgotten_topics_data`; the fetch then covers every partition of the session.
  If the session ends up empty it is closed and the request is answered sessionless (id 0).
- An incremental response lists only partitions that must be reported: records returned, an error,
  or a high watermark / last stable offset / log start offset different from the one last sent. A
  partition with an error has its cached high watermark reset to -1, so it is re-sent once healed.
  Partitions that returned records move to the end of the session's order, so a response-size
  limit does not starve the later ones.
- The response echoes the session id: 0 for sessionless, the new id (or 0 when the cache had no
  room) for a full fetch, S for an incremental one.
- The epoch is checked again when the response is generated (a parked Fetch of a duplicated
  request); a mismatch answers INVALID_FETCH_SESSION_EPOCH.

Cache and eviction (bounded by `max.incremental.fetch.session.cache.slots`): when full, a new
session may evict (1) the least recently used session if it has been idle for longer than the
eviction time (120 s in Kafka), else (2) the session with the fewest partitions (ties: lowest id)
among those created more than the eviction time ago, if the new session has strictly more
partitions. Otherwise no session is created and the full fetch is answered with session id 0. (All
sessions here are consumer sessions; Kafka's "privileged" follower sessions do not arise.) An
evicted session's next incremental request gets FETCH_SESSION_ID_NOT_FOUND and the client starts
over with a full fetch. Finding victim (2) scans the cache, which only happens when it is full.
"""

from __future__ import annotations

import random
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from protocol.errors import ErrorCode

from . import metrics

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
MAX_EPOCH = 2**31 - 1

TopicRef = uuid.UUID | str
"""How a request names a topic: its id (Fetch v13+) or its name (before)."""
PartitionKey = tuple[TopicRef, int]


def next_epoch(epoch: int) -> int:
    if epoch < 0:
        return FINAL_EPOCH
    if epoch == MAX_EPOCH:
        return 1
    return epoch + 1


@dataclass(slots=True)
class FetchPartitionRequest:
    """One partition's request parameters, version-free."""

    topic: TopicRef
    partition: int
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = -1

    @property
    def key(self) -> PartitionKey:
        return (self.topic, self.partition)


@dataclass(slots=True)
class PartitionResult:
    """What a read of one partition produced; the response and the session cache both use it."""

    request: FetchPartitionRequest
    error_code: int
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: bytes = b""
    topic_name: str | None = None


@dataclass(slots=True)
class CachedPartition:
    request: FetchPartitionRequest
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1

    def must_respond(self, result: PartitionResult, update: bool) -> bool:
        respond = bool(result.records) or result.error_code != ErrorCode.NONE
        if (
            self.high_watermark != result.high_watermark
            or self.last_stable_offset != result.last_stable_offset
            or self.log_start_offset != result.log_start_offset
        ):
            respond = True
        if update:
            if result.error_code != ErrorCode.NONE:
                self.high_watermark = -1
                self.last_stable_offset = -1
                self.log_start_offset = -1
            else:
                self.high_watermark = result.high_watermark
                self.last_stable_offset = result.last_stable_offset
                self.log_start_offset = result.log_start_offset
        return respond


@dataclass(slots=True, eq=False)
class FetchSession:
    session_id: int
    uses_topic_ids: bool
    created_ms: int
    last_used_ms: int
    epoch: int = 1
    partitions: OrderedDict[PartitionKey, CachedPartition] = field(default_factory=OrderedDict)

    def __len__(self) -> int:
        return len(self.partitions)

    def update(
        self, requested: Iterable[FetchPartitionRequest], forgotten: Iterable[PartitionKey]
    ) -> None:
        for req in requested:
            cached = self.partitions.get(req.key)
            if cached is None:
                self.partitions[req.key] = CachedPartition(req)
            else:
                cached.request = req
        for key in forgotten:
            self.partitions.pop(key, None)


class FetchSessionCache:
    """Sessions by id, least recently used first."""

    def __init__(
        self,
        max_entries: int = 1000,
        eviction_ms: int = 120000,
        *,
        id_factory: Callable[[], int] | None = None,
    ) -> None:
        self.max_entries = max_entries
        self.eviction_ms = eviction_ms
        self._sessions: OrderedDict[int, FetchSession] = OrderedDict()
        self._new_id = id_factory or _random_id
        self.evictions = 0
        self._partitions = 0

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, session_id: int) -> FetchSession | None:
        return self._sessions.get(session_id)

    def remove(self, session_id: int) -> FetchSession | None:
        session = self._sessions.pop(session_id, None)
        if session is not None:
            self._partitions -= len(session)
            self._publish()
        return session

    def touch(self, session: FetchSession, now_ms: int, old_size: int) -> None:
        session.last_used_ms = now_ms
        self._sessions.move_to_end(session.session_id)
        self._partitions += len(session) - old_size
        self._publish()

    def maybe_create(
        self, now_ms: int, uses_topic_ids: bool, partitions: list[CachedPartition]
    ) -> FetchSession | None:
        if self.max_entries <= 0:
            return None
        if len(self._sessions) >= self.max_entries and not self._try_evict(len(partitions), now_ms):
            return None
        session_id = self._new_id()
        while session_id == INVALID_SESSION_ID or session_id in self._sessions:
            session_id = self._new_id()
        session = FetchSession(session_id, uses_topic_ids, now_ms, now_ms)
        for cached in partitions:
            session.partitions[cached.request.key] = cached
        self._sessions[session_id] = session
        self._partitions += len(session)
        self._publish()
        return session

    def _try_evict(self, size: int, now_ms: int) -> bool:
        oldest = next(iter(self._sessions.values()), None)
        if oldest is None:
            return False
        if now_ms - oldest.last_used_ms > self.eviction_ms:
            self._evict(oldest)
            return True
        victim: FetchSession | None = None
        for session in self._sessions.values():
            if now_ms - session.created_ms <= self.eviction_ms:
                continue
            if victim is None or (len(session), session.session_id) < (len(victim), victim.session_id):
                victim = session
        if victim is None or size <= len(victim):
            return False
        self._evict(victim)
        return True

    def _evict(self, session: FetchSession) -> None:
        self.remove(session.session_id)
        self.evictions += 1
        metrics.FETCH_SESSION_EVICTIONS.inc()

    def _publish(self) -> None:
        metrics.FETCH_SESSIONS.set(len(self._sessions))
        metrics.FETCH_SESSION_PARTITIONS.set(self._partitions)


def _random_id() -> int:
    return random.randint(1, MAX_EPOCH - 1)


# -- per-request contexts ----------------------------------------------------------------------


@dataclass(slots=True)
class FetchContext:
    """How one Fetch request relates to the session cache.

    kind: "error" (top-level `error_code`, nothing fetched), "sessionless", "full" (try to create a
    session when responding) or "incremental" (`session` set, epoch already bumped).
    """

    kind: str
    partitions: list[FetchPartitionRequest]
    error_code: int = ErrorCode.NONE
    session: FetchSession | None = None
    expected_epoch: int = 0
    uses_topic_ids: bool = False


def new_context(
    cache: FetchSessionCache,
    *,
    session_id: int,
    epoch: int,
    uses_topic_ids: bool,
    requested: list[FetchPartitionRequest],
    forgotten: list[PartitionKey],
    now_ms: int,
) -> FetchContext:
    if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
        if session_id != INVALID_SESSION_ID:
            cache.remove(session_id)
        kind = "sessionless" if epoch == FINAL_EPOCH else "full"
        return FetchContext(kind, requested, uses_topic_ids=uses_topic_ids)
    session = cache.get(session_id)
    if session is None:
        return FetchContext("error", [], ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
    if session.epoch != epoch:
        return FetchContext("error", [], ErrorCode.INVALID_FETCH_SESSION_EPOCH)
    if session.uses_topic_ids != uses_topic_ids:
        return FetchContext("error", [], ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR)
    old_size = len(session)
    session.update(requested, forgotten)
    if not session.partitions:
        cache.remove(session_id)
        return FetchContext("sessionless", requested, uses_topic_ids=uses_topic_ids)
    cache.touch(session, now_ms, old_size)
    session.epoch = next_epoch(session.epoch)
    return FetchContext(
        "incremental",
        [cached.request for cached in session.partitions.values()],
        session=session,
        expected_epoch=session.epoch,
        uses_topic_ids=uses_topic_ids,
    )


def respond(
    cache: FetchSessionCache, context: FetchContext, results: list[PartitionResult], now_ms: int
) -> tuple[int, int, list[PartitionResult]]:
    """(top-level error, session id, partitions to send) for a context's read results."""
    if context.kind == "error":
        return context.error_code, INVALID_SESSION_ID, []
    if context.kind == "sessionless":
        return ErrorCode.NONE, INVALID_SESSION_ID, results
    if context.kind == "full":
        cached = []
        for result in results:
            entry = CachedPartition(result.request)
            entry.must_respond(result, update=True)
            cached.append(entry)
        session = cache.maybe_create(now_ms, context.uses_topic_ids, cached)
        return ErrorCode.NONE, session.session_id if session is not None else INVALID_SESSION_ID, results
    session = context.session
    assert session is not None
    if session.epoch != context.expected_epoch:
        return ErrorCode.INVALID_FETCH_SESSION_EPOCH, session.session_id, []
    selected = []
    for result in results:
        current = session.partitions.get(result.request.key)
        if current is None:  # forgotten by a later request while this one waited
            continue
        if current.must_respond(result, update=True):
            selected.append(result)
            if result.records:
                session.partitions.move_to_end(result.request.key)
    return ErrorCode.NONE, session.session_id, selected
