"""Share sessions (Kafka's ``ShareSessionCache`` and ``SharePartitionManager.newContext``): memory only.

Theory of operation
-------------------
A share consumer keeps one session per (group, member) with each node that leads some of its
partitions: the set of partitions it fetches there and an epoch that orders its requests. This
coordinator may stand for several nodes (sidecar mode answers ShareFetch on the listener of every
upstream broker), so a session is keyed by (group, member, node) too: ``node`` is the one the
request was sent to ("" for the coordinator's own listeners), and one member's sessions with two
brokers never see each other's epochs or partitions, as on Kafka's brokers. Sessions are not
durable (Kafka keeps them in memory too): a coordinator that restarts has none, and clients answer
SHARE_SESSION_NOT_FOUND by opening a new one.

ShareFetch, by ``ShareSessionEpoch``:

- ``0`` opens a session (a full fetch): acknowledgements on it are INVALID_REQUEST (there is
  nothing they could be for); an existing session of the member is replaced *without* releasing
  its records; a full cache answers SHARE_SESSION_LIMIT_REACHED (Kafka first waits MaxWaitMs: the
  runtime's business). The next epoch is 1.
- ``-1`` closes it (a final fetch): the session must exist (SHARE_SESSION_NOT_FOUND); nothing is
  fetched, the acknowledgements are processed, then the session goes and the member's acquired
  records are released.
- otherwise the session must exist (SHARE_SESSION_NOT_FOUND) at exactly this epoch
  (INVALID_SHARE_SESSION_EPOCH); ``Topics`` are added, ``ForgottenTopicsData`` removed (their
  records stay locked), and the epoch moves on (after INT32_MAX comes 1).

ShareAcknowledge: epoch 0 is INVALID_SHARE_SESSION_EPOCH (it cannot open a session), ``-1`` closes
as above, otherwise as an incremental fetch without partition changes.

A connection that closes ends the sessions it opened, and releases their records; a session
reopened on another connection belongs to that one, so the old connection closing leaves it alone
(KAFKA-19950). All of these errors are top-level in the response.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from uuid import UUID

from coordinator.core.errors import ErrorCode

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
INT32_MAX = 2**31 - 1
DEFAULT_MAX_SESSIONS = 2_000  # group.share.max.share.sessions

SessionKey = tuple[str, str, str]  # (group id, member id, node)
TopicPartition = tuple[UUID, int]


def next_epoch(epoch: int) -> int:
    """Kafka's ``ShareRequestMetadata.nextEpoch``: 0 and -1 are never reached by counting."""
    return 1 if epoch in (INT32_MAX, FINAL_EPOCH) else epoch + 1


@dataclass(slots=True)
class ShareSession:
    group_id: str
    member_id: str
    epoch: int  # the epoch the member's next request must carry
    connection_id: str
    partitions: set[TopicPartition] = field(default_factory=set)
    node: str = ""


@dataclass(frozen=True, slots=True)
class SessionAnswer:
    """What a ShareFetch or ShareAcknowledge may do, given its session epoch."""

    error: ErrorCode = ErrorCode.NONE
    session: ShareSession | None = None
    final: bool = False  # -1: process the acks, fetch nothing, then :meth:`ShareSessions.close`

    @property
    def fetch_partitions(self) -> frozenset[TopicPartition]:
        """What a fetch reads (all the session's partitions); nothing for a final request or an error."""
        if self.error or self.final or self.session is None:
            return frozenset()
        return frozenset(self.session.partitions)


class ShareSessions:
    """The node's share sessions, bounded by ``group.share.max.share.sessions``."""

    def __init__(self, max_sessions: int = DEFAULT_MAX_SESSIONS) -> None:
        self.max_sessions = max_sessions
        self._sessions: dict[SessionKey, ShareSession] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, group_id: str, member_id: str, node: str = "") -> ShareSession | None:
        return self._sessions.get((group_id, member_id, node))

    def fetch(self, group_id: str, member_id: str, epoch: int, connection_id: str, has_acks: bool,
              added: Iterable[TopicPartition] = (), forgotten: Iterable[TopicPartition] = (),
              node: str = "") -> SessionAnswer:
        key = (group_id, member_id, node)
        if epoch == INITIAL_EPOCH:
            if has_acks:
                return SessionAnswer(ErrorCode.INVALID_REQUEST)
            if key not in self._sessions and len(self._sessions) >= self.max_sessions:
                return SessionAnswer(ErrorCode.SHARE_SESSION_LIMIT_REACHED)
            session = ShareSession(group_id, member_id, next_epoch(epoch), connection_id, set(added), node)
            self._sessions[key] = session  # replaces the old one; its records stay where they are
            return SessionAnswer(session=session)
        answer = self._check(key, epoch)
        if answer.error or answer.final:
            return answer
        assert answer.session is not None
        answer.session.partitions.update(added)
        answer.session.partitions.difference_update(forgotten)
        answer.session.epoch = next_epoch(epoch)
        return answer

    def acknowledge(self, group_id: str, member_id: str, epoch: int, node: str = "") -> SessionAnswer:
        if epoch == INITIAL_EPOCH:
            return SessionAnswer(ErrorCode.INVALID_SHARE_SESSION_EPOCH)
        answer = self._check((group_id, member_id, node), epoch)
        if answer.session is not None and not answer.error and not answer.final:
            answer.session.epoch = next_epoch(epoch)
        return answer

    def _check(self, key: SessionKey, epoch: int) -> SessionAnswer:
        session = self._sessions.get(key)
        if session is None:
            return SessionAnswer(ErrorCode.SHARE_SESSION_NOT_FOUND)
        if epoch == FINAL_EPOCH:
            return SessionAnswer(session=session, final=True)
        if epoch != session.epoch:
            return SessionAnswer(ErrorCode.INVALID_SHARE_SESSION_EPOCH)
        return SessionAnswer(session=session)

    def close(self, group_id: str, member_id: str, node: str = "") -> ShareSession | None:
        """End a session after its final request; the caller releases its partitions' records."""
        return self._sessions.pop((group_id, member_id, node), None)

    def close_member(self, group_id: str, member_id: str) -> list[ShareSession]:
        """End every session of a member (fenced: it holds nothing any more, with any node)."""
        gone = [s for s in self._sessions.values() if s.group_id == group_id and s.member_id == member_id]
        for session in gone:
            del self._sessions[(group_id, member_id, session.node)]
        return gone

    def connection_closed(self, connection_id: str) -> list[ShareSession]:
        """The sessions that connection opened, removed; the caller releases their members' records."""
        gone = [s for s in self._sessions.values() if s.connection_id == connection_id]
        for session in gone:
            del self._sessions[(session.group_id, session.member_id, session.node)]
        return gone
