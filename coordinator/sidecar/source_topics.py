"""Sidecar mode: streams groups waiting for source topics the sidecar's view of the upstream lacks.

A streams member names its topology (and so its source topics) only when it joins; its group then
reports MISSING_SOURCE_TOPICS until the sidecar's view of the upstream's topics has them, and only
a read of the upstream's Metadata brings them (every `upstream.metadata.max.age.ms`, five minutes
by default). A topic created upstream just before the app started may not be in the broker's
metadata yet when the join's read asks for it; one created after the app started, not at all. So
a group whose joining topology named unknown source topics asks for another read on its members'
later heartbeats, spaced by a back-off that doubles from `FIRST_S` to `MOST_S`, until its source
topics are all known (what Kafka's broker does without asking: its metadata image is pushed).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

FIRST_S = 0.2
MOST_S = 30.0
MAX_GROUPS = 1_000
"""Groups remembered at most (the oldest forgotten first): each costs its source topic names."""


@dataclass(frozen=True, slots=True)
class _Waiting:
    names: frozenset[str]
    due: float
    delay: float


class AwaitedSources:
    def __init__(self, known: Callable[[str], bool], refresh: Callable[[], None],
                 clock: Callable[[], float] = time.monotonic) -> None:
        """`known`: the sidecar's view has the topic; `refresh`: ask for a read of the upstream."""
        self._known = known
        self._refresh = refresh
        self._clock = clock
        self._waiting: dict[str, _Waiting] = {}

    def joined(self, group_id: str, sources: Iterable[str]) -> None:
        """A member joined with a topology reading `sources`: read at once if one is unknown."""
        unknown = frozenset(name for name in sources if not self._known(name))
        self._waiting.pop(group_id, None)
        if not unknown:
            return
        self._refresh()
        if len(self._waiting) >= MAX_GROUPS:
            del self._waiting[next(iter(self._waiting))]
        self._waiting[group_id] = _Waiting(unknown, self._clock() + FIRST_S, FIRST_S)

    def heartbeat(self, group_id: str) -> None:
        """A member of `group_id` heartbeats: read again if its sources are still unknown and due."""
        waiting = self._waiting.get(group_id)
        if waiting is None:
            return
        if all(self._known(name) for name in waiting.names):
            del self._waiting[group_id]
            return
        now = self._clock()
        if now < waiting.due:
            return
        self._refresh()
        delay = min(waiting.delay * 2, MOST_S)
        self._waiting[group_id] = _Waiting(waiting.names, now + delay, delay)

    def __len__(self) -> int:
        return len(self._waiting)
